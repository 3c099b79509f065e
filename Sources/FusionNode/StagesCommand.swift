import CompassCore
import Pipeline

/// `fusion-node stages`: every registered stage type with its settings, as Markdown (docs/stages.md's
/// reference is this output).
enum StagesCommand {
    static let help = CommandHelp(
        path: "stages",
        summary: "Every pipeline stage type with its settings, kinds, units, defaults and accepted values (Markdown).",
        positionals: "[TYPE]",
        details: "With TYPE, only that stage type. docs/stages.md is this output.",
        examples: ["fusion-node stages", "fusion-node stages fusion"])

    static let titles: [(StageRole, String)] = [(.source, "Sources"), (.transform, "Transforms"), (.sink, "Sinks")]

    static func run(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(0...1)
        var only: StageType?
        if let name = a.positionals.first {
            let names = StageType.allCases.map(\.name)
            guard let type = StageType.named(name) else {
                throw UsageError(
                    message:
                        "unknown stage type '\(name)'\(didYouMean(name, in: names)) (types: "
                        + "\(names.joined(separator: ", ")))",
                    command: "stages")
            }
            only = type
        }
        for (role, title) in titles {
            if only == nil { print("#### \(title)\n") }
            for type in StageType.allCases where type.role == role && (only == nil || only == type) {
                print("`type: \(type.name)`: \(type.summary)\n")
                print("| setting | kind | unit | default | accepted | meaning |")
                print("|---|---|---|---|---|---|")
                for s in type.settings + type.shorthandSettings {
                    let d = s.defaultValue.map { $0.isEmpty ? "\"\"" : "`\($0)`" } ?? "required"
                    let accepted = s.acceptedValues.isEmpty ? "" : "`\(s.acceptedValues)`"
                    let former = s.formerNames.map { " (formerly `\($0)`, still read with a warning)" }.joined()
                    print(
                        "| `\(s.name)` | \(s.kind.referenceName) | \(s.unit) | \(d) | "
                            + "\(accepted.replacingOccurrences(of: "|", with: "\\|")) | "
                            + "\(s.help.replacingOccurrences(of: "|", with: "\\|"))\(former) |"
                    )
                }
                if (type.settings + type.shorthandSettings).contains(where: { $0.kind == .rotation }) {
                    print(
                        "\nRotation names (ArduPilot's `Rotation` list): "
                            + MountingRotation.names.map { "`\($0)`" }.joined(separator: ", "))
                }
                print("")
            }
        }
        return .complete
    }
}
