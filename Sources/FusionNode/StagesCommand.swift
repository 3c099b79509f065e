import Foundation
import Pipeline

/// `fusion-node stages`: every stage type with its settings, as Markdown (the README's reference is
/// this output).
enum StagesCommand {
    static let roles: [(String, @Sendable (StageType) -> Bool)] = [
        ("Sources", { $0.isSource }), ("Transforms", { !$0.isSource && !$0.isSink }), ("Sinks", { $0.isSink }),
    ]

    static func run() -> Int32 {
        for (title, belongs) in roles {
            print("#### \(title)\n")
            for type in StageType.allCases where belongs(type) {
                print("`type: \(type.rawValue)`\n")
                print("| setting | kind | default | meaning |")
                print("|---|---|---|---|")
                for s in type.schema {
                    let kind: String
                    switch s.kind {
                    case .string: kind = "string"
                    case .number: kind = "number"
                    case .integer: kind = "integer"
                    case .bool: kind = "bool"
                    case .stringList: kind = "list of strings"
                    case .numberList(let n): kind = "list of \(n) numbers"
                    }
                    let d = s.defaultValue.map { $0.isEmpty ? "\"\"" : "`\($0)`" } ?? "required"
                    print("| `\(s.name)` | \(kind) | \(d) | \(s.help.replacingOccurrences(of: "|", with: "\\|")) |")
                }
                print("")
            }
        }
        return 0
    }
}
