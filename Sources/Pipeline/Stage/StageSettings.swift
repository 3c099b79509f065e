import CompassCore
import WireFormat
import YAML

/// A stage's settings, checked against its type's specs when the file loads (kind, choices, range),
/// defaults filled in. Each stage reads them once into its own typed `Settings` struct.
public struct StageSettings: Sendable {
    var strings: [String: String] = [:]
    var numbers: [String: Double] = [:]
    var lists: [String: [String]] = [:]
    /// Where each setting given in the file is (for errors found by a stage type's own check).
    var marks: [String: YAMLMark] = [:]
    /// Settings given under a former name.
    public private(set) var deprecations: [SettingDeprecation] = []

    public func string(_ key: String) -> String { strings[key] ?? "" }
    public func number(_ key: String) -> Double { numbers[key] ?? 0 }
    public func integer(_ key: String) -> Int { Int(numbers[key] ?? 0) }
    public func bool(_ key: String) -> Bool { numbers[key] == 1 }
    public func list(_ key: String) -> [String] { lists[key] ?? [] }
    public func numberList(_ key: String) -> [Double] { (lists[key] ?? []).compactMap(Double.init) }
    /// An optional number: nil when left empty.
    public func optionalNumber(_ key: String) -> Double? { numbers[key] }

    init(
        type: StageType, stage: String, at stageMark: YAMLMark, nodes: [(key: YAMLNode, value: YAMLNode)],
        file: String, environment: [String: String]
    ) throws(PipelineConfigError) {
        let specs = type.settings
        var given: [String: YAMLNode] = [:]
        for (k, v) in nodes {
            guard let key = k.scalar, let spec = specs.first(where: { $0.accepts(key) }) else {
                throw PipelineConfigError(
                    file: file, mark: k.mark,
                    message: "unknown setting '\(k.scalar ?? k.kind)' for \(type.name) stage '\(stage)'"
                        + didYouMean(k.scalar ?? "", in: specs.map(\.name))
                        + " (accepted: \(specs.map(\.name).joined(separator: ", ")))")
            }
            let name = spec.name
            if given[name] != nil {
                throw PipelineConfigError(
                    file: file, mark: k.mark,
                    message: "'\(name)' of stage '\(stage)' is given twice ('\(key)' is its former name)")
            }
            if key != name {
                deprecations.append(
                    SettingDeprecation(file: file, mark: k.mark, stage: stage, former: key, current: name))
            }
            given[name] = v
            marks[name] = v.mark
        }
        for spec in specs {
            let value: SettingValue
            if let node = given[spec.name] {
                value = try SettingValue(node, spec: spec, stage: stage, file: file, environment: environment)
            } else {
                guard let d = spec.defaultValue else {
                    throw PipelineConfigError(
                        file: file, mark: stageMark,
                        message: "\(type.name) stage '\(stage)' needs '\(spec.name)' (\(spec.help))")
                }
                value = SettingValue(defaultText: d, kind: spec.kind)
            }
            try store(value, spec: spec, stage: stage, file: file)
        }
        if let problem = type.check(self) {
            throw PipelineConfigError(
                file: file, mark: marks[problem.setting] ?? stageMark,
                message: "'\(problem.setting)' of stage '\(stage)': \(problem.message)")
        }
    }

    /// Every setting at its default (a required one at "x"): a stage's settings as a file that gives
    /// nothing would have them (tests, and the check that ties a settings table to its struct).
    init(defaultsOf specs: [SettingSpec]) {
        for spec in specs { try? set(spec, to: spec.defaultValue ?? "x") }
    }

    /// Sets one value given as text (a list as comma-separated items), checked as a file's would be.
    mutating func set(_ spec: SettingSpec, to text: String) throws(PipelineConfigError) {
        try store(SettingValue(defaultText: text, kind: spec.kind), spec: spec, stage: "", file: "")
    }

