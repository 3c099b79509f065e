import CompassCore
import WireFormat
import MessageBus
@testable import Pipeline

/// Heading and imu/data frames such as fusion publishes, for the sink tests.
enum SinkFrames {
    static func heading(_ t: Double, _ degrees: Double, accuracy: Double = 2, flags: UInt16 = 0) -> WireFrame {
        let h = HeadingMessage(
            header: RosHeader(stamp: RosTime(seconds: t), frameId: "imu_link"), magneticHeading: degrees,
            trueHeading: .nan,
            headingAccuracy: accuracy, declination: .nan, orientation: Quaternion(w: 1, x: 0, y: 0, z: 0),
            magneticField: Vector3(20e-6, 0, -40e-6), source: HeadingMessage.Source.fusion.rawValue, flags: flags)
        return cdrFrame(h, topic: PipelineTopics.heading)
    }

    static func fused(_ t: Double, _ q: Quaternion = Quaternion(w: 1, x: 0, y: 0, z: 0)) -> WireFrame {
        let m = ImuMessage(
            header: RosHeader(stamp: RosTime(seconds: t), frameId: "imu_link"), orientation: q,
            orientationCovariance: .zero,
            angularVelocity: .zero, angularVelocityCovariance: .zero, linearAcceleration: Vector3(0, 0, 9.81),
            linearAccelerationCovariance: .zero)
        return cdrFrame(m, topic: PipelineTopics.imuFused)
    }
}
