/// Decides, reading by reading, whether the magnetometer may correct the heading.
///
/// Three checks, each a physical argument: the field strength and the dip must match the reference
/// (a magnet or steel adds a field that changes them), and the compass heading must agree with the
/// heading the gyro has carried (a disturbance that keeps strength and dip still turns the compass
/// while the gyro says the device did not turn). For the last check the gate follows "compass minus
/// gyro-only heading" (the filter's innovation plus every correction the filter applied, so the
/// filter's own convergence is invisible to it): slow gyro drift moves it slowly, a disturbance
/// quickly. A rejected magnetometer is used again once every check has passed for
/// `recoverySeconds`; a steady new field is adopted after `newFieldSeconds`, and, within
/// `startupSeconds` of the check's start, a steady new heading offset after `startupAdoptionSeconds`
/// (the start's heading, not the field, was wrong). A long rejection does not lock a drifting gyro in: the
/// heading check's allowance for the bias uncertainty grows with the time the baseline has been frozen.
public struct MagneticDisturbanceGate: Sendable {
    public var settings: MagneticGateSettings
    public private(set) var referenceFieldMicrotesla: Double?
    public private(set) var referenceDipDegrees: Double?
    /// True while the magnetometer is being rejected.
    public private(set) var isRejecting = false

    var learningSeconds = 0.0
    /// True when the dip came from the settings or `setReference` (the model), not from the readings.
    var dipGiven = false
    /// True when the strength came from the settings (a user's expected field): calibrations keep it.
    var strengthGiven = false
    var learnedStrengthSum = 0.0, learnedDipSum = 0.0, learnedCount = 0
    var strengthLowPass = 0.0, dipLowPass = 0.0
    /// The strength and dip averaged over `learnedFieldAverageSeconds` (the fast low-pass otherwise), and
    /// whether the reference strength was learned from the readings.
    var strengthSlow = 0.0, dipSlow = 0.0
    var strengthLearned = false
    var slowWeight = LowPassWeight()
    /// Sum of the heading corrections the filter applied, rad: innovation + this = compass minus
    /// gyro-only heading.
    var appliedCorrection = 0.0
    var compassMinusGyroShort = 0.0, compassMinusGyroBaseline = 0.0
    var compassMinusGyroPrimed = false
    var passingSeconds = 0.0
    var radiansTurnedSinceAccepted = 0.0
    var candidateStrength = 0.0, candidateDip = 0.0, candidateSeconds = 0.0
    /// The steady compass-minus-gyro offset followed early on (rad) and for how long (s); seconds of
    /// readings the heading check has seen since it started (or started afresh after a calibration).
    var headingCandidate = 0.0, headingCandidateSeconds = 0.0
    var checkedSeconds = 0.0
    /// Seconds the baseline has been frozen by the current rejection.
    var rejectedSeconds = 0.0
    /// The offset the latest such adoption moved the baseline by, radians: how far the heading the filter
    /// holds can be off (the filter widens its heading variance by it).
    public internal(set) var adoptedHeadingOffset: Double?
    var checkWeight = LowPassWeight(), shortWeight = LowPassWeight(), baselineWeight = LowPassWeight()
    var scatterWeight = LowPassWeight()
    /// The accepted readings' strength (low-passed as the check's) averaged over
    /// `strengthScatterSeconds`, microtesla, and the mean square of its relative departures from that
    /// average.
    var strengthMean: Double?
    var strengthScatterSquared = 0.0
    /// The accepted readings' heading innovation, low-passed as the strength is for the check, rad, and
    /// its mean square over `strengthScatterSeconds`, rad^2.
    var innovationLowPass = 0.0
    var innovationSquared = 0.0
    /// RMS of the accepted readings' heading innovation over the last half minute, radians: how far the
    /// compass the filter follows strays from its heading from place to place (a building's field seen
    /// while walking through it), which the filter's own variance, built for white noise, leaves out.
    public var innovationScatter: Double { innovationSquared.squareRoot() }
    /// RMS relative departure of the accepted readings' strength from its half-minute average: a field
    /// that varies from place to place by this fraction of its strength turns the heading by about as
    /// much (a disturbance changes the field's direction as much as its strength), though no check sees
    /// it (the reference follows a learned field's average).
    public var strengthScatter: Double { strengthScatterSquared.squareRoot() }

