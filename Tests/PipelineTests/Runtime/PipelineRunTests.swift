import Testing
import Foundation
import CompassCore
import WireFormat
import Bags
import MessageBus
import CZeroMQ
@testable import Pipeline

/// Each run has its own stop token and its own folder; these still run one at a time because several
/// tests wait for frames in blocking socket loops on a cooperative-pool thread while the stage they test
/// needs a pool thread to start: two such tests at once hold both threads of a two-core machine.
@Suite("Pipeline runs", .serialized)
struct PipelineRunTests {
    let dir: String = {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("gc-pipe-\(UUID().uuidString)").path
        try! FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }()

    @Test("simulator -> calibration -> fusion -> csv + record, in one process, loses nothing")
    func oneProcess() async throws {
        let config = try PipelineConfig.parse(
            """
            stages:
              sim:
                type: simulator
                duration_s: 5
                realtime: false
              cal:
                type: calibration
                inputs: [sim]
                online: true
              fusion:
                type: fusion
                inputs: [cal]
              csv:
                type: csv
                inputs: [fusion]
                path: \(dir)/out.csv
                accuracy_path: \(dir)/acc.csv
              rec:
                type: record
                inputs: [fusion]
                path: \(dir)/bag
            """, file: "t.yaml", environment: [:])
        let reports = try await PipelineRunner.runAll(config, log: { _ in })
        let byName = Dictionary(uniqueKeysWithValues: reports.map { ($0.stage, $0) })
        #expect(byName["sim"]!.published == 1000)  // 500 IMU + 500 magnetometer
        // Calibration adds its status messages, which fusion passes on to the sinks with its own.
        #expect(byName["cal"]!.received == 1000 && byName["cal"]!.published > 1000)
        #expect(byName["fusion"]!.received > 1000 && byName["fusion"]!.published > 1000)
        #expect(reports.allSatisfy { $0.malformed == 0 && $0.unexpected == 0 && $0.dropped == 0 })
        let rows = try String(contentsOfFile: "\(dir)/out.csv", encoding: .utf8).split(separator: "\n")
        #expect(rows.count == 501 && rows[0] == "t,qw,qx,qy,qz")
        var recorded = 0
        try BagReader(path: "\(dir)/bag").forEachMessage { _ in recorded += 1 }
        #expect(recorded == 1000)
        // The simulator starts at heading 30: the fused heading after the initial rest agrees.
        let acc = try String(contentsOfFile: "\(dir)/acc.csv", encoding: .utf8).split(separator: "\n")
        let heading = Double(acc[250].split(separator: ",")[1])!
        #expect(abs(signedDegrees(heading - 30)) < 3, "heading \(heading)")
    }

    /// The fusion stage of `up (simulator, or another source) -> fusion -> sink`, run alone between the test's own
    /// sockets: an XPUB bound where `up` publishes and a SUB on fusion's endpoint. Returns once the
    /// stage has subscribed to the XPUB.
    func fusionBetweenTestSockets(
        _ name: String, upstreamType: String = "simulator", log: @escaping @Sendable (String) -> Void
    ) throws -> (
        config: PipelineConfig, stage: Task<StageReport, Error>, publisher: BusSocket, downstream: BusSocket
    ) {
        let upstream = "ipc://\(dir)/\(name)-up", fusionEndpoint = "ipc://\(dir)/\(name)-fusion"
        let config = try PipelineConfig.parse(
            """
            stages:
              up:
                type: \(upstreamType)
                endpoint: \(upstream)
              fusion:
                type: fusion
                inputs: [up]
                endpoint: \(fusionEndpoint)
              sink:
                type: stdout
                inputs: [fusion]
                topics: []
            """, file: "t.yaml", environment: [:])
        let context = BusContext()
        let publisher = try BusSocket(context, .xpub)
        try publisher.setOption(ZMQ_XPUB_VERBOSE, 1)
        try publisher.bind(upstream)
        let downstream = try BusSocket(context, .sub)
        try downstream.subscribe([])
        try downstream.subscribe(Publisher.readerMark(of: "sink"))  // stands in for the stage 'sink'
        try downstream.connect(fusionEndpoint)
        let stage = Task { try await PipelineRunner.runStage(config, named: "fusion", log: log) }
        while try publisher.receive(timeoutMilliseconds: 100)?.first != 1 {}
        return (config, stage, publisher, downstream)
    }

