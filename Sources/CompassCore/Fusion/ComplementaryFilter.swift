#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The classic gyro-compass: the gyro carries the orientation; the accelerometer (low-passed in the
/// earth frame) pulls the inclination back, and the tilt-compensated compass pulls the heading back
/// gently, at a bounded rate, whenever `MagneticDisturbanceGate` trusts it. At rest the gyro bias is
/// learned. Cheaper and simpler to reason about than `KalmanFilter`; its accuracy figure is a model
/// (compass sigma plus drift since the last trusted compass reading), not a covariance.
public struct ComplementaryFilter: Sendable {
    public var settings: ComplementaryFilterSettings
    public private(set) var orientation = Quaternion.identity
    public private(set) var gyroBias = Vector3.zero
    /// The magnetometer's gate, calibration state and unseen-disturbance term.
    public internal(set) var frontEnd: MagnetometerFrontEnd
    /// The magnetometer gate (its reference strength and dip are public there).
    public var magneticGate: MagneticDisturbanceGate { frontEnd.gate }

    var validator: SampleValidator
    var rest: RestDetector
    var started = false
    var headingFixed = false
    var elapsed = 0.0
    var lowPassedForceEarth = Vector3.zero
    var secondsSinceCompass = 0.0
    /// The gyro's heading change since the compass was last trusted, signed, rad: a scale error
    /// turns the heading by its fraction of this, so turning back and forth costs nothing.
    var headingTurnedSinceCompass = 0.0
    var latestRate = Vector3.zero
    var forceWeight = LowPassWeight()

    /// Sets the magnetic reference the gate compares strength and dip with.
    public mutating func setMagneticReference(strengthMicrotesla: Double, dipDegrees: Double) {
        frontEnd.setReference(strengthMicrotesla: strengthMicrotesla, dipDegrees: dipDegrees)
        refreshUnseenVariance()
    }

    /// True while the calibration owner says no calibration is applied to the readings.
    public var magnetometerUncalibrated: Bool { frontEnd.uncalibrated }

    /// The calibration applied to the readings changed (see `KalmanFilter.noteCalibration(_:)`). A
    /// change that can have turned the compass by more than the filter's own uncertainty makes the
    /// next usable reading set the heading whole.
    public mutating func noteCalibration(_ notice: MagnetometerCalibrationNotice) {
        guard frontEnd.noteCalibration(notice) != nil else { return }
        if notice.headingShiftRadians * degreesPerRadian > 3 * ownHeadingSigmaDegrees { headingFixed = false }
        refreshUnseenVariance()
    }

    /// Samples skipped so far, by reason.
    public var skipped: SkippedSampleCounts { validator.skipped }

    public init(settings: ComplementaryFilterSettings = .init()) {
        self.settings = settings
        validator = SampleValidator(maximumStepSeconds: settings.maximumStepSeconds)
        rest = settings.restDetector
        frontEnd = MagnetometerFrontEnd(gate: settings.magneticGate)
        refreshUnseenVariance()
    }

    /// The current heading, degrees clockwise from magnetic north after the reference offset.
    public var headingDegrees: Double? {
        orientation.headingDegrees.map { normalizedDegrees($0 - settings.referenceOffsetDegrees) }
    }

    /// The orientation reported: the state, predicted ahead by the sensor latency.
    var reportedOrientation: Quaternion {
        orientation.predicted(rate: latestRate, seconds: settings.sensorLatencySeconds)
    }

    /// 1-sigma heading uncertainty of the model, degrees: the compass's own, the unseen disturbance
    /// and the drift since the compass was last trusted.
    public var headingSigmaDegrees: Double {
        let own = ownHeadingSigmaDegrees
        return (own * own + frontEnd.unseen.degrees2).squareRoot()
    }

    /// The filter's own part of it, degrees: the compass's noise and the drift.
    var ownHeadingSigmaDegrees: Double {
        let drift = driftSigmaDegrees, compass = settings.compassHeadingSigmaDegrees
        return (compass * compass + drift * drift).squareRoot()
    }