    public init(settings: MagneticGateSettings = .init()) {
        self.settings = settings
        referenceFieldMicrotesla = settings.referenceFieldMicrotesla
        referenceDipDegrees = settings.referenceDipDegrees
        if let s = referenceFieldMicrotesla {
            strengthLowPass = s
            strengthSlow = s
        }
        if let d = referenceDipDegrees {
            dipLowPass = d
            dipSlow = d
        }
        dipGiven = referenceDipDegrees != nil
        strengthGiven = referenceFieldMicrotesla != nil
        hadReference = !isLearning
    }

    /// True until both reference values are known.
    public var isLearning: Bool { referenceFieldMicrotesla == nil || referenceDipDegrees == nil }

    /// True once both reference values were known (given or learned): a renewal then re-learns the dip
    /// while the filter's attitude stands, which is no new initialisation.
    public private(set) var hadReference = false

    /// True while the first reference is learned.
    public var isLearningFirstReference: Bool { isLearning && !hadReference }

    /// Accounts for rotation (rad) measured by the gyro since the previous call.
    public mutating func noteRotation(radians: Double) { radiansTurnedSinceAccepted += radians }

    /// Assesses one reading.
    /// - Parameters:
    ///   - strengthMicrotesla: field strength.
    ///   - dipDegrees: dip in the filter's earth frame (positive below the horizon).
    ///   - headingInnovation: compass heading minus the filter's heading, rad, wrapped to (-pi, pi].
    ///   - headingVariance: the filter's own heading variance, rad^2.
    ///   - verticalBiasSigma: 1-sigma uncertainty of the gyro bias about the earth's vertical, rad/s: a
    ///     bias error drifts the gyro-only heading at that rate, which the short average follows
    ///     `consistencyBaselineSeconds - consistencyLowPassSeconds` ahead of the baseline, and for as long
    ///     as a rejection has frozen the baseline.
    ///   - tiltSigma: 1-sigma uncertainty of the filter's tilt, rad: the dip is measured in its earth
    ///     frame, so the dip tolerance widens by 3 sigma (root sum of squares: independent errors).
    ///   - dt: seconds since the previous reading.
    /// - Returns: whether to use the reading, and the flags explaining a rejection or a new reference.
    public mutating func assess(
        strengthMicrotesla strength: Double, dipDegrees dip: Double, headingInnovation: Double,
        headingVariance: Double, verticalBiasSigma: Double = 0, tiltSigma: Double = 0, dt: Double
    ) -> (use: Bool, flags: FusionFlags) {
        guard let refStrength = referenceFieldMicrotesla, let refDip = referenceDipDegrees else {
            learnReference(strengthMicrotesla: strength, dipDegrees: dip, dt: dt)
            return (true, [])
        }
        followField(strengthMicrotesla: strength, dipDegrees: dip, referenceStrength: refStrength, dt: dt)
        followCompassAgainstGyro(headingInnovation: headingInnovation, dt: dt)
        var reasons = self.reasons(
            referenceStrength: refStrength, referenceDip: refDip, headingVariance: headingVariance,
            verticalBiasSigma: verticalBiasSigma, tiltSigma: tiltSigma)
        var flags: FusionFlags = []
        if reasons == .magneticGyroInconsistent, checkedSeconds < settings.startupSeconds {
            if adoptHeadingOffset(dt: dt) {
                reasons = []
                flags.insert(.magneticReferenceChanged)
            }
        } else {
            headingCandidateSeconds = 0
        }
        if reasons.contains(.magneticStrengthDisturbed) || reasons.contains(.magneticDipDisturbed) {
            if trackCandidate(dt: dt) {
                referenceFieldMicrotesla = candidateStrength
                referenceDipDegrees = candidateDip
                candidateSeconds = 0
                flags.insert(.magneticReferenceChanged)
            }
        } else {
            candidateSeconds = 0
        }

        passingSeconds = reasons.isEmpty ? passingSeconds + dt : 0
        if !reasons.isEmpty { isRejecting = true }
        if isRejecting && passingSeconds >= settings.recoverySeconds {
            // Accepted again: what the compass says now is the new baseline.
            isRejecting = false
            compassMinusGyroBaseline = compassMinusGyroShort
        }
        rejectedSeconds = isRejecting ? rejectedSeconds + dt : 0
        if isRejecting { return (false, flags.union(reasons).union(.magnetometerRejected)) }
        let w = scatterWeight(dt, tau: settings.strengthScatterSeconds)
        let mean = strengthMean ?? strengthLowPass
        let departure = strengthLowPass / mean - 1
        strengthScatterSquared += (departure * departure - strengthScatterSquared) * w
        strengthMean = mean + (strengthLowPass - mean) * w
        innovationLowPass +=
            (headingInnovation - innovationLowPass) * checkWeight(dt, tau: settings.checkLowPassSeconds)
        innovationSquared += (innovationLowPass * innovationLowPass - innovationSquared) * w
        return (true, flags)
    }

