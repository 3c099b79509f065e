#if canImport(Glibc)
import Glibc
#endif
import CompassCore
import IMUSimulator

let gyroCompassVersion = "0.1.0"

let usage = """
fusion-node \(gyroCompassVersion): GyroCompass gyro-compass sensor fusion

USAGE
  fusion-node [--duration SECONDS] [--seed N]
      Run the built-in default pipeline: the seeded IMU simulator feeding the compass, printing one
      heading line per update (50 Hz) until Ctrl-C or the duration has passed.
  fusion-node --help       This text.
  fusion-node --version    Version and the linked C libraries.

OUTPUT (one line per update)
  t=<s> heading=<deg clockwise from magnetic north> (<16-point name>) truth=<deg> pitch=<deg> roll=<deg>
"""

/// A command-line error: printed to stderr with the usage hint, exit status 2.
struct UsageError: Error { let message: String }

func parseArguments(_ args: [String]) throws -> (duration: Double?, seed: UInt64) {
    var duration: Double? = nil
    var seed: UInt64 = 1
    var i = 0
    while i < args.count {
        let a = args[i]
        func value() throws -> String {
            guard i + 1 < args.count else { throw UsageError(message: "\(a) needs a value") }
            i += 1
            return args[i]
        }
        switch a {
        case "--duration":
            let v = try value()
            guard let d = Double(v), d.isFinite, d >= 0 else {
                throw UsageError(message: "--duration expects a non-negative number of seconds, got '\(v)'")
            }
            duration = d
        case "--seed":
            let v = try value()
            guard let s = UInt64(v) else { throw UsageError(message: "--seed expects a non-negative integer, got '\(v)'") }
            seed = s
        default:
            throw UsageError(message: "unknown argument '\(a)'")
        }
        i += 1
    }
    return (duration, seed)
}

/// Writes straight to file descriptor 2 (the C `stderr` global is not concurrency-safe in Swift 6).
func writeStandardError(_ text: String) {
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}

nonisolated(unsafe) var stopRequested: sig_atomic_t = 0

func runDefaultPipeline(duration: Double?, seed: UInt64) {
    signal(SIGINT) { _ in stopRequested = 1 }
    signal(SIGTERM) { _ in stopRequested = 1 }
    var scenario = DefaultScenario.make(seed: seed)
    scenario.loops = true
    var sim = IMUSimulator(scenario: scenario)
    var compass = SimulatorCompassStage()
    let rate = scenario.sampleRateHz
    let outputEvery = max(1, Int((rate / 50).rounded()))
    var start = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    var k = 0
    while stopRequested == 0 {
        let t = Double(k) / rate
        if let d = duration, t >= d { break }
        guard let sample = sim.next() else { break }
        if let line = compass.update(sample), k % outputEvery == 0 {
            print(line)
        }
        k += 1
        // Pace to real time: sleep until this sample's due time.
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let elapsed = Double(now.tv_sec - start.tv_sec) + Double(now.tv_nsec - start.tv_nsec) * 1e-9
        let ahead = Double(k) / rate - elapsed
        if ahead > 0 { usleep(UInt32(ahead * 1e6)) }
    }
    fflush(nil)   // all output streams
}

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("--help") || arguments.contains("-h") {
    print(usage)
    exit(0)
}
if arguments.contains("--version") {
    print("fusion-node \(gyroCompassVersion)")
    for lib in LinkedLibraries.report { print("  \(lib.name) \(lib.version)") }
    exit(0)
}
do {
    let options = try parseArguments(arguments)
    runDefaultPipeline(duration: options.duration, seed: options.seed)
    exit(0)
} catch let e as UsageError {
    writeStandardError("fusion-node: \(e.message)\nTry 'fusion-node --help'.\n")
    exit(2)
}
