import Foundation
import CompassCore
import WireFormat
import MessageBus

/// What a smoothed sample's outputs need besides its estimate and the sample the smoother keeps (the
/// frame id is an index: it rarely changes, and a string per sample would double the memory a long
/// recording needs).
struct HeldSample {
    var stamp: RosTime
    var frameIndex: Int32
    var declination: Double
    var northFlags: UInt16
}

/// The two outputs of a fusion update: gyrocompass_msgs/Heading and sensor_msgs/Imu with orientation.
public enum FusionMessages {
    public static func heading(_ o: FusionOutput, header: RosHeader, field: Vector3?) -> HeadingMessage {
        let wire = HeadingMessage.wireFlags(o.flags)
        return HeadingMessage(
            header: header, magneticHeading: o.headingDegrees ?? .nan, trueHeading: .nan,
            headingAccuracy: o.headingAccuracyDegrees ?? .nan, declination: .nan, orientation: o.orientation,
            magneticField: field.map { $0 * 1e-6 } ?? Vector3(.nan, .nan, .nan),
            source: HeadingMessage.Source.fusion.rawValue, flags: wire.flags, reasons: wire.reasons)
    }

    /// Orientation covariance: only the heading (about z) is estimated; x and y stay 0 (unknown).
    public static func imu(_ o: FusionOutput, header: RosHeader, sample: ImuSample) -> ImuMessage {
        var zCovariance = Covariance9.zero
        zCovariance.m8 = o.headingVarianceDegrees2.map { $0 * radiansPerDegree * radiansPerDegree } ?? 0
        return ImuMessage(
            header: header, orientation: o.orientation, orientationCovariance: zCovariance,
            angularVelocity: sample.angularVelocity - o.gyroBias, angularVelocityCovariance: .zero,
            linearAcceleration: sample.specificForce, linearAccelerationCovariance: .zero)
    }
}