    @Test("a stage counts and logs malformed frames, unexpected types and oversized frames, and goes on")
    func badFrames() async throws {
        let logged = LogCollector()
        let (_, stage, publisher, downstream) = try fusionBetweenTestSockets("bad", log: logged.append)
        let header = RosHeader(stamp: RosTime(sec: 100, nanosec: 0), frameId: "imu_link")
        let imu = ImuMessage(
            header: header, orientation: Quaternion(w: 1, x: 0, y: 0, z: 0), orientationCovariance: [],
            angularVelocity: .zero, angularVelocityCovariance: [], linearAcceleration: Vector3(0, 0, 9.81),
            linearAccelerationCovariance: [])
        try publisher.send(Array("no separators at all".utf8))
        try publisher.send(
            WireFrame(
                topic: PipelineTopics.imuRaw, type: "std_msgs/msg/String", encoding: "cdr", payload: [0, 1, 0, 0]
            ).encoded())
        try publisher.send(
            WireFrame(
                topic: PipelineTopics.imuRaw, type: ImuMessage.typeName, encoding: "cdr", payload: [0, 1, 0, 0, 9]
            ).encoded())
        try publisher.send([UInt8](repeating: 65, count: WireFrame.maximumBytes + 1))
        try publisher.send(
            WireFrame(topic: "somewhere/else", type: ImuMessage.typeName, encoding: "cdr", payload: imu.cdr()).encoded()
        )
        for k in 0..<10 {
            var m = imu
            m.header.stamp = RosTime(sec: 100, nanosec: UInt32(k) * 10_000_000)
            try publisher.send(
                WireFrame(topic: PipelineTopics.imuRaw, type: ImuMessage.typeName, encoding: "cdr", payload: m.cdr())
                    .encoded())
        }
        try publisher.send(WireFrame.endOfStream(from: "up").encoded())
        let report = try await stage.value
        #expect(report.malformed == 2, "\(report)")  // no separators; oversized
        #expect(report.unexpected == 3, "\(report)")  // wrong type; undecodable; unknown topic
        #expect(report.received == 13)
        #expect(report.published == 20)  // 10 samples: heading + imu/data each
        #expect(logged.lines.contains { $0.contains("malformed frame") && $0.contains("'up'") })
        #expect(logged.lines.contains { $0.contains("exceeds") })
        var outputs = 0
        var sawEnd = false
        while let bytes = try downstream.receive(timeoutMilliseconds: 500) {
            for f in try WireFrame.frames(in: bytes) { if f.isEndOfStream { sawEnd = true } else { outputs += 1 } }
        }
        #expect(outputs == 20 && sawEnd)
        publisher.close()
        downstream.close()
    }

    /// IMU sample k, 10 ms apart.
    static func imu(_ k: Int) -> WireFrame {
        let m = ImuMessage(
            header: RosHeader(stamp: RosTime(sec: 100, nanosec: UInt32(k) * 10_000_000), frameId: "imu_link"),
            orientation: Quaternion(w: 1, x: 0, y: 0, z: 0), orientationCovariance: [],
            angularVelocity: .zero, angularVelocityCovariance: [], linearAcceleration: Vector3(0, 0, 9.81),
            linearAccelerationCovariance: [])
        return WireFrame(topic: PipelineTopics.imuRaw, type: ImuMessage.typeName, encoding: "cdr", payload: m.cdr())
    }

    /// IMU samples `range` as one numbered batch of an IMU-only stream (its numbers and its topic's agree).
    static func numbered(_ range: Range<Int>) throws -> BusMessage {
        let frames = range.map(imu)[...]
        let numbers = BatchNumbers(
            first: UInt64(range.lowerBound),
            census: [TopicCount(topic: PipelineTopics.imuRaw, first: UInt64(range.lowerBound), count: range.count)])
        let message = try BusMessage(size: WireFrame.encodedSize(frames, numbers: numbers))
        WireFrame.encode(frames, into: message.bytes, numbers: numbers)
        return message
    }

