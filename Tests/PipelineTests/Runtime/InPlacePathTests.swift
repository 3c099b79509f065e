import Testing
import Foundation
import CompassCore
import WireFormat
import MessageBus
import CZeroMQ
@testable import Pipeline

/// The in-place path (frames read and patched where they arrived) must give exactly what the general
/// path (frames decoded, processed, re-encoded) gives, for every stage that has one.
@Suite("In-place path")
struct InPlacePathTests {
    static let config = """
        stages:
          sim:
            type: simulator
            scenario: figure_eight
            duration_s: 12
            realtime: false
            hard_iron_ut: [22, -27, 14]
            motor_current_a: 20
            motor_field_ut_per_a: [0.5, 0, -0.4]
          calibration:
            type: calibration
            inputs: [sim]
            online: true
          fusion:
            type: fusion
            inputs: [calibration]
          measure:
            type: measure
            inputs: [fusion]
        """

    static func stage(_ name: String) throws -> StageLogic {
        let c = try PipelineConfig.parse(config, file: "t.yaml", environment: [:])
        return try c.stage(named: name)!.makeLogic(log: { _ in })
    }

    /// Frames through `general` one by one, and through `inPlace` in bus messages of 32 frames: both
    /// must give the same frames in the same order. Returns the data frames (input topics) and the
    /// added frames of each path, and how many messages took the in-place path.
    static func compare(_ frames: [WireFrame], general: TransformLogic, inPlace: InPlaceTransform) throws
        -> (
            general: [WireFrame], inPlace: [WireFrame], generalAdded: [WireFrame], inPlaceAdded: [WireFrame],
            messagesInPlace: Int
        )
    {
        var out: [WireFrame] = []
        for f in frames { try general.process(f, into: &out) }
        let inputTopics: Set<String> = [PipelineTopics.imuRaw, PipelineTopics.magnetometer]
        var passedOn: [WireFrame] = [], handled = 0
        var pass = InPlacePass(inPlace)
        for start in stride(from: 0, to: frames.count, by: 32) {
            let message = try BusMessage(size: WireFrame.encodedSize(frames[start..<min(start + 32, frames.count)]))
            WireFrame.encode(frames[start..<min(start + 32, frames.count)], into: message.bytes)
            if let passed = try pass.run(message) {
                handled += 1
                if let whole = passed.message { passedOn += try WireFrame.frames(in: whole.array) }
                passedOn += pass.output
            } else {
                for f in try WireFrame.frames(in: message.array) { try inPlace.process(f, into: &passedOn) }
            }
        }
        #expect(out == passedOn)  // the same frames in the same order
        let generalData = out.filter { inputTopics.contains($0.topic) },
            generalAdded = out.filter { !inputTopics.contains($0.topic) }
        let inPlaceData = passedOn.filter { inputTopics.contains($0.topic) }
        return (generalData, inPlaceData, generalAdded, passedOn.filter { !inputTopics.contains($0.topic) }, handled)
    }

    static func simulatedFrames() throws -> [WireFrame] {
        let source = try stage("sim") as! SimulatorSource
        var frames: [WireFrame] = []
        try source.run {
            frames += $0
            return 0
        }
        return frames
    }

