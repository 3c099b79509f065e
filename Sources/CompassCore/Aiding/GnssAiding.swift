#if canImport(Glibc)
    import Glibc
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

extension KalmanFilter {
    /// Sets the declination GNSS directions are turned by (the filter works in magnetic north). Without
    /// one, true north is taken for magnetic north.
    public mutating func setGnssDeclination(degrees: Double) {
        if degrees.isFinite { aiding.declinationDegrees = degrees }
    }

    /// Takes one GNSS velocity (stamped at or before the IMU samples that follow it). It extends the
    /// acceleration chain the inclination update uses and, with `courseIsHeading`, gives the heading.
    public mutating func update(velocity sample: GnssVelocitySample) {
        guard sample.timestamp.isFinite, sample.velocityENU.isFinite,
            sample.velocityENU.norm <= GnssAidingCounts.maximumSpeedMetresPerSecond,
            sample.timestamp > aiding.latestEpoch,
            sample.timestamp > (aiding.previousEpoch?.time ?? -.infinity)
        else {
            aiding.counts.unusable += 1
            return
        }
        aiding.counts.velocities += 1
        let v = sample.velocityENU.trueToMagnetic(declinationDegrees: aiding.declinationDegrees)
        let sigma = settings.defaultVelocitySigmaMetresPerSecond
        let variance =
            sample.horizontalVariance.isFinite && sample.horizontalVariance > 0
            ? sample.horizontalVariance : sigma * sigma
        let speed = sample.horizontalSpeed
        aiding.latestSpeed = speed
        aiding.latestSpeedTime = sample.timestamp
        // Before the first IMU sample there is no force to compare with: the epoch only starts the chain.
        if started, let previous = aiding.previousEpoch,
            sample.timestamp - previous.time <= settings.maximumVelocityGapSeconds, aiding.forceSeconds > 0
        {
            let interval = sample.timestamp - previous.time
            let acceleration = (v - previous.velocity) / interval
            let force = aiding.forceIntegral / aiding.forceSeconds
            if aiding.chainSeconds == 0 {
                aiding.lowPassedForce = force
                aiding.lowPassedAcceleration = acceleration
            } else {
                let w = 1 - exp(-interval / settings.accelerometerLowPassSeconds)
                aiding.lowPassedForce += (force - aiding.lowPassedForce) * w
                aiding.lowPassedAcceleration += (acceleration - aiding.lowPassedAcceleration) * w
            }
            aiding.chainSeconds += interval
            aiding.latestEpoch = sample.timestamp
            if yawEstimator.isRunning {
                yawEstimator.update(
                    forceIntegral: aiding.forceIntegral, seconds: aiding.forceSeconds, velocity: v, variance: variance)
                checkCompassAgainstBank(interval: interval, at: sample.timestamp)
            } else {
                yawEstimator.start(velocity: v, variance: variance)
            }
        } else {
            aiding.chainSeconds = 0
            if started { yawEstimator.start(velocity: v, variance: variance) } else { yawEstimator.stop() }
            aiding.bankUsable = false  // the verdict stands through an outage (see checkCompassAgainstBank)
        }
        aiding.previousEpoch = (sample.timestamp, v)
        aiding.forceIntegral = .zero
        aiding.forceSeconds = 0
        guard settings.courseIsHeading, speed >= settings.minimumCourseSpeedMetresPerSecond else { return }
        let slip = settings.courseSlipDegrees * radiansPerDegree
        aiding.pendingHeading = (atan2(v.x, v.y), variance / (speed * speed) + slip * slip, .course)
    }

    /// Takes one dual-antenna heading (the baseline's yaw offset already removed).
    public mutating func update(gnssHeading sample: GnssHeadingSample) {
        guard started, sample.headingDegrees.isFinite, sample.varianceDegrees2.isFinite, sample.varianceDegrees2 > 0
        else {
            aiding.counts.unusable += 1
            return
        }
        let magnetic = (sample.headingDegrees - aiding.declinationDegrees) * radiansPerDegree
        aiding.pendingHeading = (magnetic, sample.varianceDegrees2 * radiansPerDegree * radiansPerDegree, .dualAntenna)
    }

