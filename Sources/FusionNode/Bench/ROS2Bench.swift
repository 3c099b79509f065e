#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import CompassCore
import WireFormat
import ROS2DDS
import Pipeline

/// `fusion-node bench ros2`: latency and throughput of the ROS 2 path between two processes on this
/// machine. This process is the robot (a DDS publisher of imu/data_raw and imu/mag, a subscriber of
/// imu/data); a child `fusion-node` runs ros2_source -> fusion -> ros2_sink. Baseline in the same run:
/// one DDS hop between the same two processes (this one publishes, the child takes). Latency is one
/// way, from the header stamp (CLOCK_REALTIME, shared by the processes) to the moment of taking.
enum ROS2Bench {
    static let help = CommandHelp(
        path: "bench ros2",
        summary: "Latency over DDS through the fusion stage at a steady rate next to one DDS hop, then the highest "
            + "lossless rate.",
        options: [
            OptionHelp("--rate", "HZ", "IMU samples per second of the latency runs", default: "1000"),
            OptionHelp("--seconds", "S", "length of each latency run", default: "10"),
            OptionHelp(
                "--bulk", "N", "IMU samples (each with its magnetometer sample) in bulk", default: "200000"),
            OptionHelp("--domain-id", "N", "DDS domain used", default: "91"),
            OptionHelp("--listen", "N", "(internal) the hop baseline's child: take N samples, print latencies"),
        ],
        details: """
            Runs in the environment's DDS configuration; tools/test.sh and docs/ros2.md use
            Pipelines/cyclonedds-loopback.xml (CYCLONEDDS_URI). Both processes use reliable, keep-all QoS,
            so nothing is lost by design: a sample missing at the end is reported as lost.
            """,
        examples: ["CYCLONEDDS_URI=file://$PWD/Pipelines/cyclonedds-loopback.xml fusion-node bench ros2"])

    static let reliableAll = ROS2QoS(reliability: .reliable, history: .keepAll)

    static func run(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(0...0)
        let domain = UInt32(try a.integer("--domain-id", minimum: 0, maximum: 232) ?? 91)
        if let n = try a.integer("--listen", minimum: 1) { return try listen(count: n, domain: domain) }
        let rate = try a.double("--rate", minimum: 1, maximum: 100_000) ?? 1000
        let seconds = try a.double("--seconds", minimum: 0.5, maximum: 3600) ?? 10
        let bulk = try a.integer("--bulk", minimum: 1000, maximum: 100_000_000) ?? 200_000
        let n = Int(rate * seconds)
        print("DDS configuration: \(DomainParticipant.configurationSource); domain \(domain)")

        let hop = try hopBaseline(count: n, rate: rate, domain: domain)
        print(
            "one DDS hop (imu message, this process -> child) at \(format(rate, 0)) Hz: p50 \(us(hop.p50)) us, "
                + "p99 \(us(hop.p99)) us, max \(us(hop.max)) us, \(hop.received) of \(n) received")
        let fused = try throughFusion(count: n, rate: rate, domain: domain)
        print(
            "imu/data_raw -> ros2_source -> fusion -> ros2_sink -> imu/data at \(format(rate, 0)) Hz: p50 "
                + "\(us(fused.latency.p50)) us, p99 \(us(fused.latency.p99)) us, max \(us(fused.latency.max)) us, "
                + "\(fused.received) of \(n) received")
        print(
            "  ratio to one hop: p50 \(format(fused.latency.p50 / hop.p50, 2)), p99 "
                + "\(format(fused.latency.p99 / hop.p99, 2))")
        let pinned = try throughFusion(count: n, rate: rate, domain: domain, cpus: 0)
        print(
            "the same with the pipeline's stages pinned to CPU 0 (cpus: [0]): p50 \(us(pinned.latency.p50)) us, p99 "
                + "\(us(pinned.latency.p99)) us, max \(us(pinned.latency.max)) us, \(pinned.received) of \(n) received")
        let bulkRun = try throughFusion(count: bulk, rate: 0, domain: domain)
        print(
            "as fast as possible (reliable, keep all): \(bulkRun.received) of \(bulk) imu/data received in "
                + "\(format(bulkRun.seconds, 2)) s = \(format(Double(bulkRun.received) / bulkRun.seconds, 0)) "
                + "samples/s\(bulkRun.received == bulk ? ", lossless" : ", LOST \(bulk - bulkRun.received)")")
        return .complete
    }

    struct Latency {
        var p50 = Double.nan, p99 = Double.nan, max = Double.nan
        var received = 0
        init(_ seconds: [Double]) {
            received = seconds.count
            guard !seconds.isEmpty else { return }
            let s = seconds.sorted()
            p50 = s[s.count / 2]
            p99 = s[min(s.count - 1, Int(Double(s.count) * 0.99))]
            self.max = s.last!
        }
    }

