#if canImport(Glibc)
    import Glibc
#endif
import MessageBus
import CompassCore
import Pipeline

/// `fusion-node [--duration S] [--seed N] [--filter NAME]`: the built-in default pipeline.
enum DefaultPipelineCommand {
    static let help = CommandHelp(
        path: "",
        summary: "Run the built-in pipeline: the seeded IMU simulator through online calibration and fusion, "
            + "one heading line per update (100 Hz) until Ctrl-C or the duration has passed.",
        options: [
            OptionHelp("--duration", "SECONDS", "stop after this long; 0 = until Ctrl-C", default: "0"),
            OptionHelp("--seed", "N", "simulator seed (the same seed gives the same samples)", default: "1"),
            OptionHelp("--filter", "NAME", "kalman or complementary", default: "kalman"),
            OptionHelp("--watch", nil, "show the live compass view (fusion-node watch) instead of text lines"),
        ],
        details: """
            output, one line per update:
              t=<s> heading=<deg clockwise from magnetic north> (<16-point name>) +-<95 % accuracy, deg> [<flags>]
            """,
        examples: ["fusion-node --watch", "fusion-node --duration 5", "fusion-node --filter complementary --seed 3"])

    static func run(_ args: [String]) async throws -> ExitCode {
        let a = try Arguments(args, help)
        if let extra = a.positionals.first {
            throw UsageError(
                message: "unknown command '\(extra)'\(didYouMean(extra, in: Commands.topLevel.map(\.name)))",
                command: "")
        }
        let duration = try a.double("--duration", minimum: 0, maximum: 1_000_000) ?? 0
        guard let seed = UInt64(a.string("--seed") ?? "1"), seed <= UInt32.max else {
            throw UsageError(
                message: "--seed expects an integer from 0 to \(UInt32.max), got '\(a.string("--seed") ?? "")'",
                command: "")
        }
        let filter = a.string("--filter") ?? "kalman"
        let filters = FilterKind.allCases.map(\.rawValue)
        guard filters.contains(filter) else {
            throw UsageError(
                message:
                    "--filter expects one of \(filters.joined(separator: ", ")), got "
                    + "'\(filter)'\(didYouMean(filter, in: filters))",
                command: "")
        }
        if a.has("--watch") { return try await watch(duration: duration, filter: filter, seed: seed) }
        let config = try PipelineConfig.parse(
            BuiltInPipelines.defaultText(durationSeconds: duration, filter: filter, seed: seed),
            file: "<built-in default pipeline>", environment: [:])
        let stop = StopToken().handleSignals()
        // What the stages say (a calibration accepted, and what it found) and their summary go to stderr,
        // as for any pipeline; the headings go to stdout.
        let reports = try await PipelineRunner.runAll(config, stop: stop)
        for r in reports { writeStandardError("fusion-node: \(r)\n") }
        if stop.interruptedBySignal { return .interrupted }
        return .finished(reports)
    }

    /// The built-in pipeline, its publisher shown by the watch view.
    static func watch(duration: Double, filter: String, seed: UInt64) async throws -> ExitCode {
        let endpoint = BuiltInPipelines.defaultPublish
        let config = try PipelineConfig.parse(
            BuiltInPipelines.defaultText(durationSeconds: duration, filter: filter, seed: seed, watch: true),
            file: "<built-in default pipeline>", environment: PipelineCommand.environment)
        let stop = StopToken().handleSignals()
        let pipeline = Task { try await PipelineRunner.runAll(config, stop: stop, log: { _ in }) }
        let context = BusContext()
        let socket = try WatchCommand.subscriber(context, endpoint: endpoint, nil)
        let result = try WatchCommand.view(socket, endpoint: endpoint, plain: isatty(1) != 1, stop: stop)
        // The view is gone: its publisher has nobody left to deliver the tail to (q quits at once).
        socket.close()
        stop.request(.stage)
        _ = try? await pipeline.value
        return result
    }
}