    @Test("a stage reading a live stream asks its publisher for what a gap skipped, and counts it lost without answer")
    func gapsAreRecovered() async throws {
        for serving in [true, false] {
            let name = serving ? "gap" : "gap-unserved"
            let (config, stage, publisher, downstream) = try fusionBetweenTestSockets(
                name, upstreamType: "lines", log: { _ in })
            let resend = try #require(config.retransmitEndpoint(of: "up"))
            #expect(resend == "ipc://\(dir)/\(name)-up-resend" && config.retransmitEndpoint(of: "fusion") != nil)
            // The publisher's side: every batch of 5 samples kept, 0 to 24, but 10 to 19 never sent.
            let buffer = RetransmitBuffer(seconds: 60, maximumBytes: 1 << 20)
            let server = serving ? try RetransmitServer(BusContext(), endpoint: resend, buffer: buffer) : nil
            for first in stride(from: 0, to: 25, by: 5) {
                let message = try Self.numbered(first..<first + 5)
                buffer.keep(message)
                if !(10..<20).contains(first) { #expect(try publisher.send(message, blocking: true)) }
            }
            try publisher.send(WireFrame.endOfStream(from: "up").encoded())
            let report = try await stage.value
            server?.stop()
            var stamps: [Double] = []
            while let bytes = try downstream.receive(timeoutMilliseconds: 500) {
                for f in try WireFrame.frames(in: bytes) where f.topic == PipelineTopics.imuFused {
                    stamps.append(try ImuMessage(cdrBytes: f.payload).header.stamp.seconds)
                }
            }
            if serving {
                #expect(report.received == 25 && report.published == 50 && report.losses == 0, "\(report)")
                #expect(report.notes.contains("recovered 10 frame(s) 'up' had skipped, in 1 retransmission(s)"))
                #expect(stamps == (0..<25).map { 100 + Double($0) * 0.01 })
            } else {
                #expect(report.received == 15 && report.losses == 10, "\(report)")
                #expect(
                    report.notes.contains("missing 10 frame(s) from 'up' in 1 gap(s) (by topic: imu/data_raw 10)"),
                    "\(report)")
                #expect(report.notes.contains("1 retransmit request(s) to 'up' went unanswered"), "\(report)")
                #expect(stamps.count == 15)
            }
            publisher.close()
            downstream.close()
        }
    }