    /// No reference yet: learns whichever value is missing; a known one (the model's, a calibration's)
    /// is kept.
    mutating func learnReference(strengthMicrotesla strength: Double, dipDegrees dip: Double, dt: Double) {
        learnedStrengthSum += strength
        learnedDipSum += dip
        learnedCount += 1
        learningSeconds += dt
        strengthLowPass = strength
        dipLowPass = dip
        strengthSlow = strength
        dipSlow = dip
        if learningSeconds >= settings.learningSeconds {
            if referenceFieldMicrotesla == nil { strengthLearned = true }
            referenceFieldMicrotesla = referenceFieldMicrotesla ?? learnedStrengthSum / Double(learnedCount)
            referenceDipDegrees = referenceDipDegrees ?? learnedDipSum / Double(learnedCount)
            strengthLowPass = referenceFieldMicrotesla!
            dipLowPass = referenceDipDegrees!
            strengthSlow = strengthLowPass
            dipSlow = dipLowPass
            hadReference = true
        }
    }

    /// The strength and dip low-passed for the check and, while the reference was learned from a
    /// plausible earth field, for its slow refinement.
    @inline(__always)
    mutating func followField(
        strengthMicrotesla strength: Double, dipDegrees dip: Double, referenceStrength refStrength: Double, dt: Double
    ) {
        let w = checkWeight(dt, tau: settings.checkLowPassSeconds)
        strengthLowPass += (strength - strengthLowPass) * w
        dipLowPass += (dip - dipLowPass) * w
        // An uncalibrated sensor's field (hundreds of microtesla) is no earth field to refine.
        if settings.learnedFieldAverageSeconds > 0, strengthLearned,
            TypicalEarthField.plausibleStrengthMicrotesla.contains(refStrength)
        {
            let ws = slowWeight(dt, tau: settings.learnedFieldAverageSeconds)
            strengthSlow += (strength - strengthSlow) * ws
            dipSlow += (dip - dipSlow) * ws
        } else {
            strengthSlow = strengthLowPass
            dipSlow = dipLowPass
        }
    }

    /// Compass minus gyro-only heading, unwrapped against the baseline, low-passed short and (while
    /// not rejecting) long.
    @inline(__always)
    mutating func followCompassAgainstGyro(headingInnovation: Double, dt: Double) {
        let raw = headingInnovation + appliedCorrection
        if !compassMinusGyroPrimed {
            compassMinusGyroShort = raw
            compassMinusGyroBaseline = raw
            compassMinusGyroPrimed = true
        }
        checkedSeconds += dt
        let value = compassMinusGyroBaseline + wrappedRadians(raw - compassMinusGyroBaseline)
        compassMinusGyroShort +=
            (value - compassMinusGyroShort) * shortWeight(dt, tau: settings.consistencyLowPassSeconds)
        if !isRejecting {
            compassMinusGyroBaseline +=
                (compassMinusGyroShort - compassMinusGyroBaseline)
                * baselineWeight(dt, tau: settings.consistencyBaselineSeconds)
        }
    }

