import Pipeline
import CompassCore
import WireFormat
import Bags

/// `fusion-node bench filter BAG` and `fusion-node bench bag BAG`: throughput numbers, printed.
/// Comparisons with peers run in the same invocation of `tools/bench_filters.py`.
enum BenchCommand {
    static let filterHelp = CommandHelp(
        path: "bench filter", summary: "Time a filter over a bag's samples decoded into memory (best of N runs).",
        positionals: "BAG",
        options: [
            OptionHelp("--filter", "NAME", "kalman or complementary", default: "kalman"),
            OptionHelp("--repeat", "N", "runs; the best is reported", default: "5"),
            OptionHelp(
                "--lever-arm-s", "SECONDS", "kalman: memory of the lever-arm fit (fusion.lever_arm_s; 0 = off)",
                default: "0"),
            OptionHelp("--imu-topic", "TOPIC", "bag topic with sensor_msgs/msg/Imu", default: "/imu/data_raw"),
            OptionHelp("--mag-topic", "TOPIC", "bag topic with sensor_msgs/msg/MagneticField", default: "/imu/mag"),
        ],
        details: "Prints samples per second; tools/bench_filters.py runs the peers in the same invocation.",
        examples: ["fusion-node bench filter run.mcap --filter complementary"])

    static let bagHelp = CommandHelp(
        path: "bench bag", summary: "Time reading and CDR-decoding every message of a bag (best of N runs).",
        positionals: "BAG", options: [OptionHelp("--repeat", "N", "runs; the best is reported", default: "5")],
        examples: ["fusion-node bench bag run.mcap --repeat 3"])

    static let pipelineHelp = CommandHelp(
        path: "bench pipeline",
        summary: "Simulator -> calibration -> fusion -> sink in one process and in four processes over ipc, "
            + "next to raw libzmq measured in the same round; then latency at a steady 1 kHz.",
        options: [
            OptionHelp("--samples", "N", "samples per throughput round", default: "600000"),
            OptionHelp("--rounds", "R", "interleaved rounds; medians and ratios at the end", default: "3"),
            OptionHelp(
                "--latency-runs", "L", "latency runs of 3 x 11 s (unpinned, pinned to CPU 0, one-hop baseline)",
                default: "1"),
        ],
        examples: ["fusion-node bench pipeline --rounds 5 --latency-runs 3"])

    static func run(_ args: [String]) async throws -> ExitCode {
        let subs = ["filter", "bag", "smooth", "pipeline", "curve", "ros2"]
        guard let what = args.first, subs.contains(what) else {
            if let what = args.first, what == "-h" || what == "--help" { throw GroupHelpRequested(group: "bench") }
            throw UsageError(
                message: (args.first.map { "unknown bench command '\($0)'\(didYouMean($0, in: subs))\n" } ?? "")
                    + Commands.groupText("bench"), command: "bench")
        }
        if what == "pipeline" { return try await PipelineBench.run(Array(args.dropFirst())) }
        if what == "smooth" { return try SmootherBench.run(Array(args.dropFirst())) }
        if what == "curve" { return try CurveBench.run(Array(args.dropFirst())) }
        if what == "ros2" { return try ROS2Bench.run(Array(args.dropFirst())) }
        let a = try Arguments(Array(args.dropFirst()), what == "filter" ? filterHelp : bagHelp)
        try a.requirePositionals(1...1)
        let repeats = try a.integer("--repeat", minimum: 1) ?? 5
        switch what {
        case "filter":
            let kindName = a.string("--filter") ?? "kalman"
            guard let kind = FilterKind(rawValue: kindName) else {
                throw UsageError(message: "unknown filter '\(kindName)'", command: "bench")
            }
            let (imu, mag) = try loadSamples(
                a.positionals[0], imuTopic: a.string("--imu-topic") ?? "/imu/data_raw",
                magTopic: a.string("--mag-topic") ?? "/imu/mag")
            var settings = KalmanFilterSettings()
            settings.leverArmSeconds = try a.double("--lever-arm-s", minimum: 0, maximum: 3600) ?? 0
            var best = Double.infinity
            var checksum = 0.0
            for _ in 0..<repeats {
                let t0 = Clocks.monotonicSeconds()
                checksum += runFilter(kind, imu, mag, kalman: settings)
                best = min(best, Clocks.monotonicSeconds() - t0)
            }
            print(
                "filter=\(kind.rawValue) samples=\(imu.count) best_seconds=\(format(best, 6)) "
                    + "samples_per_second=\(format(Double(imu.count) / best, 0)) checksum=\(format(checksum, 6))"
            )
        case "bag":
            var best = Double.infinity
            var count = 0
            for _ in 0..<repeats {
                let t0 = Clocks.monotonicSeconds()
                count = try decodeAll(a.positionals[0])
                best = min(best, Clocks.monotonicSeconds() - t0)
            }
            print(
                "messages=\(count) best_seconds=\(format(best, 6)) "
                    + "messages_per_second=\(format(Double(count) / best, 0))"
            )
        default:
            break
        }
        return .complete
    }

    /// IMU samples and their paired magnetometer samples (nil where none), decoded up front.
    static func loadSamples(_ path: String, imuTopic: String, magTopic: String) throws -> (
        [ImuSample], [MagnetometerSample?]
    ) {
        let bag = try BagReader(path: path)
        var options = BagReadOptions()
        options.topics = [imuTopic, magTopic]
        var aligner = SampleAligner()
        var imu: [ImuSample] = [], mag: [MagnetometerSample?] = []
        func keep(_ pair: (imu: ImuSample, magnetometer: MagnetometerSample?)?) {
            guard let pair else { return }
            imu.append(pair.imu)
            mag.append(pair.magnetometer)
        }
        try bag.forEachMessage(options) { m in
            if m.topic == magTopic {
                keep(aligner.magnetometer(try MagneticFieldMessage(cdrBytes: m.data).sample))
            } else {
                keep(aligner.imu(try ImuMessage(cdrBytes: m.data).sample))
            }
        }
        keep(aligner.finish())
        return (imu, mag)
    }

    /// Runs a concrete filter type (no existential dispatch in the loop); returns a checksum so the
    /// work cannot be optimised away.
    static func runFilter(
        _ kind: FilterKind, _ imu: [ImuSample], _ mag: [MagnetometerSample?], kalman: KalmanFilterSettings = .init()
    ) -> Double {
        func loop<F: OrientationFilter>(_ f: inout F) -> Double {
            var sum = 0.0
            for i in imu.indices { if let o = f.update(imu: imu[i], magnetometer: mag[i]) { sum += o.orientation.w } }
            return sum
        }
        switch kind {
        case .kalman:
            var f = KalmanFilter(settings: kalman)
            return loop(&f)
        case .complementary:
            var f = ComplementaryFilter()
            return loop(&f)
        }
    }

    static func decodeAll(_ path: String) throws -> Int {
        let bag = try BagReader(path: path)
        var n = 0
        var sink = 0.0
        try bag.forEachMessage { m in
            switch m.type {
            case ImuMessage.typeName: sink += try ImuMessage(cdrBytes: m.data).angularVelocity.x
            case MagneticFieldMessage.typeName: sink += try MagneticFieldMessage(cdrBytes: m.data).magneticField.x
            case NavSatFixMessage.typeName: sink += try NavSatFixMessage(cdrBytes: m.data).latitude
            default: break
            }
            n += 1
        }
        return sink.isNaN ? -n : n
    }
}
