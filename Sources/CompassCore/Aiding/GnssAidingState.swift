#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What `KalmanFilter` keeps about GNSS between samples (kept apart from the filter's own state, as
/// VQF keeps parameters, state and coefficients apart).
///
/// The receiver's velocity is used twice:
///   - its change between epochs is the vehicle's acceleration. The filter integrates the specific
///     force it sees in its earth frame over the same epochs, and both means are low-passed alike, so
///     their difference is gravity alone: the inclination update then measures gravity even while
///     the vehicle accelerates and turns, and, because a wrong heading turns the accelerometer's
///     horizontal share away from the receiver's, the same update observes the heading whenever the
///     vehicle accelerates;
///   - its direction is the course over ground: the heading, for vehicles that move along their x
///     axis (`courseIsHeading`).
public struct GnssAidingState: Sendable {
    /// True north's angle from magnetic north, degrees east (the filter's earth frame is magnetic).
    public internal(set) var declinationDegrees = 0.0
    /// The previous epoch: stamp (s) and velocity in the filter's frame (m/s).
    var previousEpoch: (time: Double, velocity: Vector3)?
    /// The earth-frame specific force integrated since the previous epoch (m/s) and the seconds it covers.
    var forceIntegral = Vector3.zero
    var forceSeconds = 0.0
    /// Epoch means low-passed alike: the specific force in the earth frame, and the receiver's
    /// acceleration, m/s^2.
    var lowPassedForce = Vector3.zero
    var lowPassedAcceleration = Vector3.zero
    /// Seconds the unbroken chain of epochs has run, and the stamp of its latest epoch.
    var chainSeconds = 0.0
    var latestEpoch = -Double.infinity
    /// Latest horizontal speed, m/s, and its stamp.
    var latestSpeed = 0.0
    var latestSpeedTime = -Double.infinity
    /// A heading measured by GNSS (course or dual antenna) waiting for the next measurement update:
    /// radians clockwise from magnetic north, and its variance, rad^2.
    var pendingHeading: (radians: Double, variance: Double, kind: GnssHeadingKind)?
    /// The heading is known: from the magnetometer, or once GNSS has given it.
    var headingKnown = true
    /// Residuals (filter heading minus GNSS heading, rad) of the dual-antenna headings rejected in a
    /// row: when enough of them agree with each other, the filter's heading is the one that is wrong.
    var rejectedHeadingResiduals: [Double] = []
    /// The latest time GNSS corrected the heading, s.
    var headingAidedAt = -Double.infinity
    /// The bank of yaw hypotheses may judge the compass (and when it last could); the compass's heading
    /// against the bank's; when the bank's heading was last applied.
    var bankUsable = false
    var bankUsableAt = -Double.infinity
    var compassAgainstBank = AveragedDisagreement()
    var bankHeadingAt = -Double.infinity
    /// The magnetometer's heading innovation against a GNSS-held heading.
    var compassAgainstGnss = AveragedDisagreement()
    var bankDisagrees: Bool { compassAgainstBank.beyond }
    var compassDisagrees: Bool { compassAgainstGnss.beyond }
    /// What GNSS gave, counted.
    public internal(set) var counts = GnssAidingCounts()

    /// The chain of epochs is usable at `time`: it has run for `primeSeconds` and its latest epoch is
    /// recent.
    func chainActive(at time: Double, primeSeconds: Double, maximumGap: Double) -> Bool {
        chainSeconds >= primeSeconds && time - latestEpoch <= maximumGap
    }

    /// The receiver says the vehicle moves at `time`.
    func moving(at time: Double, settings: KalmanFilterSettings) -> Bool {
        time - latestSpeedTime <= settings.maximumVelocityGapSeconds
            && latestSpeed > settings.restMaximumSpeedMetresPerSecond
    }

    /// The heading is held by GNSS at `time`.
    func headingAided(at time: Double) -> Bool { time - headingAidedAt <= Self.aidedSeconds }

    /// How long a GNSS heading correction counts as holding the heading, seconds: a few updates of a
    /// 1 Hz receiver.
    static let aidedSeconds = 3.0