    static func us(_ seconds: Double) -> String { format(seconds * 1e6, 0) }

    /// A raw Imu sample stamped now (CLOCK_REALTIME), turning slowly, and its magnetometer sample.
    static func samplePair(_ k: Int, stamp: RosTime) -> (imu: [UInt8], mag: [UInt8]) {
        let header = RosHeader(stamp: stamp, frameId: "imu_link")
        let yaw = Double(k) * 0.0005
        let imu = ImuMessage(
            header: header, orientation: Quaternion(w: 1, x: 0, y: 0, z: 0), orientationCovariance: .notProvided,
            angularVelocity: Vector3(0, 0, 0.5), angularVelocityCovariance: .zero,
            linearAcceleration: Vector3(0, 0, standardGravity), linearAccelerationCovariance: .zero)
        let mag = MagneticFieldMessage(
            header: header, magneticField: Vector3(2e-5 * sin(yaw), 2e-5 * cos(yaw), -4.3e-5),
            magneticFieldCovariance: .zero)
        return (imu.cdr(), mag.cdr())
    }

    /// Publishes `count` samples at `rate` (0 = as fast as reliable delivery allows) on `write`.
    static func pace(count: Int, rate: Double, _ write: (Int, RosTime) throws -> Void) throws {
        let start = Clocks.monotonicSeconds()
        for k in 0..<count {
            if rate > 0 {
                let due = start + Double(k) / rate
                while Clocks.monotonicSeconds() < due {
                    let ahead = due - Clocks.monotonicSeconds()
                    if ahead > 0.0002 { usleep(UInt32(ahead * 0.5e6)) }
                }
            }
            // Stamps 1 ms apart whatever the pacing: the filter sees a 1 kHz sensor.
            try write(k, rate > 0 ? Clocks.wallNow() : RosTime(seconds: 1_700_000_000 + Double(k) * 0.001))
        }
    }

    /// A reliable keep-all write waits for a reader that is behind (back-pressure), however long.
    static func write(_ bytes: [UInt8], _ writer: SerializedWriter) throws {
        while true {
            do {
                try writer.write(bytes)
                return
            } catch let e where e.isTimeout { continue }
        }
    }

    static func waitForMatch(_ what: String, timeout: Double = 20, _ matched: () -> Bool) throws {
        let end = Clocks.monotonicSeconds() + timeout
        while !matched() {
            guard Clocks.monotonicSeconds() < end else {
                throw UsageError(message: "bench ros2: \(what) never matched")
            }
            usleep(2000)
        }
        usleep(1_000_000)  // the other side's discovery (see the interop tests)
    }

    // MARK: one hop

    static func hopBaseline(count: Int, rate: Double, domain: UInt32) throws -> Latency {
        let child = try spawnCapturingStdout([
            "bench", "ros2", "--listen", String(count), "--domain-id", String(domain),
        ])
        let participant = try DomainParticipant(domainId: domain)
        defer { participant.close() }
        let writer = try SerializedWriter(
            participant, try ROS2Topic("bench/hop", type: ImuMessage.typeName, qos: reliableAll))
        try waitForMatch("the hop listener") { writer.matchedReaders > 0 }
        try pace(count: count, rate: rate) { k, stamp in try writer.write(samplePair(k, stamp: stamp).imu) }
        _ = writer.waitForAcknowledgments(timeoutSeconds: 5)
        let out = child.finish()
        let values = out.split(separator: "\n").last.map { $0.split(separator: " ").compactMap { Double($0) } } ?? []
        return Latency(values)
    }

    /// The child side of the hop: takes `count` samples and prints their one-way latencies (seconds).
    static func listen(count: Int, domain: UInt32) throws -> ExitCode {
        let participant = try DomainParticipant(domainId: domain)
        defer { participant.close() }
        let reader = try SerializedReader(
            participant, try ROS2Topic("bench/hop", type: ImuMessage.typeName, qos: reliableAll))
        // The parent may take a while to match and settle: a longer patience than the fusion path's.
        let collector = try Collector(reader: reader, participant: participant, expected: count, idleSeconds: 10)
        collector.run()
        let latencies = collector.latencies
        print(latencies.map { String($0) }.joined(separator: " "))
        return .complete
    }

    // MARK: through fusion