    /// Why the reading is not to be used now: strength or dip off the reference (the dip tolerance
    /// widened by 3 sigma of the tilt), or the compass turning against the gyro beyond 3 sigma of the
    /// heading and the gyro's scale and bias allowances.
    @inline(__always)
    func reasons(
        referenceStrength refStrength: Double, referenceDip refDip: Double, headingVariance: Double,
        verticalBiasSigma: Double, tiltSigma: Double
    ) -> FusionFlags {
        var reasons: FusionFlags = []
        let deviations = InterferenceCheck.deviations(
            strengthMicrotesla: strengthLowPass, dipDegrees: dipLowPass, expectedStrengthMicrotesla: refStrength,
            expectedDipDegrees: refDip, strengthTolerance: settings.strengthTolerance,
            dipToleranceDegrees: (settings.dipToleranceDegrees * settings.dipToleranceDegrees
                + 9 * tiltSigma * tiltSigma * degreesPerRadian * degreesPerRadian).squareRoot())
        if deviations.contains(.strength) { reasons.insert(.magneticStrengthDisturbed) }
        if deviations.contains(.dip) { reasons.insert(.magneticDipDisturbed) }
        // gate = max(floor, 3 sigma) + scale and bias allowances; the square root only when the floor is
        // not enough. A ramp of slope e (an unknown bias) keeps the two low-passes (tau_b - tau_s) e apart.
        let deviation = abs(compassMinusGyroShort - compassMinusGyroBaseline)
        let lag = max(0, settings.consistencyBaselineSeconds - settings.consistencyLowPassSeconds)
        // While rejecting, the baseline is frozen and a bias error drifts the two apart for that long, too.
        let allowance =
            settings.gyroScaleErrorBound * radiansTurnedSinceAccepted
            + 3 * verticalBiasSigma * (lag + rejectedSeconds)
        if deviation > settings.consistencyGateDegrees * radiansPerDegree + allowance
            && deviation > 3 * headingVariance.squareRoot() + allowance
        {
            reasons.insert(.magneticGyroInconsistent)
        }
        return reasons
    }

    /// Sets the reference strength and dip (from the World Magnetic Model or a user); the dip is then
    /// kept when a calibration renews the reference.
    public mutating func setReference(strengthMicrotesla: Double, dipDegrees: Double) {
        referenceFieldMicrotesla = strengthMicrotesla
        referenceDipDegrees = dipDegrees
        strengthLearned = false
        strengthLowPass = strengthMicrotesla
        dipLowPass = dipDegrees
        strengthSlow = strengthMicrotesla
        dipSlow = dipDegrees
        dipGiven = true
        hadReference = true
    }

    /// The readings now come through a different calibration: what was learned from the old readings
    /// no longer describes them. The strength becomes `strengthMicrotesla` (the calibrated field's
    /// radius; nil learns it again), the dip is learned again from the next readings unless it was
    /// given, and the consistency check starts afresh (the change itself turns the compass heading,
    /// which is no disturbance).
    public mutating func renewReference(strengthMicrotesla: Double?) {
        if !strengthGiven {
            referenceFieldMicrotesla = strengthMicrotesla
            strengthLearned = false
            if let s = strengthMicrotesla {
                strengthLowPass = s
                strengthSlow = s
            }
        }
        if !dipGiven { referenceDipDegrees = nil }
        learningSeconds = 0
        learnedStrengthSum = 0
        learnedDipSum = 0
        learnedCount = 0
        isRejecting = false
        passingSeconds = 0
        candidateSeconds = 0
        compassMinusGyroPrimed = false
        // The heading the new calibration gives is a new start for the heading check, too, and the
        // scatter of the readings through the old one says nothing of the new one.
        checkedSeconds = 0
        strengthMean = nil
        strengthScatterSquared = 0
        innovationLowPass = 0
        innovationSquared = 0
        headingCandidateSeconds = 0
        radiansTurnedSinceAccepted = 0
    }

