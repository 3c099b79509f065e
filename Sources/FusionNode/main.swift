#if canImport(Glibc)
    import Glibc
#endif
import CompassCore
import IMUSimulator
import Pipeline

let gyroCompassVersion = "0.2.0"

let usage = """
    fusion-node \(gyroCompassVersion): GyroCompass gyro-compass sensor fusion

    USAGE
      fusion-node [--duration SECONDS] [--seed N] [--filter kalman|complementary]
          Run the built-in default pipeline: the seeded IMU simulator through calibration, gating and
          fusion, one heading line per update (100 Hz) until Ctrl-C or the duration has passed.
      fusion-node replay BAG [--csv OUT.csv] [--filter NAME] ...     (fusion-node replay --help)
          Run a filter over a recorded ROS 2 bag (MCAP or sqlite3; directory or file).
      fusion-node bag info BAG [--salvage]
          Duration, start and end, message counts, topics with types and rates, compression, size.
      fusion-node bag echo BAG [--topic TOPIC] [--limit N]
          Every message as a JSON line.
      fusion-node echo ENDPOINT [TOPIC] [--count N] [--latest-only]
          Subscribe to a pipeline's publisher and print its messages as JSON lines.
      fusion-node bench filter|bag BAG ...                            (fusion-node bench --help)
          Throughput numbers.
      fusion-node --config pipeline.yaml [--stage NAME | --list-stages | --supervise]
          Run a pipeline of stages (sources, transforms, sinks) over ZeroMQ; see the README.
      fusion-node stages
          Every pipeline stage type and its settings (Markdown).
      fusion-node --print-default-pipeline
          The default graph as a pipeline file (Pipelines/default.yaml is this output).
      fusion-node --help | --version

    OUTPUT of the default pipeline (one line per update)
      t=<s> heading=<deg clockwise from magnetic north> (<16-point name>) +-<95 % accuracy, deg> [<flags>]
    """

/// No configuration given: the built-in default pipeline on the simulator.
func runDefaultPipeline(_ args: [String]) async throws -> Int32 {
    let a = try Arguments(args, valued: ["--duration", "--seed", "--filter"], flags: [])
    guard a.positionals.isEmpty else { throw UsageError(message: "unknown argument '\(a.positionals[0])'") }
    let duration = try a.double("--duration", minimum: 0) ?? 0
    guard let seed = UInt64(a.string("--seed") ?? "1") else {
        throw UsageError(message: "--seed expects a non-negative integer, got '\(a.string("--seed") ?? "")'")
    }
    let filter = a.string("--filter") ?? "kalman"
    guard FilterKind(rawValue: filter) != nil else {
        throw UsageError(
            message:
                "--filter expects one of \(FilterKind.allCases.map(\.rawValue).joined(separator: ", ")), got "
                + "'\(filter)'"
        )
    }
    let config = try PipelineConfig.parse(
        BuiltInPipelines.defaultText(durationSeconds: duration, filter: filter, seed: seed),
        file: "<built-in default pipeline>", environment: [:])
    PipelineSignals.install()
    _ = try await PipelineRunner.runAll(config, log: { _ in })
    return 0
}

let arguments = Array(CommandLine.arguments.dropFirst())
var status: Int32 = 0
do {
    switch arguments.first {
    case "--help", "-h", "help":
        print(usage)
    case "--print-default-pipeline":
        print(BuiltInPipelines.shippedDefault, terminator: "")
    case "--version":
        print("fusion-node \(gyroCompassVersion)")
        for lib in LinkedLibraries.report { print("  \(lib.name) \(lib.version)") }
    case _ where arguments.contains("--config"):
        status = try await PipelineCommand.run(arguments)
    case "replay":
        if arguments.contains("--help") {
            print(ReplayCommand.usage)
        } else {
            status = try await ReplayCommand.run(Array(arguments.dropFirst()))
        }
    case "bag":
        switch arguments.dropFirst().first {
        case "info": status = try BagInfoCommand.run(Array(arguments.dropFirst(2)))
        case "echo": status = try BagEchoCommand.run(Array(arguments.dropFirst(2)))
        default:
            throw UsageError(
                message: "usage: fusion-node bag info BAG | fusion-node bag echo BAG [--topic T] [--limit N]")
        }
    case "stages":
        status = StagesCommand.run()
    case "echo":
        status = try EchoCommand.run(Array(arguments.dropFirst()))
    case "bench":
        if arguments.contains("--help") {
            print(BenchCommand.usage)
        } else {
            status = try await BenchCommand.run(Array(arguments.dropFirst()))
        }
    default:
        status = try await runDefaultPipeline(arguments)
    }
} catch let e as PipelineConfigError {
    writeStandardError("fusion-node: \(e)\n")
    status = 2
} catch let e as UsageError {
    writeStandardError("fusion-node: \(e.message)\nTry 'fusion-node --help'.\n")
    status = 2
} catch {
    writeStandardError("fusion-node: \(error)\n")
    status = 1
}
fflush(nil)
exit(status)