    /// The filter's own part of the reported heading variance, degrees^2: widened while no
    /// calibration is applied by as far as the uncalibrated readings can turn the compass.
    var reportedOwnVarianceDegrees2: Double {
        let own = ownHeadingSigmaDegrees
        return frontEnd.ownVarianceDegrees2(own * own, eastRow: orientation.rotationMatrix.row0)
    }

    /// Where the reported heading accuracy comes from now.
    public var headingAccuracyParts: HeadingAccuracyParts {
        frontEnd.accuracyParts(ownVarianceDegrees2: reportedOwnVarianceDegrees2)
    }

    @inline(__always)
    mutating func refreshUnseenVariance() {
        frontEnd.refreshUnseenVariance(fraction: settings.unseenDisturbanceFraction)
    }

    /// The part of the uncertainty that grows while the compass is not used (bias and scale errors),
    /// degrees. This, not the static compass uncertainty, widens the gyro-consistency gate.
    var driftSigmaDegrees: Double {
        let drift = settings.residualBiasDegreesPerSecond * secondsSinceCompass
        let scale = settings.magneticGate.gyroScaleErrorBound * abs(headingTurnedSinceCompass) * degreesPerRadian
        return (drift * drift + scale * scale).squareRoot()
    }

    /// Feeds one IMU sample and optionally a magnetometer sample (microtesla). Returns nil when the
    /// sample was skipped (the reason is counted in `skipped`).
    public mutating func update(imu: ImuSample, magnetometer: MagnetometerSample? = nil) -> FusionOutput? {
        guard let dt = validator.step(for: imu) else { return nil }
        var field = validator.field(of: magnetometer)
        if let f = field, let cal = settings.magnetometerCalibration { field = cal.apply(f) }
        if !started {
            start(specificForce: imu.specificForce, field: field)
            return output(imu.timestamp, flags: [.initialising])
        }
        elapsed += dt
        var flags: FusionFlags = []
        if rest.update(rate: imu.angularVelocity, specificForce: imu.specificForce, dt: dt) {
            flags.insert(.atRest)
            gyroBias += (rest.lowPassedRate - gyroBias) * (dt / (settings.biasLearningSeconds + dt))
        }

        let rate = imu.angularVelocity - gyroBias
        latestRate = rate
        orientation = (orientation * Quaternion(rotationVector: rate * dt)).normalized
        let rotation = orientation.rotationMatrix, rateNorm = rate.norm, turned = rateNorm * dt
        frontEnd.gate.noteRotation(radians: turned)
        headingTurnedSinceCompass += rotation.row2.dot(rate) * dt
        secondsSinceCompass += dt

        // Inclination: rotate part of the way toward the low-passed gravity direction.
        let force = orientation.rotate(imu.specificForce)
        lowPassedForceEarth +=
            (force - lowPassedForceEarth) * forceWeight(dt, tau: settings.accelerometerLowPassSeconds)
        let forceNorm = lowPassedForceEarth.norm
        var correction = Vector3.zero
        if abs(forceNorm - standardGravity) > settings.accelerationRejectionTolerance * standardGravity {
            flags.insert(.accelerationRejected)
        } else {
            let u = lowPassedForceEarth / forceNorm
            let k = tiltAngleOverSine(u) * min(1, dt / settings.inclinationTimeConstantSeconds)
            correction = Vector3(u.y * k, -u.x * k, 0)
        }

        if let m = field {
            let magneticDt = validator.magneticStep(at: imu.timestamp, fallback: dt)
            let heading = correctHeading(
                field: m, dt: magneticDt, rotation: rotation, rate: rateNorm, turned: turned, at: imu.timestamp)
            flags.formUnion(heading.flags)
            if let z = heading.radians { correction.z = z }
        }
        if secondsSinceCompass > 2 { flags.insert(.gyroOnly) }
        if correction.squaredNorm > 0 {
            frontEnd.gate.noteHeadingCorrection(radians: correction.z)
            orientation = (Quaternion(rotationVector: correction) * orientation).normalized
            lowPassedForceEarth += correction.cross(lowPassedForceEarth)
        }
        guard orientation.isFinite, gyroBias.isFinite else { return restarted(at: imu) }
        if elapsed < 1 || frontEnd.gate.isLearningFirstReference || !headingFixed { flags.insert(.initialising) }
        refreshUnseenVariance()
        return output(imu.timestamp, flags: flags)
    }