    /// A calibration refinement: the expected strength becomes the refined radius unless the strength
    /// was given; the dip, the consistency check and the current verdict stand.
    public mutating func refineReference(strengthMicrotesla: Double) {
        guard !strengthGiven else { return }
        referenceFieldMicrotesla = strengthMicrotesla
        strengthLearned = false
    }

    /// Follows a change of the calibration applied to the readings. One that can have turned the compass
    /// by less than the consistency floor only refines the expected strength, so a disturbance being
    /// rejected stays rejected; a larger one renews the reference. Returns true when it renewed.
    public mutating func follow(_ notice: MagnetometerCalibrationNotice) -> Bool {
        if notice.headingShiftRadians < settings.consistencyGateDegrees * radiansPerDegree,
            let strength = notice.fieldStrengthMicrotesla
        {
            // While the dip is learned after a renewal, a small change lets the learning go on.
            if !isLearning || referenceFieldMicrotesla != nil { refineReference(strengthMicrotesla: strength) }
            return false
        }
        renewReference(strengthMicrotesla: notice.fieldStrengthMicrotesla)
        return true
    }

    /// How far the compass has turned against the gyro lately, radians: the short average of compass
    /// minus gyro-only heading against its baseline (0 until primed). A magnet arriving moves it, the
    /// filter's own corrections do not.
    public var gyroDeviation: Double {
        compassMinusGyroPrimed ? abs(compassMinusGyroShort - compassMinusGyroBaseline) : 0
    }

    /// Tells the gate a reading was used (resets the scale-error allowance).
    public mutating func noteApplied() { radiansTurnedSinceAccepted = 0 }

    /// Tells the gate how far the filter turned its heading this step, for whatever reason: the
    /// earth-frame rotation about the vertical, rad (the sense that reduces a positive innovation).
    public mutating func noteHeadingCorrection(radians: Double) { appliedCorrection += radians }

    /// Follows a steady compass-minus-gyro offset while only the heading check fails early on; true
    /// (and the baseline moved to it) once it has lasted `startupAdoptionSeconds`.
    mutating func adoptHeadingOffset(dt: Double) -> Bool {
        let tolerance = settings.consistencyGateDegrees * radiansPerDegree / 2
        if headingCandidateSeconds > 0, abs(compassMinusGyroShort - headingCandidate) <= tolerance {
            headingCandidateSeconds += dt
        } else {
            headingCandidate = compassMinusGyroShort
            headingCandidateSeconds = dt
        }
        guard headingCandidateSeconds >= settings.startupAdoptionSeconds else { return false }
        adoptedHeadingOffset = compassMinusGyroShort - compassMinusGyroBaseline
        compassMinusGyroBaseline = compassMinusGyroShort
        headingCandidateSeconds = 0
        return true
    }

    /// Follows a field that differs from the reference; true once it has been steady long enough.
    mutating func trackCandidate(dt: Double) -> Bool {
        let steady =
            candidateSeconds > 0
            && abs(strengthSlow / candidateStrength - 1) <= settings.strengthTolerance
            && abs(dipSlow - candidateDip) <= settings.dipToleranceDegrees
        if steady {
            let c = dt / (2 + dt)
            candidateStrength += (strengthSlow - candidateStrength) * c
            candidateDip += (dipSlow - candidateDip) * c
            candidateSeconds += dt
        } else {
            candidateStrength = strengthSlow
            candidateDip = dipSlow
            candidateSeconds = dt
        }
        return candidateSeconds >= settings.newFieldSeconds
    }
}
