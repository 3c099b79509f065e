import Pipeline

/// Every command `fusion-node` has: dispatch, `help`, `--help` and the completion scripts read
/// this list.
enum Commands {
    /// Top-level commands (a group such as `bag` lists its subcommands in `groups`).
    static let topLevel: [(name: String, summary: String)] = [
        ("replay", ReplayCommand.help.summary),
        ("bag", "recorded ROS 2 bags: bag info, bag echo, bag convert"),
        ("echo", EchoCommand.help.summary),
        ("watch", WatchCommand.help.summary),
        ("report", ReportCommand.help.summary),
        ("fleet", FleetCommand.help.summary),
        ("calibrate", CalibrateCommand.help.summary),
        ("ros2", "ROS 2 over DDS without ROS installed: ros2 echo, ros2 list"),
        (
            "bench",
            "throughput and latency numbers: bench filter, bench bag, bench smooth, bench pipeline, bench curve, "
                + "bench ros2"
        ),
        ("stages", StagesCommand.help.summary),
        ("keygen", "write a CURVE key pair for authenticated, encrypted endpoints"),
        ("completion", CompletionCommand.help.summary),
        ("help", "help for a command: fusion-node help replay"),
    ]

    static let groups: [String: [CommandHelp]] = [
        "bag": [BagInfoCommand.help, BagEchoCommand.help, BagConvertCommand.help],
        "ros2": [ROS2Command.echoHelp, ROS2Command.listHelp],
        "bench": [
            BenchCommand.filterHelp, BenchCommand.bagHelp, SmootherBench.help, BenchCommand.pipelineHelp,
            CurveBench.help, ROS2Bench.help,
        ],
    ]

    /// Every command's help, for `help COMMAND` and completion.
    static var all: [CommandHelp] {
        [
            DefaultPipelineCommand.help, PipelineCommand.help, ReplayCommand.help, ReportCommand.help,
            FleetCommand.help, CalibrateCommand.help, EchoCommand.help,
            WatchCommand.help, StagesCommand.help, KeygenCommand.help, CompletionCommand.help,
        ] + groups["bag"]! + groups["ros2"]! + groups["bench"]!
    }

    static func help(for path: [String]) -> CommandHelp? {
        let joined = path.joined(separator: " ")
        if joined == "--config" { return PipelineCommand.help }
        return all.first { $0.path == joined }
    }

    /// A group's help: its subcommands with their summaries.
    static func groupText(_ group: String) -> String {
        let subs = groups[group] ?? []
        return "usage: fusion-node \(group) COMMAND ...\n\ncommands:\n"
            + subs.map { "  \($0.path.padding(toLength: 16, withPad: " ", startingAt: 0))\($0.summary)\n" }.joined()
            + "\nfusion-node \(group) COMMAND --help shows a command's options.\n"
    }

    /// The overview `fusion-node --help` prints.
    static var overview: String {
        var out = "fusion-node \(BuildIdentity.version): GyroCompass gyro-compass sensor fusion\n\n"
        out +=
            "usage: fusion-node [options]              the built-in pipeline on the simulator (fusion-node "
            + "--help-run)\n"
        out += "       fusion-node --config FILE [options] a pipeline file (fusion-node help --config)\n"
        out += "       fusion-node COMMAND [options]\n\ncommands:\n"
        for (name, summary) in topLevel {
            out += "  \(name.padding(toLength: 12, withPad: " ", startingAt: 0))\(summary)\n"
        }
        out += """

            other:
              --print-default-pipeline   the built-in graph as a pipeline file
              --print-man-page           the manual page fusion-node(1), in roff
              --version                  version, commit and the linked C libraries
              -h, --help                 this help; every command also answers --help

            exit codes: 0 complete, 1 failed, 2 usage or configuration error, 3 finished but damage or loss was
            reported, 4 finished but the heading was found wrong for a cause the summary names, 130
            interrupted by SIGINT, SIGTERM or SIGHUP before the input ended.

            """
        return out
    }
}