    /// The heading GNSS measured, applied at a measurement update unless it contradicts a known
    /// heading (then counted as rejected).
    mutating func applyGnssHeading(
        _ h: (radians: Double, variance: Double, kind: GnssHeadingKind), at time: Double,
        _ correction: inout KalmanCorrection
    ) {
        // dtheta_z = estimated heading - true heading (a rotation about +z turns the compass heading back).
        let estimated = orientation.headingDegrees.map { $0 * radiansPerDegree } ?? h.radians
        let residual = wrappedRadians(signedRadians(estimated - h.radians) - correction.attitude.z)
        // Consistency: 3 sigma of both, plus 5 degrees for what the linear model leaves out. An unknown
        // heading takes any value.
        let limit = 9 * (covarianceBlocks.attitude.m22 + h.variance) + 0.0076
        // The bank's heading comes only after it has disagreed with the heading for a while: the
        // heading's own variance is then the compass's overconfidence, not a reason to refuse it.
        var rejected = aiding.headingKnown && h.kind != .hypotheses && residual * residual > limit
        if h.kind == .dualAntenna {
            if rejected && outvoted(by: residual, variance: h.variance) {
                // The receiver's headings agree with each other against the filter: take the heading again.
                rejected = false
                aiding.counts.headingRealignments += 1
                covarianceBlocks.resetHeading(variance: Double.pi * Double.pi)
            } else if !rejected {
                aiding.rejectedHeadingResiduals = []
            }
        }
        switch (h.kind, rejected) {
        case (.course, false): aiding.counts.coursesUsed += 1
        case (.course, true): aiding.counts.coursesRejected += 1
        case (.dualAntenna, false): aiding.counts.headingsUsed += 1
        case (.dualAntenna, true): aiding.counts.headingsRejected += 1
        case (.hypotheses, false): aiding.counts.bankHeadingsUsed += 1
        case (.hypotheses, true): aiding.counts.bankHeadingsRejected += 1
        }
        if rejected { return }
        covarianceBlocks.measure(.heading, residual: residual, variance: h.variance, &correction)
        aiding.headingKnown = true
        aiding.headingAidedAt = time
    }

    /// Records a rejected dual-antenna heading's residual (rad); true when the latest
    /// `consensusHeadings` rejected in a row agree with each other to within 3 sigma of their variance
    /// plus 5 degrees (the rejection's own limit): then it is the filter's heading that is off.
    mutating func outvoted(by residual: Double, variance: Double) -> Bool {
        aiding.rejectedHeadingResiduals.append(residual)
        let n = GnssAidingCounts.consensusHeadings
        guard aiding.rejectedHeadingResiduals.count >= n else { return false }
        let latest = aiding.rejectedHeadingResiduals.suffix(n)
        aiding.rejectedHeadingResiduals = Array(latest)
        let spread = latest.map { abs(wrappedRadians($0 - residual)) }.max() ?? .infinity
        guard spread * spread <= 9 * 2 * variance + 0.0076 else { return false }
        aiding.rejectedHeadingResiduals = []
        return true
    }

    /// Without a known heading, the first clear horizontal acceleration gives it: the angle that turns
    /// the accelerometer's low-passed horizontal force onto the receiver's acceleration. Returns the
    /// correction about z, or nil while the acceleration is too small to tell.
    mutating func alignHeading(force: Vector3, acceleration: Vector3) -> Double? {
        let fx = force.x, fy = force.y, ax = acceleration.x, ay = acceleration.y
        let accelerationSquared = ax * ax + ay * ay
        guard accelerationSquared >= Self.alignmentAcceleration * Self.alignmentAcceleration,
            aiding.chainSeconds >= 2 * settings.accelerometerLowPassSeconds
        else { return nil }
        // Both must see the same acceleration: a heading error turns it, it cannot change its size. At
        // rest the receiver's noise alone can reach the threshold while the accelerometer sees nothing.
        let magnitude = accelerationSquared.squareRoot(), forceMagnitude = (fx * fx + fy * fy).squareRoot()
        guard abs(forceMagnitude - magnitude) <= 0.25 * magnitude + Self.alignmentForceError else { return nil }
        // The counter-clockwise angle from the force's horizontal part to the acceleration: the earth-frame
        // rotation dtheta_z that makes them agree.
        let angle = atan2(fx * ay - fy * ax, fx * ax + fy * ay)
        aiding.counts.alignments += 1
        aiding.headingKnown = true
        // The heading uncertainty left: the acceleration's error (the receiver's, the accelerometer's and
        // tilt's share, about 0.3 m/s^2) over the acceleration.
        let sigma = atan(Self.alignmentForceError / magnitude)
        covarianceBlocks.resetHeading(variance: sigma * sigma)
        return angle
    }

    /// Without a known heading, the bank of yaw hypotheses' heading once it is within
    /// `gnssYawAlignmentDegrees`: the correction about z that turns the filter onto it, with the
    /// bank's variance as the heading's. Nil while the bank is still ambiguous.
    mutating func alignHeadingFromBank() -> Double? {
        let limit = settings.gnssYawAlignmentDegrees * radiansPerDegree
        guard limit > 0, let bank = yawEstimator.offset, bank.variance <= limit * limit else { return nil }
        aiding.counts.alignments += 1
        aiding.counts.bankAlignments += 1
        aiding.headingKnown = true
        covarianceBlocks.resetHeading(variance: bank.variance)
        // The bank's offset is true minus the filter's heading, clockwise; dtheta_z turns the heading back.
        return -bank.radians
    }

