import Pipeline

/// What a command accepts and says about itself: `--help`, `fusion-node help COMMAND`, the
/// completion scripts, argument checking and "did you mean" all read it.
struct CommandHelp: Sendable {
    /// The words after `fusion-node`, e.g. "bag info".
    let path: String
    /// One line for the command list.
    let summary: String
    /// Positional arguments as the synopsis names them, e.g. "BAG".
    var positionals = ""
    var options: [OptionHelp] = []
    /// More to say after the options (output format, behaviour).
    var details = ""
    var examples: [String] = []

    var synopsis: String {
        "fusion-node \(path)" + (positionals.isEmpty ? "" : " \(positionals)") + (options.isEmpty ? "" : " [options]")
    }

    var valued: Set<String> { Set(options.filter { $0.value != nil }.map(\.name)) }
    var flags: Set<String> { Set(options.filter { $0.value == nil }.map(\.name)) }

    /// The full help text.
    var text: String {
        var out = "usage: \(synopsis)\n\n\(summary)\n"
        do {
            out += "\noptions:\n"
            let all = options + [OptionHelp("-h, --help", nil, "this help")]
            let width = min(30, all.map { $0.label.count }.max() ?? 0)
            for o in all {
                let label = o.label.padding(toLength: max(width, o.label.count), withPad: " ", startingAt: 0)
                out += "  \(label)  \(o.meaning)" + (o.defaultValue.map { " (default: \($0))" } ?? "") + "\n"
            }
        }
        if !details.isEmpty { out += "\n" + details + "\n" }
        if !examples.isEmpty { out += "\nexamples:\n" + examples.map { "  \($0)\n" }.joined() }
        return out
    }
}

/// One option: `--name VALUE` or a flag `--name`.
struct OptionHelp: Sendable {
    let name: String
    /// The value's placeholder (e.g. "OUT.csv"); nil for a flag.
    let value: String?
    let meaning: String
    let defaultValue: String?
    /// May be given more than once (each value kept, in order).
    let repeatable: Bool

    init(
        _ name: String, _ value: String?, _ meaning: String, default defaultValue: String? = nil,
        repeatable: Bool = false
    ) {
        self.name = name
        self.value = value
        self.meaning = meaning
        self.defaultValue = defaultValue
        self.repeatable = repeatable
    }

    var label: String { value.map { "\(name) \($0)" } ?? name }
}

/// The exit codes every command uses (BSD sysexits where one fits; documented in docs/commands.md).
enum ExitCode: Int32 {
    /// The run completed: every input was read to its end.
    case complete = 0
    /// The run failed (a stage could not start or failed while running).
    case failed = 1
    /// The command line or the pipeline file is wrong; nothing ran.
    case usage = 2
    /// The run finished, but damage or loss was reported (undecodable or malformed messages skipped,
    /// damage read past). Look at stderr for what and where.
    case finishedWithLoss = 3
    /// The run finished without loss, but a stage found its output wrong for a cause it names in stderr
    /// (a magnetometer mounted otherwise than given, readings that carry iron nothing removes); the
    /// headings from then on say so (bound 180).
    case finishedWithWarning = 4

    /// Loss first (3), then a warning (4), else complete.
    static func finished(_ reports: [StageReport], ignoringLoss: Bool = false) -> ExitCode {
        if !ignoringLoss && reports.contains(where: { $0.losses > 0 }) { return .finishedWithLoss }
        return reports.contains { $0.knownWrong > 0 } ? .finishedWithWarning : .complete
    }
    /// SIGINT or SIGTERM ended the run before its input ended (outputs are complete up to there).
    case interrupted = 130
}
