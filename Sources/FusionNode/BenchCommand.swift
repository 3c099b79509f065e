import Pipeline
import CompassCore
import WireFormat
import Bags

/// `fusion-node bench filter BAG` and `fusion-node bench bag BAG`: throughput numbers, printed.
/// Comparisons with peers run in the same invocation of `tools/bench_filters.py`.
enum BenchCommand {
    static let usage = """
        fusion-node bench filter BAG [--filter kalman|complementary] [--repeat N]
            decode the bag's IMU and magnetometer samples into memory, then time the filter over them
            (best of N runs, default 5); prints samples per second.
        fusion-node bench bag BAG [--repeat N]
            time reading and CDR-decoding every message of the bag; prints messages per second.
        fusion-node bench pipeline [--samples N] [--rounds R] [--latency-runs L]
            simulator -> calibration -> gating -> fusion -> sink in one process and in five processes
            over ipc, each round next to raw libzmq one-hop throughput measured right before it (R
            rounds, default 3; N samples each, default 600000; medians and ratios at the end), then
            latency at a steady 1 kHz across five processes, unpinned and pinned to CPU 0, next to one ipc
            hop (source to sink) as the baseline (L runs of 3 x 11 s, default 1).
        """

    static func run(_ args: [String]) async throws -> Int32 {
        guard let what = args.first else { throw UsageError(message: usage) }
        if what == "pipeline" { return try await PipelineBench.run(Array(args.dropFirst())) }
        let a = try Arguments(
            Array(args.dropFirst()), valued: ["--filter", "--repeat", "--imu-topic", "--mag-topic"], flags: [])
        guard a.positionals.count == 1 else { throw UsageError(message: usage) }
        let repeats = try a.integer("--repeat", minimum: 1) ?? 5
        switch what {
        case "filter":
            let kindName = a.string("--filter") ?? "kalman"
            guard let kind = FilterKind(rawValue: kindName) else {
                throw UsageError(message: "unknown filter '\(kindName)'")
            }
            let (imu, mag) = try loadSamples(
                a.positionals[0], imuTopic: a.string("--imu-topic") ?? "/imu/data_raw",
                magTopic: a.string("--mag-topic") ?? "/imu/mag")
            var best = Double.infinity
            var checksum = 0.0
            for _ in 0..<repeats {
                let t0 = Clocks.monotonicSeconds()
                checksum += runFilter(kind, imu, mag)
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
            throw UsageError(message: usage)
        }
        return 0
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
    static func runFilter(_ kind: FilterKind, _ imu: [ImuSample], _ mag: [MagnetometerSample?]) -> Double {
        func loop<F: OrientationFilter>(_ f: inout F) -> Double {
            var sum = 0.0
            for i in imu.indices { if let o = f.update(imu: imu[i], magnetometer: mag[i]) { sum += o.orientation.w } }
            return sum
        }
        switch kind {
        case .kalman:
            var f = KalmanFilter()
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
