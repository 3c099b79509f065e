import Testing
import Foundation
import CompassCore
import WireFormat
import MessageBus
import IMUSimulator
@testable import Pipeline

/// The simulator's drive through the fusion stage: gnss/velocity read from the stream, the heading
/// flags, the summary, and the settings that turn it on and off.
@Suite("GNSS aiding in the fusion stage")
struct GnssAidingStageTests {
    struct Outcome {
        var rmse: Double
        var notes: [String]
        var losses: Int
        var aidedHeadings: Int
        var velocities: Int
    }

    static func run(fusion: String, source extra: String = "", gnssRate: Int = 10, from: Double = 1) throws -> Outcome {
        let text = """
            stages:
              sim:
                type: simulator
                scenario: drive
                seed: 2
                duration_s: 240
                realtime: false
                gnss_rate_hz: \(gnssRate)
            \(extra)
              fusion:
                type: fusion
                inputs: [sim]
            \(fusion)
            """
        let config = try PipelineConfig.parse(text, file: "drive.yaml", environment: [:])
        let source = try config.stage(named: "sim")!.makeLogic(log: { _ in }) as! SimulatorSource
        let stage = try config.stage(named: "fusion")!.makeLogic(log: { _ in }) as! FusionStage
        let frames = try emitted(by: source)
        let fused = try processed(frames, by: stage)
        let rmse = try headingRMSE(fused, scenario: source.scenario(), count: 24_000, from: from)
        let aided = try fused.filter { $0.topic == PipelineTopics.heading }.filter {
            try HeadingMessage(cdrBytes: $0.payload).fusionFlags.contains(.gnssAided)
        }.count
        return Outcome(
            rmse: rmse, notes: stage.notes, losses: stage.losses, aidedHeadings: aided,
            velocities: frames.filter { $0.topic == PipelineTopics.gnssVelocity }.count)
    }

    @Test("gnss/velocity from the simulator aids the heading; the summary counts it; nothing is lost")
    func velocityThroughTheStage() throws {
        let aided = try Self.run(fusion: "")
        let plain = try Self.run(fusion: "", gnssRate: 0)
        print("stage: velocity-aided rmse \(aided.rmse), without \(plain.rmse); aided headings \(aided.aidedHeadings)")
        // 240 s at 10 Hz less the 15 s outage.
        #expect(aided.velocities == 2250)
        #expect(plain.velocities == 0)
        #expect(aided.rmse < 1.0)
        #expect(aided.rmse < plain.rmse * 0.6)
        #expect(aided.aidedHeadings > 5000)
        #expect(plain.aidedHeadings == 0)
        #expect(aided.losses == 0)
        #expect(aided.notes.contains { $0.hasPrefix("gnss: velocity 2250") })
    }

    @Test("course_is_heading and use_mag: false from the pipeline file")
    func courseWithoutMagnetometer() throws {
        let course = try Self.run(
            fusion: "    course_is_heading: true\n    use_mag: false", source: "    use_mag: false", from: 60)
        print("stage: course, no magnetometer: rmse \(course.rmse); \(course.notes)")
        #expect(course.rmse < 0.5)
        #expect(course.notes.contains { $0.contains("gnss: velocity") && !$0.contains("course 0 ") })
    }

    @Test("the complementary filter and the smoother say they passed GNSS over, and count it as loss")
    func passedOverIsSaid() throws {
        for fusion in ["    filter: complementary", "    smooth: true"] {
            let outcome = try Self.run(fusion: fusion)
            #expect(outcome.notes.contains { $0.hasPrefix("2250 GNSS message(s) not used") }, "\(fusion)")
            #expect(outcome.losses == 2250)
        }
    }

    @Test("a bag's velocity_topic of the wrong type is refused, naming the setting")
    func wrongVelocityType() throws {
        let bag = temporaryPath("drive.mcap")
        let text = """
            stages:
              sim:
                type: simulator
                scenario: drive
                duration_s: 5
                realtime: false
                gnss_rate_hz: 5
              record:
                type: record
                inputs: [sim]
                path: \(bag)
                topics: [imu/data_raw, imu/mag, gnss/velocity]
            """
        let config = try PipelineConfig.parse(text, file: "rec.yaml", environment: [:])
        let source = try config.stage(named: "sim")!.makeLogic(log: { _ in }) as! SimulatorSource
        let record = try config.stage(named: "record")!.makeLogic(log: { _ in }) as! SinkLogic
        for f in try emitted(by: source) { try record.consume(f) }
        try record.close()
        defer { try? FileManager.default.removeItem(atPath: bag) }
        let wrong = """
            stages:
              bag:
                type: bag
                path: \(bag)
                velocity_topic: /imu/mag
              fusion:
                type: fusion
                inputs: [bag]
            """
        let bad = try PipelineConfig.parse(wrong, file: "bad.yaml", environment: [:])
        #expect(throws: (any Error).self) { _ = try bad.stage(named: "bag")!.makeLogic(log: { _ in }) }
        do { _ = try bad.stage(named: "bag")!.makeLogic(log: { _ in }) } catch {
            #expect("\(error)".contains("velocity_topic /imu/mag carries sensor_msgs/msg/MagneticField"))
        }
        let right = try PipelineConfig.parse(
            wrong.replacingOccurrences(of: "/imu/mag", with: "/gnss/velocity"), file: "good.yaml", environment: [:])
        let source2 = try right.stage(named: "bag")!.makeLogic(log: { _ in }) as! SourceLogic
        let frames = try emitted(by: source2)
        #expect(frames.filter { $0.topic == PipelineTopics.gnssVelocity }.count == 25)
    }
}

@Suite("Dual-antenna headings in the fusion stage")
struct DualAntennaStageTests {
    @Test("a heading message without an orientation is counted unusable, not blamed on the filter")
    func noOrientationIsUnusable() throws {
        let config = try PipelineConfig.parse(
            "stages:\n  sim: {type: simulator, scenario: rest, duration_s: 2, realtime: false}\n"
                + "  fusion: {type: fusion, inputs: [sim]}\n", file: "dual.yaml", environment: [:])
        let source = try config.stage(named: "sim")!.makeLogic(log: { _ in }) as! SimulatorSource
        let stage = try config.stage(named: "fusion")!.makeLogic(log: { _ in }) as! FusionStage
        var frames = try emitted(by: source)
        let stamp = RosTime(seconds: source.scenario().startTime + 1)
        func heading(_ covariance: Covariance9) -> WireFrame {
            cdrFrame(
                ImuMessage(
                    header: RosHeader(stamp: stamp, frameId: "gnss"), orientation: .identity,
                    orientationCovariance: covariance, angularVelocity: .zero, angularVelocityCovariance: .zero,
                    linearAcceleration: .zero, linearAccelerationCovariance: .zero),
                topic: PipelineTopics.gnssHeading)
        }
        frames.insert(heading(.notProvided), at: frames.count / 2)
        _ = try processed(frames, by: stage)
        #expect(stage.notes.contains { $0.hasPrefix("gnss:") && $0.contains("1 unusable") }, "\(stage.notes)")
        #expect(!stage.notes.contains { $0.contains("not used") }, "\(stage.notes)")
        #expect(stage.losses == 1)
    }
}
