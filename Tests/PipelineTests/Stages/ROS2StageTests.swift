import Foundation
import Testing
import CompassCore
import WireFormat
import MessageBus
import ROS2DDS
@testable import Pipeline

/// The ros2_source and ros2_sink stages through a real Cyclone domain: the test is the other ROS 2 node.
@Suite(.serialized) struct ROS2StageTests {
    static let domain = 78

    func topicStem() -> String { "t\(UInt32.random(in: 0...UInt32.max))" }

    func waitUntil(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if condition() { return true }
            usleep(2000)
        }
        return condition()
    }

    func imuFrame(yawDegrees: Double, stamp: Double, frame: String = "imu_link") -> WireFrame {
        let half = yawDegrees * radiansPerDegree / 2
        var imu = ImuMessage(
            header: RosHeader(stamp: RosTime(seconds: stamp), frameId: frame),
            orientation: Quaternion(w: cos(half), x: 0, y: 0, z: sin(half)), orientationCovariance: .zero,
            angularVelocity: Vector3(0, 0, 0.1), angularVelocityCovariance: .zero,
            linearAcceleration: Vector3(0, 0, 9.81), linearAccelerationCovariance: .zero)
        imu.orientationCovariance.m8 = 0.01
        return cdrFrame(imu, topic: PipelineTopics.imuFused)
    }

    /// Publishes through a sink built from `settings`, reads `topic` as `type` from a test participant.
    func throughSink(_ settings: String, read topic: String, type: String, frames: [WireFrame]) throws -> [[UInt8]] {
        let sink = try stageLogic("ros2_sink", "    domain_id: \(Self.domain)\n" + settings) as! TransformLogic
        let participant = try DomainParticipant(domainId: UInt32(Self.domain))
        let reader = try SerializedReader(
            participant, try ROS2Topic(topic, type: type, qos: ROS2QoS(reliability: .reliable, history: .keepAll)))
        #expect(waitUntil { reader.matchedWriters > 0 })
        usleep(100_000)
        _ = try processed(frames, by: sink)
        var got: [SerializedSample] = []
        let end = Date().addingTimeInterval(5)
        while got.count < frames.count && Date() < end {
            try reader.take(into: &got)
            usleep(2000)
        }
        return got.map(\.bytes)
    }

    @Test func anENUImuGoesOutAsFused() throws {
        let stem = topicStem()
        let frames = (0..<20).map { imuFrame(yawDegrees: Double($0), stamp: 100 + Double($0) * 0.01) }
        let got = try throughSink(
            "    imu_topic: \(stem)/imu\n    heading_topic: ''\n    quaternion_topic: ''\n", read: "\(stem)/imu",
            type: ImuMessage.typeName, frames: frames)
        #expect(got == frames.map { Array($0.payload) })
    }

    @Test func nedAndAYawOffsetRotateTheWorld() throws {
        let stem = topicStem()
        let enuYaw = 30.0
        let got = try throughSink(
            "    imu_topic: \(stem)/imu\n    heading_topic: ''\n    quaternion_topic: ''\n    world_frame: ned\n"
                + "    yaw_offset: 0.2\n    declination: 0.05\n    orientation_stddev: 0.1\n",
            read: "\(stem)/imu", type: ImuMessage.typeName, frames: [imuFrame(yawDegrees: enuYaw, stamp: 5)])
        let out = try ImuMessage(cdrBytes: try #require(got.first))
        // The sensor's x axis: in ENU at yaw 30 deg + 0.2 - 0.05 rad; the same direction in NED (n, e, d) = (y, x, -z).
        let yaw = enuYaw * radiansPerDegree + 0.15
        let xNED = out.orientation.rotate(Vector3(1, 0, 0))
        #expect(abs(xNED.x - sin(yaw)) < 1e-9 && abs(xNED.y - cos(yaw)) < 1e-9 && abs(xNED.z) < 1e-9)
        let zNED = out.orientation.rotate(Vector3(0, 0, 1))
        #expect(abs(zNED.z + 1) < 1e-9)  // the sensor's up is NED's -down
        #expect(abs(out.orientationCovariance.m0 - 0.01) < 1e-15 && abs(out.orientationCovariance.m4 - 0.01) < 1e-15)
        #expect(out.orientationCovariance.m8 == 0.01)  // the filter's heading variance stays
    }

    @Test func tfCarriesTheOrientationFromTheFixedFrame() throws {
        let stem = topicStem()
        let sink =
            try stageLogic(
                "ros2_sink",
                "    domain_id: \(Self.domain)\n    namespace: /\(stem)\n    publish_tf: true\n    fixed_frame: map\n")
            as! TransformLogic
        let participant = try DomainParticipant(domainId: UInt32(Self.domain))
        let reader = try SerializedReader(
            participant,
            try ROS2Topic("/tf", type: TFMessage.typeName, qos: ROS2QoS(reliability: .reliable, history: .keepAll)))
        #expect(waitUntil { reader.matchedWriters > 0 })
        usleep(100_000)
        _ = try processed([imuFrame(yawDegrees: 45, stamp: 7, frame: "\(stem)_imu")], by: sink)
        var got: [SerializedSample] = []
        #expect(
            waitUntil {
                _ = try? reader.take(into: &got)
                return got.contains {
                    (try? TFMessage(cdrBytes: $0.bytes))?.transforms.first?.childFrameId == "\(stem)_imu"
                }
            })
        let tf = try #require(
            got.compactMap { try? TFMessage(cdrBytes: $0.bytes) }.first {
                $0.transforms.first?.childFrameId == "\(stem)_imu"
            })
        #expect(tf.transforms[0].header.frameId == "map")
        #expect(abs(tf.transforms[0].rotation.z - sin(22.5 * radiansPerDegree)) < 1e-12)
    }

    @Test func theSourcePassesBytesInWritingOrderAndCountsMalformed() throws {
        let stem = topicStem()
        let log = LogCollector()
        let source =
            try stageLogic(
                "ros2_source",
                "    domain_id: \(Self.domain)\n    imu_topic: \(stem)/raw\n    mag_topic: \(stem)/mag\n"
                    + "    qos: reliable, keep_all\n    end_after_idle_s: 1\n    order_window_ms: 50\n",
                log: { log.append($0) }) as! SourceLogic
        let participant = try DomainParticipant(domainId: UInt32(Self.domain))
        let qos = ROS2QoS(reliability: .reliable, history: .keepAll)
        let imuWriter = try SerializedWriter(
            participant, try ROS2Topic("\(stem)/raw", type: ImuMessage.typeName, qos: qos))
        let magWriter = try SerializedWriter(
            participant, try ROS2Topic("\(stem)/mag", type: MagneticFieldMessage.typeName, qos: qos))
        var sent: [WireFrame] = []
        for k in 0..<200 {
            appendRawSample(
                RosHeader(stamp: RosTime(seconds: 50 + Double(k) * 0.01), frameId: "imu_link"),
                angularVelocity: Vector3(0, 0, 0.1), specificForce: Vector3(0, 0, 9.81),
                fieldTesla: Vector3(0, 2e-5, -4e-5), to: &sent)
        }
        let toSend = sent
        let writer = Thread {
            _ = waitUntil { imuWriter.matchedReaders > 0 && magWriter.matchedReaders > 0 }
            usleep(200_000)
            for (i, f) in toSend.enumerated() {
                if i == 101 { try? imuWriter.write([0, 1, 0, 0, 1]) }  // a damaged Imu among good ones
                try? (f.topic == PipelineTopics.imuRaw ? imuWriter : magWriter).write(f.payload)
            }
        }
        writer.start()
        let frames = try emitted(by: source)
        #expect(frames.map(\.topic) == sent.map(\.topic))
        #expect(frames.map { Array($0.payload) } == sent.map { Array($0.payload) })
        #expect(source.losses == 1)
        #expect(log.lines.contains { $0.contains("malformed message skipped") })
    }

    @Test func badQoSAndNamesAreRefusedWhenTheFileLoads() {
        for (settings, needle) in [
            ("    qos: reliable, depth zero\n", "depth needs a whole number"),
            ("    qos: fastest\n", "not a QoS profile"),
            ("    imu_topic: imu//raw\n", "empty token"),
        ] {
            #expect(throws: PipelineConfigError.self) {
                do {
                    _ = try PipelineConfig.parse(
                        stageTestPipeline("ros2_source", settings), file: "t.yaml", environment: [:])
                } catch let e as PipelineConfigError {
                    #expect("\(e)".contains(needle), "\(e)")
                    throw e
                }
            }
        }
    }
}
