import Pipeline

/// `fusion-node stages`: every registered stage type with its settings, as Markdown (the README's
/// reference is this output).
enum StagesCommand {
    static let titles: [(StageRole, String)] = [(.source, "Sources"), (.transform, "Transforms"), (.sink, "Sinks")]

    static func run() -> Int32 {
        for (role, title) in titles {
            print("#### \(title)\n")
            for type in StageType.allCases where type.role == role {
                print("`type: \(type.name)`: \(type.summary)\n")
                print("| setting | kind | default | accepted | meaning |")
                print("|---|---|---|---|---|")
                for s in type.settings {
                    let d = s.defaultValue.map { $0.isEmpty ? "\"\"" : "`\($0)`" } ?? "required"
                    let accepted = s.acceptedValues.isEmpty ? "" : "`\(s.acceptedValues)`"
                    print(
                        "| `\(s.name)` | \(s.kind.referenceName) | \(d) | "
                            + "\(accepted.replacingOccurrences(of: "|", with: "\\|")) | "
                            + "\(s.help.replacingOccurrences(of: "|", with: "\\|")) |"
                    )
                }
                print("")
            }
        }
        return 0
    }
}
