import CompassCore
import WireFormat
import MessageBus

/// The fusion filter's verdict on each magnetometer reading, counted for interference/status: how
/// many were assessed and flagged, in how many disturbed periods, for how long, and why (strength,
/// dip, consistency with the gyro). The verdict itself is the filter's gate's; this only tells it.
struct InterferenceTally {
    var assessed: UInt32 = 0, flagged: UInt32 = 0, periods: UInt32 = 0
    var disturbedSeconds = 0.0, disturbedSince: Double?
    var lastFlags: FusionFlags = []
    var throttle: StatusThrottle<Bool>

    /// The reasons a reading is not used.
    static let reasons = MagnetometerVerdictReason.verdictFlags

    init(statusSeconds: Double) { throttle = StatusThrottle(intervalSeconds: statusSeconds) }

    /// Counts the verdict on one reading, from the flags of the estimate it was fused into; readings
    /// while the filter initialises are not assessed.
    mutating func count(_ flags: FusionFlags, at time: Double) {
        guard !flags.contains(.initialising) else { return }
        assessed += 1
        let reasons = flags.intersection(Self.reasons)
        lastFlags = reasons
        if reasons.isEmpty {
            if let since = disturbedSince {
                disturbedSeconds += time - since
                disturbedSince = nil
            }
        } else {
            flagged += 1
            if disturbedSince == nil {
                disturbedSince = time
                periods += 1
            }
        }
    }

    /// interference/status when one is due (every `statusSeconds` and on every change). The gate, for
    /// its reference, is read only then: it is copied out of the filter, and this runs per reading.
    mutating func status(
        _ header: RosHeader, gate: @autoclosure () -> MagneticDisturbanceGate, force: Bool = false
    ) -> InterferenceStatusMessage? {
        let t = header.stamp.seconds
        let disturbed = disturbedSince != nil
        guard throttle.due(disturbed, at: t, force: force) else { return nil }
        let gate = gate()
        let running = disturbedSince.map { t - $0 } ?? 0
        let wire = HeadingMessage.wireFlags(lastFlags)
        return InterferenceStatusMessage(
            header: header, disturbed: disturbed, flags: wire.flags, samplesAssessed: assessed,
            samplesFlagged: flagged, disturbedPeriods: periods, disturbedSeconds: disturbedSeconds + running,
            expectedStrength: gate.referenceFieldMicrotesla ?? .nan, expectedDip: gate.referenceDipDegrees ?? .nan,
            reasons: wire.reasons)
    }

    var summary: String { "\(flagged) of \(assessed) magnetometer samples flagged in \(periods) disturbed period(s)" }
}
