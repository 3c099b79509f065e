#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The Kalman filter's GNSS updates: velocities (the acceleration chain, alignment, course) and
/// dual-antenna headings, and the compass judged against the bank of yaw hypotheses.
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
