import Foundation
import CompassCore
import WireFormat
import MessageBus

/// GNSS velocity and dual-antenna headings handed to the filter.
extension FusionStage {
    /// Changes the filter as one that takes GNSS; false (nothing done) when it takes none (the
    /// complementary filter) or the smoother runs. A change through the capability copies the filter
    /// once, which at a receiver's rate costs nothing that matters.
    func aidFilter(_ body: (inout any GnssAidedFilter) -> Void) -> Bool {
        guard var aided = filter as? any GnssAidedFilter else { return false }
        body(&aided)
        filter = aided
        return true
    }

    func aid(velocity: GnssVelocitySample) {
        let declination = trueNorth(at: velocity.timestamp).declination
        if !aidFilter({ $0.aid(velocity: velocity, declinationDegrees: declination) }) { gnssPassedOver += 1 }
    }

    /// A dual-antenna heading: the orientation's yaw (ENU, counter-clockwise from east) as a compass
    /// heading, less the baseline's offset; its variance from orientation_covariance[8] (rad^2). One
    /// without an orientation (covariance[0] = -1) or a yaw (x axis vertical) goes to the filter as NaN,
    /// which counts it unusable.
    func aid(heading m: ImuMessage) {
        let provided = m.orientationCovariance.m0 != -1
        // Only a rotation has a heading: an all-zero or far from unit quaternion is a fault (unusable).
        let q = m.orientation
        let unit = abs(q.w * q.w + q.x * q.x + q.y * q.y + q.z * q.z - 1) <= 0.1
        let heading = provided && unit ? m.orientation.headingDegrees : nil
        let sample = GnssHeadingSample(
            timestamp: m.header.stamp.seconds, headingDegrees: (heading ?? .nan) - settings.antennaYawOffsetDegrees,
            varianceDegrees2: m.orientationCovariance.m8 * degreesPerRadian * degreesPerRadian)
        let declination = trueNorth(at: sample.timestamp).declination
        if !aidFilter({ $0.aid(gnssHeading: sample, declinationDegrees: declination) }) { gnssPassedOver += 1 }
    }
}