    /// Heading: a bounded pull toward the compass while the gate trusts it, the whole of it for the
    /// first usable reading. `field` in microtesla (calibrated), `dt` the seconds since the previous
    /// reading, `rate` and `turned` the rate (rad/s) and angle (rad) of this step. Returns the heading
    /// correction about the earth's vertical (rad; nil: none) and the gate's flags.
    @inline(__always)
    mutating func correctHeading(
        field m: Vector3, dt: Double, rotation: Matrix3, rate: Double, turned: Double, at time: Double
    ) -> (radians: Double?, flags: FusionFlags) {
        if frontEnd.uncalibrated {
            frontEnd.uncalibratedEvidence.add(m, rotation: orientation.rotationMatrix, at: time)
        }
        guard let reading = EarthFieldReading(earth: orientation.rotate(m), strengthMicrotesla: m.norm) else {
            return (nil, [])
        }
        let alpha = reading.headingInnovation
        guard headingFixed else {
            headingFixed = true
            return (alpha, [])  // first usable compass reading: take it whole
        }
        let verdict = frontEnd.gate.assess(
            strengthMicrotesla: m.norm, dipDegrees: reading.dipDegrees, headingInnovation: alpha,
            headingVariance: driftSigmaDegrees * driftSigmaDegrees * radiansPerDegree * radiansPerDegree, dt: dt)
        if verdict.flags.contains(.magneticReferenceChanged) { frontEnd.unseen.forgetTurns() }
        guard verdict.use else { return (nil, verdict.flags) }
        guard !frontEnd.cannotBeEarthField(strengthMicrotesla: m.norm) else {
            return (nil, verdict.flags.union(.magnetometerRejected))
        }
        let learning = frontEnd.gate.isLearning || elapsed < 1
        let tau = learning ? 0.5 : settings.headingTimeConstantSeconds
        var step = alpha * min(1, dt / tau)
        if !learning {
            let limit = settings.maximumHeadingCorrectionDegreesPerSecond * radiansPerDegree * dt
            step = max(-limit, min(limit, step))
        }
        frontEnd.gate.noteApplied()
        frontEnd.unseen.noteTrusted(
            rotation: rotation, earthField: reading.earth, headingInnovation: alpha, radians: turned, rate: rate,
            seconds: dt)
        frontEnd.unseen.noteHeadingCorrection(gain: alpha == 0 ? min(1, dt / tau) : step / alpha)
        secondsSinceCompass = 0
        headingTurnedSinceCompass = 0
        return (step, verdict.flags)
    }

    /// The state became non-finite: start again from this sample, keeping the sample checks and their
    /// counts, and say so.
    mutating func restarted(at imu: ImuSample) -> FusionOutput? {
        var checks = validator
        checks.countReset()
        let kept = frontEnd
        self = ComplementaryFilter(settings: settings)
        validator = checks
        frontEnd.keepCalibrationState(of: kept)
        return output(imu.timestamp, flags: [.initialising, .filterReset])
    }

    mutating func start(specificForce: Vector3, field: Vector3?) {
        if let initial = TiltCompensatedCompass.initialOrientation(specificForce: specificForce, field: field) {
            orientation = initial.orientation
            headingFixed = initial.headingKnown
        }
        lowPassedForceEarth = orientation.rotate(specificForce)
        started = true
    }

    /// Always inlined: as a call it copied the whole filter per sample.
    @inline(__always)
    func output(_ timestamp: Double, flags: FusionFlags) -> FusionOutput {
        var flags = flags
        if frontEnd.uncalibrated { flags.insert(.magnetometerUncalibrated) }
        let variance = reportedOwnVarianceDegrees2 + frontEnd.unseen.degrees2
        return FusionOutput(
            timestamp: timestamp, orientation: reportedOrientation,
            referenceOffsetDegrees: settings.referenceOffsetDegrees,
            headingVarianceDegrees2: flags.contains(.initialising) ? nil : variance,
            gyroBias: gyroBias, flags: flags)
    }
}