    /// Converts a textual value to its kind and checks choices and range.
    private mutating func store(_ value: SettingValue, spec: SettingSpec, stage: String, file: String)
        throws(PipelineConfigError)
    {
        func fail(_ detail: String) -> PipelineConfigError {
            PipelineConfigError(
                file: file, mark: value.mark, message: "'\(spec.name)' of stage '\(stage)' must be \(detail)")
        }
        func checked(_ text: String) throws(PipelineConfigError) -> Double {
            guard let d = Double(text), d.isFinite else { throw fail("\(spec.kind.article), found '\(text)'") }
            if let range = spec.range, !range.contains(d) {
                throw fail(
                    "between \(SettingSpec.text(range.lowerBound)) and \(SettingSpec.text(range.upperBound)), "
                        + "found '\(text)'"
                )
            }
            return d
        }
        func chosen(_ text: String) throws(PipelineConfigError) {
            guard spec.choices.isEmpty || spec.choices.contains(text) else {
                throw fail(
                    "one of \(spec.choices.joined(separator: ", ")), found "
                        + "'\(text)'\(didYouMean(text, in: spec.choices))"
                )
            }
        }
        switch spec.kind {
        case .string:
            try chosen(value.text)
            strings[spec.name] = spec.namesTopics ? PipelineTopics.named(value.text) : value.text
        case .number:
            numbers[spec.name] = try checked(value.text)
        case .optionalNumber:
            strings[spec.name] = value.text
            if !value.text.isEmpty { numbers[spec.name] = try checked(value.text) }
        case .integer:
            guard let n = Int(value.text) else { throw fail("\(spec.kind.article), found '\(value.text)'") }
            numbers[spec.name] = try checked(String(n))
        case .bool:
            switch value.text {
            case "true", "yes", "on": numbers[spec.name] = 1
            case "false", "no", "off": numbers[spec.name] = 0
            default: throw fail("\(spec.kind.article), found '\(value.text)'")
            }
        case .magnetometerList:
            // Expanded into plain settings before any stage reads its own (SourceMagnetometers).
            throw fail("\(spec.kind.article) that only a source's shorthand takes")
        case .rotation:
            switch SettingSpec.rotationValue(value.text, items: value.items, choices: spec.choices) {
            case .success(let stored): strings[spec.name] = stored
            case .failure(let refusal): throw fail(refusal.detail)
            }
        case .stringList:
            for item in value.items { try chosen(item) }
            lists[spec.name] = spec.namesTopics ? value.items.map { PipelineTopics.named($0) } : value.items
        case .numberList(let n):
            guard value.items.count == n, value.items.allSatisfy({ Double($0)?.isFinite == true }) else {
                throw fail("\(spec.kind.article), found \(value.items.count) item(s)")
            }
            for item in value.items { _ = try checked(item) }
            lists[spec.name] = value.items
        }
    }
}

/// A problem a stage type's own check finds among its settings (two that must go together, say).
public struct SettingProblem: Sendable, Error {
    public let setting: String
    public let message: String
    public init(_ setting: String, _ message: String) {
        self.setting = setting
        self.message = message
    }
}

/// One setting's value as text (variables substituted), before it is converted to its kind.
private struct SettingValue {
    var text = ""
    var items: [String] = []
    var mark = YAMLMark(line: 0, column: 0)

    init(defaultText: String, kind: SettingSpec.Kind) {
        text = defaultText
        switch kind {
        case .stringList, .numberList:
            items = defaultText.isEmpty ? [] : defaultText.split(separator: ",").map(String.init)
        case .rotation where defaultText.contains(","):
            items = defaultText.split(separator: ",").map(String.init)
        default: break
        }
    }

    init(_ node: YAMLNode, spec: SettingSpec, stage: String, file: String, environment: [String: String])
        throws(PipelineConfigError)
    {
        mark = node.mark
        func bad() -> PipelineConfigError {
            PipelineConfigError(
                file: file, mark: node.mark,
                message: "'\(spec.name)' of stage '\(stage)' must be \(spec.kind.article), "
                    + "found \(node.kind)\(node.scalar.map { " '\($0)'" } ?? "")")
        }
        switch spec.kind {
        case .rotation where node.sequence != nil:
            for item in node.sequence! {
                guard let s = item.scalar, !item.isNull else { throw bad() }
                items.append(try substitute(s, item, environment, file))
            }
        case .stringList, .numberList:
            guard let sequence = node.sequence else { throw bad() }
            for item in sequence {
                guard let s = item.scalar, !item.isNull else { throw bad() }
                items.append(try substitute(s, item, environment, file))
            }
        default:
            guard let s = node.scalar, !node.isNull else { throw bad() }
            text = try substitute(s, node, environment, file)
        }
    }
}

/// A setting given under the name it had before: accepted, and worth a warning that names the new one.
public struct SettingDeprecation: Sendable, Equatable, CustomStringConvertible {
    public let file: String
    public let mark: YAMLMark
    public let stage: String
    public let former: String
    public let current: String

    public var description: String {
        let place = mark.line > 0 ? "\(file):\(mark.line): " : file.isEmpty ? "" : "\(file): "
        return "\(place)'\(former)' of stage '\(stage)' is now '\(current)'; the old name still works but will go"
    }
}