    static func throughFusion(count: Int, rate: Double, domain: UInt32, cpus: Int? = nil) throws -> (
        latency: Latency, received: Int, seconds: Double
    ) {
        let config = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gyrocompass-bench-ros2-\(getpid()).yaml"
        ).path
        try """
        name: bench-ros2
        \(cpus.map { "cpus: [\($0)]" } ?? "")
        stages:
          dds:
            type: ros2_source
            domain_id: \(domain)
            imu_topic: bench/imu/data_raw
            mag_topic: bench/imu/mag
            qos: reliable, keep_all
            end_after_idle_s: 2
          fusion:
            type: fusion
            inputs: [dds]
          out:
            type: ros2_sink
            inputs: [fusion]
            domain_id: \(domain)
            imu_topic: bench/imu/data
            heading_topic: ''
            quaternion_topic: ''
            qos: reliable, keep_all
        """.write(toFile: config, atomically: true, encoding: .utf8)
        defer { unlink(config) }
        let child = try spawnCapturingStdout(["--config", config])
        // The robot writes each sample at once when it keeps a rate; in bulk it batches its writes
        // (flushing every 16 samples) so that the harness is not what limits the rate.
        let participant = try DomainParticipant(domainId: domain, writeBatching: rate == 0)
        defer { participant.close() }
        let imuWriter = try SerializedWriter(
            participant, try ROS2Topic("bench/imu/data_raw", type: ImuMessage.typeName, qos: reliableAll))
        let magWriter = try SerializedWriter(
            participant, try ROS2Topic("bench/imu/mag", type: MagneticFieldMessage.typeName, qos: reliableAll))
        let reader = try SerializedReader(
            participant, try ROS2Topic("bench/imu/data", type: ImuMessage.typeName, qos: reliableAll))
        try waitForMatch("the fusion pipeline") {
            imuWriter.matchedReaders > 0 && magWriter.matchedReaders > 0 && reader.matchedWriters > 0
        }
        // A reader thread takes imu/data as it comes, while this one publishes.
        let collector = try Collector(reader: reader, participant: participant, expected: count)
        let thread = Thread { collector.run() }
        thread.start()
        let start = Clocks.monotonicSeconds()
        try pace(count: count, rate: rate) { k, stamp in
            let pair = samplePair(k, stamp: stamp)
            try write(pair.imu, imuWriter)
            try write(pair.mag, magWriter)
            if rate == 0 && (k % 16 == 15 || k == count - 1) {
                imuWriter.flush()
                magWriter.flush()
            }
        }
        collector.waitUntilDone(timeout: 30)
        let seconds = collector.allButLastArrival - start
        _ = child.finish()
        // The filter holds the newest sample until its partner or the end of the stream (2 s idle):
        // the last one measures that wait, not the path.
        let timed = collector.latencies.count == count ? Array(collector.latencies.dropLast()) : collector.latencies
        return (Latency(timed), collector.latencies.count, seconds)
    }

    /// Takes Imu samples as they come and keeps each one's one-way latency (header stamp to taking).
    final class Collector: @unchecked Sendable {
        let reader: SerializedReader
        let waitSet: ReaderWaitSet
        let expected: Int
        /// Seconds without data that end the wait.
        let idleSeconds: Double
        var latencies: [Double] = []
        /// When all but the last sample (held by the filter until the stream ends) had arrived.
        var allButLastArrival = 0.0
        let done = DispatchSemaphore(value: 0)

        init(reader: SerializedReader, participant: DomainParticipant, expected: Int, idleSeconds: Double = 5) throws {
            self.reader = reader
            self.expected = expected
            self.idleSeconds = idleSeconds
            waitSet = try ReaderWaitSet(participant, readers: [reader])
            latencies.reserveCapacity(expected)
        }

        func run() {
            var samples: [SerializedSample] = []
            var idleSince = Clocks.monotonicSeconds()
            while latencies.count < expected && Clocks.monotonicSeconds() - idleSince < idleSeconds {
                guard (try? waitSet.wait(timeoutSeconds: 0.1)) == true else { continue }
                samples.removeAll(keepingCapacity: true)
                _ = try? reader.take(into: &samples)
                let now = Clocks.wallNow().seconds
                idleSince = Clocks.monotonicSeconds()
                for s in samples {
                    guard let h = try? ImuMessage(cdrBytes: s.bytes).header else { continue }
                    latencies.append(now - h.stamp.seconds)
                    if latencies.count == expected - 1 { allButLastArrival = idleSince }
                }
            }
            done.signal()
        }

        func waitUntilDone(timeout: Double) { _ = done.wait(timeout: .now() + timeout + 10) }
    }
}

/// A child `fusion-node` whose stdout this process reads at the end.
struct CapturedChild {
    let pid: pid_t
    let output: FileHandle

    /// Waits for the child to exit; its stdout.
    func finish() -> String {
        let data = output.readDataToEndOfFile()
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        return String(decoding: data, as: UTF8.self)
    }
}

func spawnCapturingStdout(_ arguments: [String]) throws -> CapturedChild {
    let pipe = Pipe()
    let pid = try spawnSelf(arguments, stdout: pipe.fileHandleForWriting.fileDescriptor)
    try pipe.fileHandleForWriting.close()
    return CapturedChild(pid: pid, output: pipe.fileHandleForReading)
}
