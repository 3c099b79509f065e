#if canImport(Glibc)
    import Glibc
#endif
import YAML

/// A setting given on the command line (`--set stage.setting=value`, `--duration S`): applied to the
/// parsed file before validation, so it is checked exactly like the file, and its errors name it.
public struct SettingOverride: Sendable {
    /// The stage, or `everySource` for every source stage whose type has the setting (`--duration`).
    public let stage: String
    public static let everySource = "*"
    public let setting: String
    public let value: String
    /// How the user wrote it, e.g. "--set fusion.filter=kalman".
    public let origin: String

    public init(stage: String, setting: String, value: String, origin: String) {
        self.stage = stage
        self.setting = setting
        self.value = value
        self.origin = origin
    }

    /// Parses "stage.setting=value" (a list as "[a, b]").
    public init(parsing text: String, origin: String) throws(PipelineConfigError) {
        guard let eq = text.firstIndex(of: "="), let dot = text[..<eq].firstIndex(of: "."),
            dot > text.startIndex, text.index(after: dot) < eq
        else {
            throw PipelineConfigError(
                file: "", mark: YAMLMark(line: 0, column: 0),
                message: "expected STAGE.SETTING=VALUE, e.g. fusion.filter=complementary", origin: origin)
        }
        self.init(
            stage: String(text[..<dot]), setting: String(text[text.index(after: dot)..<eq]),
            value: String(text[text.index(after: eq)...]), origin: origin)
    }

    /// Override nodes carry line 0 and their index + 1 as the column, a position no file has.
    static func mark(_ index: Int) -> YAMLMark { YAMLMark(line: 0, column: index + 1) }

    /// Replaces or adds each override's setting in the stage entries of a parsed file.
    static func apply(_ overrides: [SettingOverride], to entries: inout [(key: YAMLNode, value: YAMLNode)])
        throws(PipelineConfigError)
    {
        for (index, o) in overrides.enumerated() {
            let names = entries.compactMap { $0.key.scalar }
            if o.stage == everySource {
                for i in entries.indices {
                    guard let typeName = entries[i].value["type"]?.scalar, let type = StageType.named(typeName),
                        type.isSource, type.settings.contains(where: { $0.accepts(o.setting) })
                    else { continue }
                    set(o, index: index, in: &entries[i])
                }
                continue
            }
            guard let i = entries.firstIndex(where: { $0.key.scalar == o.stage }), entries[i].value.mapping != nil
            else {
                throw PipelineConfigError(
                    file: "", mark: mark(index),
                    message:
                        "no stage '\(o.stage)'\(didYouMean(o.stage, in: names)) (stages: "
                        + "\(names.joined(separator: ", ")))"
                )
            }
            set(o, index: index, in: &entries[i])
        }
    }

    /// Replaces or adds the override's setting in one stage's mapping.
    static func set(_ o: SettingOverride, index: Int, in entry: inout (key: YAMLNode, value: YAMLNode)) {
        guard var body = entry.value.mapping else { return }
        let at = mark(index)
        let value: YAMLNode
        if o.value.hasPrefix("[") && o.value.hasSuffix("]") {
            let items = o.value.dropFirst().dropLast().split(separator: ",").map {
                YAMLNode(value: .scalar($0.trimmingCharacters(in: .whitespaces), plain: true), mark: at)
            }
            value = YAMLNode(value: .sequence(items), mark: at)
        } else {
            value = YAMLNode(value: .scalar(o.value, plain: !o.value.isEmpty), mark: at)
        }
        let key = YAMLNode(value: .scalar(o.setting, plain: true), mark: at)
        // The file may give the setting under its former name (or the override may): one replaces the other.
        let spec = entry.value["type"]?.scalar.flatMap(StageType.named)?.settings.first { $0.accepts(o.setting) }
        let names = spec.map { [$0.name] + $0.formerNames } ?? [o.setting]
        if let j = body.firstIndex(where: { names.contains($0.key.scalar ?? "") }) {
            body[j] = (key, value)
            body.removeAll { names.contains($0.key.scalar ?? "") && $0.key.mark != at }
        } else {
            body.append((key, value))
        }
        entry.value = YAMLNode(value: .mapping(body), mark: entry.value.mark)
    }

    /// An error at an override's position names the override instead.
    static func attribute(_ error: PipelineConfigError, to overrides: [SettingOverride]) -> PipelineConfigError {
        guard error.mark.line == 0, error.mark.column >= 1, error.mark.column <= overrides.count else { return error }
        var e = error
        e.origin = overrides[error.mark.column - 1].origin
        return e
    }

    /// Why a path cannot be read as a pipeline file, in words; nil when it looks readable.
    static func unreadable(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return "cannot read the file: \(errnoText)" }
        if (st.st_mode & S_IFMT) == S_IFDIR { return "is a directory, not a pipeline file" }
        return nil
    }

    static var errnoText: String { String(cString: strerror(errno)) }
}