    mutating func forgetBankComparison() {
        bankUsable = false
        compassAgainstBank = AveragedDisagreement()
        bankHeadingAt = -.infinity
    }

    /// Turns the earth-frame quantities the filter estimated with a correction dTheta.
    mutating func rotate(by dTheta: Vector3) {
        lowPassedForce += dTheta.cross(lowPassedForce)
        forceIntegral += dTheta.cross(forceIntegral)
    }
}

/// A heading difference (radians) averaged over a time constant, and whether it is beyond a limit: set
/// once the average has run for a time constant and is beyond `limit`, cleared once it is below
/// `releaseBelow`.
struct AveragedDisagreement: Sendable {
    var average = 0.0, seconds = 0.0
    var beyond = false

    mutating func add(_ difference: Double, dt: Double, tau: Double, limit: Double, releaseBelow: Double) -> Bool {
        average += (difference - average) * (1 - exp(-dt / tau))
        seconds += dt
        if seconds >= tau {
            let off = abs(average)
            if off > limit { beyond = true } else if off < releaseBelow { beyond = false }
        }
        return beyond
    }
}

/// Where a GNSS heading came from.
enum GnssHeadingKind: Sendable {
    /// The course over ground (`courseIsHeading`).
    case course
    /// A dual-antenna receiver's heading.
    case dualAntenna
    /// The bank of yaw hypotheses, while it says the compass led the heading away.
    case hypotheses
}

/// GNSS messages used and passed over, by kind.
public struct GnssAidingCounts: Sendable, Equatable {
    /// Velocities taken (each extends the acceleration chain or starts one).
    public var velocities = 0
    /// Courses applied as heading, and those rejected as inconsistent with the heading.
    public var coursesUsed = 0, coursesRejected = 0
    /// Dual-antenna headings applied, and rejected.
    public var headingsUsed = 0, headingsRejected = 0
    /// Times the heading was found from the vehicle's acceleration without a magnetometer; of those,
    /// by the bank of yaw hypotheses (the rest by the closed-form alignment).
    public var alignments = 0
    public var bankAlignments = 0
    /// Headings of the yaw hypotheses applied because the compass disagreed with them, and rejected.
    public var bankHeadingsUsed = 0, bankHeadingsRejected = 0
    /// Velocity or heading messages not usable (non-finite, stamped before the previous one, a speed
    /// no vehicle reaches, a quaternion that is not a rotation).
    public var unusable = 0
    /// Times the heading was taken from dual-antenna headings that agreed with each other against it.
    public var headingRealignments = 0

    public init() {}

    /// "velocity 2400, course 1800 (3 rejected), dual-antenna heading 0, aligned 1 time(s)".
    public var summary: String {
        "velocity \(velocities), course \(coursesUsed) (\(coursesRejected) rejected), dual-antenna heading "
            + "\(headingsUsed) (\(headingsRejected) rejected), aligned from acceleration \(alignments) time(s)"
            + (bankAlignments > 0 ? " (\(bankAlignments) by the yaw hypotheses)" : "")
            + (bankHeadingsUsed + bankHeadingsRejected > 0
                ? ", yaw hypotheses' heading against the compass \(bankHeadingsUsed) (\(bankHeadingsRejected) rejected)"
                : "")
            + (headingRealignments > 0
                ? ", heading taken again from \(GnssAidingCounts.consensusHeadings) agreeing dual-antenna headings "
                    + "\(headingRealignments) time(s)" : "")
            + (unusable > 0 ? ", \(unusable) unusable" : "")
    }

    /// Dual-antenna headings in a row that, rejected against the filter's heading yet agreeing with each
    /// other, outvote it (a first heading that was wrong would otherwise lock every later one out).
    public static let consensusHeadings = 5

    /// Largest plausible GNSS speed, m/s: well above any vehicle this filter aids (an airliner cruises
    /// at about 250); a receiver's velocity beyond it is a fault.
    public static let maximumSpeedMetresPerSecond = 600.0
}