    /// With a known heading, after each receiver epoch: whether the bank of yaw hypotheses may judge
    /// the compass (within `gnssYawCheckDegrees` while the vehicle moves; see `compareWithBank`), and,
    /// while it says the compass is off, its heading for the next measurement update, at most once a
    /// second (a few degrees of variance: it pulls the heading without a jump).
    mutating func checkCompassAgainstBank(interval: Double, at time: Double) {
        let limit = settings.gnssYawCheckDegrees * radiansPerDegree
        guard limit > 0, aiding.headingKnown, settings.useMagnetometer, aiding.moving(at: time, settings: settings),
            let bank = yawEstimator.offset, bank.variance <= limit * limit
        else {
            // Standing, or an outage: a compass found off stays out (the gyro holds the heading) until
            // the bank can judge it again, unless that takes longer than the gyro can hold a heading.
            aiding.bankUsable = false
            if time - aiding.bankUsableAt > Self.bankVerdictSeconds { aiding.forgetBankComparison() }
            return
        }
        aiding.bankUsable = true
        aiding.bankUsableAt = time
        guard aiding.bankDisagrees, time - aiding.bankHeadingAt >= Self.bankHeadingInterval,
            let heading = orientation.headingDegrees
        else { return }
        if aiding.bankHeadingAt == -.infinity, started {
            // The heading followed a compass now known to be off: it becomes the bank's, with the bank's
            // variance, as an alignment does (a correction of that size by an update would also be taken
            // partly for gyro bias).
            aiding.bankHeadingAt = time
            applyPendingPropagation()
            covarianceBlocks.resetHeading(variance: bank.variance)
            turnHeading(by: -bank.radians)
            aiding.counts.bankHeadingsUsed += 1
            aiding.headingAidedAt = time
            return
        }
        aiding.bankHeadingAt = time
        // The bank's error changes slowly (its tilt and its own variance come from the same manoeuvres
        // for many epochs): one application per interval, each weighted as if its information were new
        // once per `compassDisagreementSeconds`, so the heading's variance settles near the bank's own
        // instead of shrinking with every application.
        let correlated = max(settings.compassDisagreementSeconds / Self.bankHeadingInterval, 1)
        aiding.pendingHeading = (heading * radiansPerDegree + bank.radians, bank.variance * correlated, .hypotheses)
    }

    /// One compass reading against the bank of yaw hypotheses: the compass's heading minus the bank's
    /// (the reading's innovation, filter minus compass, plus the bank's offset, true minus filter)
    /// averaged over `compassDisagreementSeconds`. Beyond `compassDisagreementDegrees` the compass is
    /// flagged and left out, and the bank's heading applied, until it is back within half of it. The
    /// compass is measured against the vehicle's motion, not against the filter's heading, which the
    /// compass itself steers. Returns whether the reading is to be left out.
    mutating func compareWithBank(headingInnovation alpha: Double, dt: Double, at time: Double) -> Bool {
        // While the bank cannot judge (standing, an outage: no receiver epochs at all) its last verdict
        // stands, for as long as the gyro can hold the heading.
        let current = aiding.bankUsable && time - aiding.bankUsableAt <= settings.maximumVelocityGapSeconds
        guard current, let bank = yawEstimator.offset else {
            if aiding.bankDisagrees, time - aiding.bankUsableAt > Self.bankVerdictSeconds {
                aiding.forgetBankComparison()
            }
            return aiding.bankDisagrees
        }
        let limit = settings.compassDisagreementDegrees * radiansPerDegree
        let beyond = aiding.compassAgainstBank.add(
            wrappedRadians(alpha + bank.radians), dt: dt, tau: settings.compassDisagreementSeconds, limit: limit,
            releaseBelow: limit / 2)
        // Taken back: the next disagreement starts with the bank's heading as an alignment again.
        if !beyond { aiding.bankHeadingAt = -.infinity }
        return beyond
    }

    /// How long a compass the bank found off stays out while the bank cannot judge it, seconds: about
    /// as long as the gyro holds a heading to a few degrees (its bias learned to 0.05 deg/s).
    static let bankVerdictSeconds = 60.0
    /// Seconds between applications of the bank's heading while it says the compass is off.
    static let bankHeadingInterval = 1.0

    /// Horizontal acceleration from which the heading is found without a magnetometer, m/s^2 (low-passed
    /// over `accelerometerLowPassSeconds`): a car pulling away or turning gives 1-4.
    static let alignmentAcceleration = 1.0
    /// The error of the horizontal force the alignment compares, m/s^2.
    static let alignmentForceError = 0.3
}