    @Test("calibration, fusion and the measure sink give the same frames in place as in general")
    func samePaths() throws {
        let raw = try Self.simulatedFrames()
        #expect(raw.count > 2000)
        // Calibration (online fit, the gyro read for the gyro-aided fit): patched payloads equal the general path's.
        let c = try Self.compare(
            raw, general: try Self.stage("calibration") as! TransformLogic,
            inPlace: try Self.stage("calibration") as! InPlaceTransform)
        // While the motors' field is learned (about 12 s), readings are held back: those messages take the
        // general path, which can drop frames; every other message goes in place.
        let messages = (raw.count + 31) / 32
        #expect(c.messagesInPlace < messages && c.messagesInPlace > messages / 2)
        #expect(c.general == c.inPlace)
        #expect(!c.generalAdded.isEmpty && c.generalAdded == c.inPlaceAdded)  // calibration/status
        #expect(c.general.contains { $0.payload != raw[0].payload })
        // Fusion makes new frames: the same headings and imu/data.
        let f = try Self.compare(
            c.general, general: try Self.stage("fusion") as! TransformLogic,
            inPlace: try Self.stage("fusion") as! InPlaceTransform)
        #expect(f.generalAdded.count > 2000 && f.generalAdded == f.inPlaceAdded)
        // The measure sink counts the same headings.
        let general = try Self.stage("measure") as! MeasureSink, inPlace = try Self.stage("measure") as! MeasureSink
        _ = try Self.compare(f.generalAdded, general: general, inPlace: inPlace)
        #expect(
            general.count == inPlace.count
                && general.count == f.generalAdded.filter { $0.topic == PipelineTopics.heading }.count)
    }

    @Test("every registered stage type that reads in place gives what its general path gives, with default settings")
    func everyInPlaceTypeOfTheRegistry() throws {
        // Calibrated frames with fusion's outputs appended: every topic an in-place stage may meet.
        let calibrated = try Self.compare(
            try Self.simulatedFrames(), general: try Self.stage("calibration") as! TransformLogic,
            inPlace: try Self.stage("calibration") as! InPlaceTransform)
        let fused = try Self.compare(
            calibrated.general, general: try Self.stage("fusion") as! TransformLogic,
            inPlace: try Self.stage("fusion") as! InPlaceTransform)
        // Transforms read the calibrated stream; sinks also what fusion adds.
        let sinkInput = calibrated.general + fused.generalAdded
        var checked: [String] = []
        for type in StageRegistry.types where !type.isSource {
            let general = try stageLogic(type.name, minimalSettings(type)) as! TransformLogic
            guard case .inPlace = general.inputHandling,
                let inPlace = try stageLogic(type.name, minimalSettings(type)) as? InPlaceTransform
            else { continue }
            let c = try Self.compare(type.isSink ? sinkInput : calibrated.general, general: general, inPlace: inPlace)
            #expect(c.messagesInPlace > 0, "\(type.name) never took the in-place path")
            #expect(c.general == c.inPlace && c.generalAdded == c.inPlaceAdded, "\(type.name)")
            checked.append(type.name)
        }
        // An identity calibration (the default) passes messages on unread.
        #expect(checked == ["fusion", "measure"], "\(checked)")
    }

    /// Settings a type needs before it can be built (paths in a temporary directory).
    static func requiredSettings(_ type: StageType) -> String {
        type.settings.filter { $0.defaultValue == nil }.map { "    \($0.name): \(temporaryPath($0.name))\n" }.joined()
    }

    @Test(
        "a message shared with another reader is copied before it is patched; big-endian payloads take the general path"
    )
    func sharedAndBigEndian() throws {
        // Without the motor current: its first message would start holding readings (the general path).
        let raw = Array(try Self.simulatedFrames().filter { $0.topic != PipelineTopics.motorCurrent }.prefix(64))
        let calibration = try Self.stage("calibration") as! InPlaceTransform
        // Two readers of one publisher in this process share the message's content.
        let context = BusContext()
        let publisher = try BusSocket(context, .xpub)
        try publisher.setOption(ZMQ_XPUB_VERBOSE, 1)  // both (identical) subscriptions reported
        try publisher.bind("inproc://shared")
        let readers = try (0..<2).map { _ in try BusSocket(context, .sub) }
        for r in readers {
            try r.subscribe([])
            try r.connect("inproc://shared")
        }
        for _ in readers { while try publisher.receive(timeoutMilliseconds: 100)?.first != 1 {} }
        let original = WireFrame.encodedMessage(raw[0..<32])
        try publisher.send(original)
        let first = try #require(try readers[0].receiveMessage(timeoutMilliseconds: 1000))
        let second = try #require(try readers[1].receiveMessage(timeoutMilliseconds: 1000))
        #expect(first.isShared)
        var pass = InPlacePass(calibration)
        let passed = try #require(try pass.run(first))
        #expect(passed.message !== first)
        #expect(first.array == original && second.array == original)  // the other reader's copy is untouched
        // Big endian: the general path (the in-place pass declines without touching anything).
        var be = raw[1]
        be.payload[1] = 0  // CDR_BE marker; the numbers are garbage then, but decodable
        let message = try BusMessage(size: WireFrame.encodedSize([raw[3], be][...]))
        WireFrame.encode([raw[3], be][...], into: message.bytes)
        let before = message.array
        #expect(try pass.run(message) == nil)
        #expect(message.array == before)
        for r in readers { r.close() }
        publisher.close()
    }

    @Test("a pipeline pinned to CPU 0 runs to the end, stage and libzmq I/O threads included")
    func pinnedPipelineRuns() async throws {
        let config = try PipelineConfig.parse(
            "cpus: [0]\n" + Self.config.replacingOccurrences(of: "duration_s: 12", with: "duration_s: 2"),
            file: "t.yaml",
            environment: [:])
        let reports = try await PipelineRunner.runAll(config, log: { _ in })
        #expect(reports.first { $0.stage == "measure" }?.received == reports.first { $0.stage == "fusion" }?.published)
        #expect((reports.first { $0.stage == "fusion" }?.published ?? 0) > 300)
    }
}
