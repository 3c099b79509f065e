#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The Kalman filter's primary magnetometer: its calibration state, its magnetic reference, and each
/// reading's way through the disturbance gate, the GNSS and bank comparisons and the other
/// magnetometers' verdict into the heading innovation averaged until the next measurement update.
extension KalmanFilter {
    /// Sets the magnetic reference the gate compares strength and dip with.
    public mutating func setMagneticReference(strengthMicrotesla: Double, dipDegrees: Double) {
        frontEnd.setReference(strengthMicrotesla: strengthMicrotesla, dipDegrees: dipDegrees)
        for i in others.indices {
            others[i].gate.setReference(strengthMicrotesla: strengthMicrotesla, dipDegrees: dipDegrees)
        }
        refreshUnseenVariance()
    }

    /// The calibration applied to the readings changed. Uncalibrated readings whose strength is an earth
    /// strength still steer the heading (nothing better is known) but the accuracy says how far they can
    /// be off; others never steer it (`MagnetometerFrontEnd.cannotBeEarthField`). A new calibration renews the
    /// magnetic reference (its radius; the dip is learned again unless the model gave it) and widens
    /// the heading uncertainty by as far as the change can have turned the compass, so the next
    /// readings correct a heading taken from the old calibration.
    public mutating func noteCalibration(_ notice: MagnetometerCalibrationNotice) {
        guard let renewed = frontEnd.noteCalibration(notice) else { return }
        agreement?.noteCalibration(0, radiusMicrotesla: notice.fieldStrengthMicrotesla)
        // A refinement is within what the heading measurements average out anyway: no reason to trust
        // them more; a renewal widens the heading by as far as the change can have turned it.
        if renewed, started { widenHeading(byRadians: notice.headingShiftRadians) }
        refreshUnseenVariance()
    }

    /// The primary reading as the filter uses it: checked, calibrated when the settings carry a
    /// calibration, nil when the magnetometer is not used.
    @inline(__always)
    mutating func usableField(_ magnetometer: MagnetometerSample?) -> Vector3? {
        let field = validator.field(of: magnetometer)
        guard settings.useMagnetometer, let f = field else { return nil }
        if let cal = settings.magnetometerCalibration { return cal.apply(f) }
        return f
    }

    /// Gates the primary reading (if one came with this sample) and the others' waiting readings.
    /// Returns the flags of the primary's verdict, cleared while another magnetometer steers.
    @inline(__always)
    mutating func updateMagnetometers<Recorder: KalmanStepRecorder>(
        primary field: Vector3?, motion: Motion, dt: Double, at time: Double, recorder: inout Recorder
    ) -> FusionFlags {
        var flags: FusionFlags = []
        if let m = field {
            let magneticDt = validator.magneticStep(at: time, fallback: dt)
            flags = gateMagnetometer(
                field: m, rotation: motion.rotation, dt: magneticDt, rate: motion.rate, turned: motion.turned,
                at: time, recorder: &recorder)
        }
        if !others.isEmpty {
            // The output's flags describe the heading: another magnetometer steering it means it is not
            // held on the gyro, whatever the primary's verdict (kept for the primary's own status).
            primaryMagneticFlags = flags.intersection(MagnetometerVerdictReason.verdictFlags)
            if gateOthers(rotation: motion.rotation, headingVariance: headingVariance, at: time) {
                flags.subtract(MagnetometerVerdictReason.verdictFlags)
            }
        }
        return flags
    }

    /// Gates one magnetometer reading; an accepted one joins the innovation average. Returns the flags
    /// it raised.
    @inline(__always)
    mutating func gateMagnetometer<Recorder: KalmanStepRecorder>(
        field m: Vector3, rotation r: Matrix3, dt: Double, rate: Double, turned: Double, at time: Double,
        recorder: inout Recorder
    ) -> FusionFlags {
        if frontEnd.uncalibrated { frontEnd.uncalibratedEvidence.add(m, rotation: r, at: time) }
        let strength = m.norm
        guard let reading = EarthFieldReading(earth: r * m, strengthMicrotesla: strength) else {
            return [.magnetometerRejected]
        }
        let earth = reading.earth, dip = reading.dipDegrees, alpha = reading.headingInnovation
        let verdict = frontEnd.gate.assess(
            strengthMicrotesla: strength, dipDegrees: dip, headingInnovation: alpha,
            headingVariance: headingVariance, verticalBiasSigma: covarianceBlocks.biasSigma(along: r.row2),
            tiltSigma: covarianceBlocks.tiltSigma, dt: dt)
        if verdict.flags.contains(.magneticReferenceChanged) { frontEnd.unseen.forgetTurns() }
        if let offset = frontEnd.gate.adoptedHeadingOffset {
            // The heading started from a compass that was off by about this much: as wide as that.
            frontEnd.gate.adoptedHeadingOffset = nil
            widenHeading(byRadians: offset)
        }
        let offBank = compareWithBank(headingInnovation: alpha, dt: dt, at: time)
        if compareWithGnss(headingInnovation: alpha, dt: dt, at: time) || offBank {
            return verdict.flags.union([.magnetometerRejected, .compassDisagreesWithGnss])
        }
        if agreement != nil,
            !agreement!.assess(
                0, innovation: alpha, gyroDeviation: frontEnd.gate.gyroDeviation, gateAccepts: verdict.use,
                calibrated: true, dt: dt, at: time, strengthMicrotesla: strength, dipDegrees: dip,
                referenceStrengthMicrotesla: frontEnd.gate.referenceFieldMicrotesla,
                referenceDipDegrees: frontEnd.gate.referenceDipDegrees),
            verdict.use
        {
            return verdict.flags.union(.magnetometerRejected)
        }
        guard !frontEnd.cannotBeEarthField(strengthMicrotesla: strength) else {
            return verdict.flags.union(.magnetometerRejected)
        }
        guard recorder.useMagnetometer(gateAccepts: verdict.use) else {
            return verdict.use ? verdict.flags.union(.magnetometerRejected) : verdict.flags
        }
        // Time-weighted, so irregular magnetometer rates average correctly.
        let weight = max(dt, 1e-6)
        headingSum += alpha * weight
        headingSeconds += weight
        secondsSinceMagneticUpdate = 0
        frontEnd.gate.noteApplied()
        frontEnd.unseen.noteTrusted(
            rotation: r, earthField: earth, headingInnovation: alpha, radians: turned, rate: rate, seconds: weight)
        return verdict.flags
    }

    /// While GNSS holds the heading, the magnetometer's heading innovation is averaged; beyond
    /// `compassDisagreementDegrees` the compass is flagged and its readings are not used. Returns true
    /// when this reading is to be left out.
    @inline(__always)
    mutating func compareWithGnss(headingInnovation alpha: Double, dt: Double, at time: Double) -> Bool {
        guard aiding.headingAided(at: time) else {
            aiding.compassAgainstGnss = AveragedDisagreement()
            return false
        }
        let limit = settings.compassDisagreementDegrees * radiansPerDegree
        // No hysteresis: cleared as soon as it is within the limit again.
        return aiding.compassAgainstGnss.add(
            alpha, dt: dt, tau: settings.compassDisagreementSeconds, limit: limit, releaseBelow: limit.nextUp)
    }

    @inline(__always)
    mutating func refreshUnseenVariance() {
        frontEnd.refreshUnseenVariance(fraction: settings.useMagnetometer ? settings.unseenDisturbanceFraction : 0)
    }
}