    @Test("a stage drops frames sent again by number, counts the ones it missed, and numbers its own output")
    func sequenceNumbers() async throws {
        let (config, stage, publisher, downstream) = try fusionBetweenTestSockets("seq", log: { _ in })
        #expect(config.isReproducible("fusion") && config.restartIsLossless("sink") == false)
        // Samples 0-9, then 5-14 (a restarted upstream sending 5-9 again), then 20-24 (15-19 lost).
        for range in [0..<10, 5..<15, 20..<25] {
            let message = try Self.numbered(range)
            #expect(try publisher.send(message, blocking: true))
        }
        try publisher.send(WireFrame.endOfStream(from: "up").encoded())
        let report = try await stage.value
        #expect(report.received == 20 && report.published == 40, "\(report)")
        #expect(report.notes.contains("dropped 5 frame(s) from 'up' already read (sent again after a restart)"))
        #expect(
            report.notes.contains("missing 5 frame(s) from 'up' in 1 gap(s) (by topic: imu/data_raw 5)"), "\(report)")
        #expect(report.losses == 5)
        // The stage's own output is numbered 0, 1, 2, ... across its messages.
        var next: UInt64 = 0
        while let bytes = try downstream.receive(timeoutMilliseconds: 500) {
            guard let numbers = WireFrame.sequence(of: bytes) else {
                #expect(try WireFrame.frames(in: bytes).allSatisfy(\.isEndOfStream))
                continue
            }
            #expect(numbers.first == next)
            next += UInt64(numbers.count)
        }
        #expect(next == 40)
        publisher.close()
        downstream.close()
    }

    @Test("a source pauses while its reader is gone and resumes where it stopped; without pausing the gap is lost")
    func sourcePausesWithoutReaders() async throws {
        /// Runs a 100 Hz, 1.5 s real-time simulator as its own stage; the test is its only reader and
        /// disconnects for 0.5 s after 0.3 s of samples. Returns the stamps received after
        /// reconnecting, the last one before, and the source's report.
        func run(pausing: Bool, name: String) async throws -> (before: Double, after: [Double], report: StageReport) {
            let endpoint = "ipc://\(dir)/pause-\(name)"
            let config = try PipelineConfig.parse(
                """
                stages:
                  source:
                    type: simulator
                    scenario: rest
                    rate_hz: 100
                    duration_s: 1.5
                    realtime: true
                    pause_without_subscribers: \(pausing)
                    endpoint: \(endpoint)
                  reader:
                    type: measure
                    inputs: [source]
                    topic: imu/data_raw
                """, file: "t.yaml", environment: [:])
            let stage = Task { try await PipelineRunner.runStage(config, named: "source", log: { _ in }) }
            let context = BusContext()
            func imuStamps(_ bytes: [UInt8]) throws -> (stamps: [Double], ended: Bool) {
                var stamps: [Double] = [], ended = false
                for f in try WireFrame.frames(in: bytes) {
                    if f.isEndOfStream {
                        ended = true
                    } else if f.topic == PipelineTopics.imuRaw {
                        stamps.append(try ImuMessage(cdrBytes: f.payload).header.stamp.seconds)
                    }
                }
                return (stamps, ended)
            }
            var first = try BusSocket(context, .sub)
            try first.subscribe([])
            try first.subscribe(Publisher.readerMark(of: "reader"))  // stands in for the stage 'reader'
            try first.connect(endpoint)
            var seen: [Double] = []
            while (seen.last ?? 0) - (seen.first ?? 0) < 0.3, let bytes = try first.receive(timeoutMilliseconds: 5000) {
                seen += try imuStamps(bytes).stamps
            }
            first.close()
            try await Task.sleep(for: .milliseconds(500))
            first = try BusSocket(context, .sub)
            try first.subscribe([])
            try first.subscribe(Publisher.readerMark(of: "reader"))  // stands in for the stage 'reader'
            try first.connect(endpoint)
            var after: [Double] = []
            var ended = false
            while !ended, let bytes = try first.receive(timeoutMilliseconds: 5000) {
                let r = try imuStamps(bytes)
                after += r.stamps
                ended = r.ended
            }
            first.close()
            #expect(ended)
            return (seen.last ?? 0, after, try await stage.value)
        }
        let paused = try await run(pausing: true, name: "on")
        let firstAfter = try #require(paused.after.first)
        // Resumes where it stopped: the samples published while the reader was gone are lost with
        // its queue, but nothing from the 0.5 s pause itself.
        #expect(firstAfter - paused.before < 0.25, "gap \(firstAfter - paused.before) s")
        #expect(paused.report.notes.contains { $0.contains("paused 1 time(s)") }, "\(paused.report.notes)")
        #expect(zip(paused.after, paused.after.dropFirst()).allSatisfy { abs($1 - $0 - 0.01) < 1e-6 })
        let lost = try await run(pausing: false, name: "off")
        let resumedAt = try #require(lost.after.first)
        #expect(resumedAt - lost.before > 0.4, "gap \(resumedAt - lost.before) s")
        #expect(!lost.report.notes.contains { $0.contains("paused") })
    }

    @Test("a stage that cannot start stops the others instead of leaving them waiting")
    func failingStage() async throws {
        let config = try PipelineConfig.parse(
            """
            stages:
              bag:
                type: bag
                path: \(dir)/does-not-exist.mcap
              fusion:
                type: fusion
                inputs: [bag]
              out:
                type: stdout
                inputs: [fusion]
            """, file: "t.yaml", environment: [:])
        do {
            _ = try await PipelineRunner.runAll(config, log: { _ in })
            Issue.record("a missing bag must fail the run")
        } catch let e as PipelineRunError {
            #expect("\(e)".contains("does-not-exist.mcap"))
        }
    }

}

final class LogCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    var lines: [String] {
        lock.lock()
        defer { lock.unlock() }
        return stored
    }
    func append(_ line: String) {
        lock.lock()
        stored.append(line)
        lock.unlock()
    }
}
