#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Orientation and gyro bias by an error-state (multiplicative) Kalman filter.
///
/// State: orientation q (sensor to ENU, y = magnetic north) and gyro bias b. Error state: a small
/// rotation in the EARTH frame (q_true = exp(dtheta) * q) and the bias error, with a 6x6 covariance
/// kept as three 3x3 blocks. The gyro propagates q; measurements are applied as independent scalar
/// updates, which is exact for independent noises and keeps every operation in plain `Double`s:
///   - inclination: the specific force, low-passed in the earth frame (linear accelerations that come
///     and go cancel out there), observes the horizontal error components dtheta_x, dtheta_y;
///   - heading: the horizontal direction of the field in the earth frame observes dtheta_z only, so
///     the magnetometer never tilts the estimate;
///   - rest: the low-passed gyro reading observes the bias directly.
/// The magnetometer is used only while `MagneticDisturbanceGate` trusts it: strength and dip match the
/// reference and its heading agrees with the gyro-carried heading.
public struct KalmanFilter: Sendable {
    public var settings: KalmanFilterSettings

    public private(set) var orientation = Quaternion.identity
    public private(set) var gyroBias = Vector3.zero
    /// Covariance blocks as of the last measurement update: attitude (rad^2), attitude-bias
    /// (rad^2/s), bias (rad^2/s^2). The propagation since then is pending (see `propagated()`).
    var attitudeCovariance = Matrix3.identity
    var crossCovariance = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
    var biasCovariance = Matrix3.identity
    /// Propagation accumulated since the last measurement update. F = [[I, G], [0, I]] composes by
    /// adding the G's, and the process noise adds, so the whole interval is applied at once (exact
    /// but for G Q_b G^T terms within one interval, below 1e-18 rad^2).
    var pendingG = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
    var pendingAttitudeNoise = 0.0, pendingBiasNoise = 0.0
    /// Heading widenings since the last measurement update, rad^2: applied at once, and recorded with
    /// the interval's propagation so that the smoother's prediction has them too (without them it
    /// would carry a renewed calibration's heading back across the renewal as if nothing had changed).
    var pendingHeadingWidening = 0.0

    /// The current covariance blocks (attitude, attitude-bias, bias), pending propagation included.
    public var covariance: (attitude: Matrix3, cross: Matrix3, bias: Matrix3) {
        var copy = self
        copy.applyPendingPropagation()
        return (copy.attitudeCovariance, copy.crossCovariance, copy.biasCovariance)
    }

    /// The stored covariance blocks, without the pending propagation.
    var covarianceBlocks: KalmanCovariance {
        KalmanCovariance(attitude: attitudeCovariance, cross: crossCovariance, bias: biasCovariance)
    }

    /// The magnetometer gate (its reference strength and dip are public there).
    public private(set) var magneticGate: MagneticDisturbanceGate

    var validator: SampleValidator
    var rest: RestDetector
    var started = false
    var elapsed = 0.0
    var lowPassedForceEarth = Vector3.zero
    var secondsSinceMagneticUpdate = 0.0
    var latestRate = Vector3.zero
    var secondsSinceMeasurementUpdate = 0.0
    var headingSum = 0.0, headingSeconds = 0.0
    var forceWeight = LowPassWeight()
    /// The rotation's share of the specific force (see `LeverArmEstimator`).
    public private(set) var leverArm = LeverArmEstimator()
    /// What GNSS gave (see `GnssAidingState`).
    public internal(set) var aiding = GnssAidingState()
    /// The heading from GNSS velocity and the accelerometer, as a bank of yaw hypotheses.
    public internal(set) var yawEstimator = GnssYawEstimator()
    /// The low-passed gyro reading at each recent measurement update, oldest first: the rest
    /// observation uses one `restConfirmationSeconds` old.
    var restRates: [(time: Double, rate: Vector3)] = []
    /// Inclination updates left out by `inclinationGateDegrees`.
    public internal(set) var inclinationGated = 0
    /// Low-passed vertical and horizontal earth-frame rates (rad/s), the latest time the motion was a
    /// turn about the vertical, and the inclination updates left out for it.
    var verticalRate = 0.0, horizontalRate = 0.0
    var lastVerticalTurn = -Double.infinity
    public internal(set) var verticalTurnSkipped = 0
    static let verticalTurnLowPassSeconds = 0.5
    /// With several magnetometers, the primary's own verdict at the latest sample (the output's flags
    /// leave it out while another magnetometer steers the heading).
    public internal(set) var primaryMagneticFlags: FusionFlags = []
    static let magneticVerdictFlags: FusionFlags = [
        .magnetometerRejected, .magneticStrengthDisturbed, .magneticDipDisturbed, .magneticGyroInconsistent,
    ]
    /// Magnetometers besides the primary (`addMagnetometer`), each with its own gate.
    public internal(set) var others: [OtherMagnetometer] = []
    /// Every magnetometer judged against the others; nil while there is only the primary.
    public internal(set) var agreement: MagnetometerAgreement?

    /// Sets the magnetic reference the gate compares strength and dip with.
    public mutating func setMagneticReference(strengthMicrotesla: Double, dipDegrees: Double) {
        magneticGate.setReference(strengthMicrotesla: strengthMicrotesla, dipDegrees: dipDegrees)
        for i in others.indices {
            others[i].gate.setReference(strengthMicrotesla: strengthMicrotesla, dipDegrees: dipDegrees)
        }
        unseen.forgetTurns()
        refreshUnseenVariance()
    }

    /// True while the calibration owner says no calibration is applied to the readings.
    public private(set) var magnetometerUncalibrated = false
    /// While they are uncalibrated, what the readings show of how far the compass can be off.
    public private(set) var uncalibratedEvidence = UncalibratedHeadingEvidence()
    /// Whether that evidence may bound the heading (see `MagnetometerCalibrationNotice.learning`).
    var uncalibratedButLearning = false

    /// The calibration applied to the readings changed. Uncalibrated readings still steer the heading
    /// (nothing better is known) but the accuracy says 180 degrees. A new calibration renews the
    /// magnetic reference (its radius; the dip is learned again unless the model gave it) and widens
    /// the heading uncertainty by as far as the change can have turned the compass, so the next
    /// readings correct a heading taken from the old calibration.
    public mutating func noteCalibration(_ notice: MagnetometerCalibrationNotice) {
        if notice.calibrated || !magnetometerUncalibrated { uncalibratedEvidence.reset() }
        magnetometerUncalibrated = !notice.calibrated
        uncalibratedButLearning = notice.learning
        guard notice.calibrated else { return }
        agreement?.noteCalibration(0, radiusMicrotesla: notice.fieldStrengthMicrotesla)
        // A refinement is within what the heading measurements average out anyway: no reason to trust
        // them more; a renewal widens the heading by as far as the change can have turned it.
        if magneticGate.follow(notice), started { widenHeading(byRadians: notice.headingShiftRadians) }
        unseen.forgetTurns()
        refreshUnseenVariance()
    }

    /// Samples skipped so far, by reason.
    public var skipped: SkippedSampleCounts { validator.skipped }

    public init(settings: KalmanFilterSettings = .init()) {
        self.settings = settings
        validator = SampleValidator(maximumStepSeconds: settings.maximumStepSeconds)
        rest = settings.restDetector
        magneticGate = MagneticDisturbanceGate(settings: settings.magneticGate)
        aiding.headingKnown = settings.useMagnetometer
        yawEstimator = GnssYawEstimator(settings: settings.gnssYaw)
        refreshUnseenVariance()
    }

    /// The filter reports `initialising` for at least this long after its first sample, seconds.
    static let minimumInitialisingSeconds = 1.0

    /// Feeds one IMU sample and, if one arrived with it, a magnetometer sample (microtesla; calibrated
    /// unless `settings.magnetometerCalibration` is set). Returns nil when the sample was skipped (the
    /// reason is counted in `skipped`).
    public mutating func update(imu: ImuSample, magnetometer: MagnetometerSample? = nil) -> FusionOutput? {
        var nobody = NoStepRecorder()
        return step(imu: imu, magnetometer: magnetometer, recorder: &nobody)
    }

    /// `update`, telling `recorder` what a smoother needs: starts, each measurement update's
    /// propagation, correction and posterior covariance, and resets. Specialised per recorder, so the
    /// plain filter pays nothing for it.
    @inline(__always)
    mutating func step<Recorder: KalmanStepRecorder>(
        imu: ImuSample, magnetometer: MagnetometerSample?, recorder: inout Recorder
    ) -> FusionOutput? {
        guard let dt = validator.step(for: imu) else { return nil }
        var field = validator.field(of: magnetometer)
        if !settings.useMagnetometer { field = nil }
        if let f = field, let cal = settings.magnetometerCalibration { field = cal.apply(f) }
        if !started {
            start(specificForce: imu.specificForce, field: field)
            recorder.started(posterior: covarianceBlocks, at: imu.timestamp)
            return output(imu.timestamp, flags: [.initialising])
        }
        elapsed += dt
        var flags: FusionFlags = []
        // The receiver saying the vehicle moves overrules a quiet IMU (a car cruising on a smooth road).
        if rest.update(rate: imu.angularVelocity, specificForce: imu.specificForce, dt: dt),
            !aiding.moving(at: imu.timestamp, settings: settings)
        {
            flags.insert(.atRest)
        }

        // Propagate with the bias-corrected gyro.
        // Not renormalised here: the exponential is unit to rounding and the injection below renormalises.
        orientation = orientation * Quaternion(rotationVector: (imu.angularVelocity - gyroBias) * dt)
        let r = orientation.rotationMatrix
        latestRate = imu.angularVelocity - gyroBias
        let rate = latestRate.norm
        accumulatePropagation(rotation: r, dt: dt, rate: rate)
        if settings.verticalTurnDegreesPerSecond > 0 {
            // The rate in the earth frame, low-passed over half a second: a vehicle's turn is about the
            // vertical alone, and lasts.
            let earthRate = r * latestRate
            let w = forceWeight(dt, tau: Self.verticalTurnLowPassSeconds)
            verticalRate += (abs(earthRate.z) - verticalRate) * w
            horizontalRate +=
                ((earthRate.x * earthRate.x + earthRate.y * earthRate.y).squareRoot() - horizontalRate) * w
            if verticalRate > settings.verticalTurnDegreesPerSecond * radiansPerDegree
                && horizontalRate < settings.verticalTurnRatio * verticalRate
            {
                lastVerticalTurn = imu.timestamp
            }
        }
        magneticGate.noteRotation(radians: rate * dt)
        for i in others.indices { others[i].gate.noteRotation(radians: rate * dt) }

        // The earth-frame low-passed specific force: linear accelerations that come and go cancel. The
        // rotation's own share (a lever arm about a pivot) would not, so it is taken out first.
        let rotational = leverArm.rotationalAcceleration(
            rate: latestRate, specificForce: imu.specificForce, gravity: r.row2 * standardGravity, dt: dt,
            settings: settings)
        let force = r * (imu.specificForce - rotational)
        recorder.propagated(earthForce: force)
        aiding.forceIntegral += force * dt
        aiding.forceSeconds += dt
        lowPassedForceEarth +=
            (force - lowPassedForceEarth) * forceWeight(dt, tau: settings.accelerometerLowPassSeconds)
        // |f| within g (1 +- tolerance), compared squared: no square root per sample.
        let forceSquared = lowPassedForceEarth.squaredNorm
        let low = standardGravity * (1 - settings.accelerationRejectionTolerance),
            high = standardGravity * (1 + settings.accelerationRejectionTolerance)
        let accelerationUsable = forceSquared >= low * low && forceSquared <= high * high
        if !accelerationUsable { flags.insert(.accelerationRejected) }

        // Magnetometer readings are gated one by one; the accepted innovations are averaged until the
        // next measurement update.
        secondsSinceMagneticUpdate += dt
        if let m = field {
            let magneticDt = validator.magneticStep(at: imu.timestamp, fallback: dt)
            flags.formUnion(
                gateMagnetometer(
                    field: m, rotation: r, dt: magneticDt, rate: rate, turned: rate * dt, at: imu.timestamp,
                    recorder: &recorder))
        }
        if !others.isEmpty {
            // The output's flags describe the heading: another magnetometer steering it means it is not
            // held on the gyro, whatever the primary's verdict (kept for the primary's own status).
            primaryMagneticFlags = flags.intersection(Self.magneticVerdictFlags)
            if gateOthers(rotation: r, headingVariance: headingVariance, at: imu.timestamp) {
                flags.subtract(Self.magneticVerdictFlags)
            }
        }
        if aiding.compassDisagrees || aiding.bankDisagrees { flags.insert(.compassDisagreesWithGnss) }
        if aiding.headingAided(at: imu.timestamp) {
            flags.insert(.gnssAided)
        } else if secondsSinceMagneticUpdate > settings.gyroOnlyAfterSeconds {
            flags.insert(.gyroOnly)
        }

        // Measurement updates at most every `measurementUpdateSeconds`; noise densities make them
        // carry the same information whatever the interval and the sample rate.
        secondsSinceMeasurementUpdate += dt
        if secondsSinceMeasurementUpdate >= settings.measurementUpdateSeconds {
            let interval = secondsSinceMeasurementUpdate
            secondsSinceMeasurementUpdate = 0
            let propagation = KalmanPropagation(
                g: pendingG, attitudeNoise: pendingAttitudeNoise, biasNoise: pendingBiasNoise,
                headingWidening: pendingHeadingWidening)
            pendingHeadingWidening = 0
            applyPendingPropagation()
            let headingMeasured =
                headingSeconds > 0 || aiding.pendingHeading != nil || others.contains { $0.innovationSeconds > 0 }
            var dTheta = Vector3.zero, dBias = Vector3.zero
            let gnssChain = aiding.chainActive(
                at: imu.timestamp, primeSeconds: settings.accelerometerLowPassSeconds,
                maximumGap: settings.maximumVelocityGapSeconds)
            let a = aiding.lowPassedAcceleration
            let horizontalAccelerationSquared = a.x * a.x + a.y * a.y
            if !aiding.headingKnown,
                let angle = alignHeadingFromBank()
                    ?? (gnssChain ? alignHeading(force: aiding.lowPassedForce, acceleration: a) : nil)
            {
                turnHeading(by: angle)
            } else if gnssChain, aiding.headingKnown {
                // The receiver's acceleration taken out: what is left is gravity, seen through the
                // attitude error (rows (1, 0, -a_x/g) and (0, 1, -a_y/g): a heading error turns the
                // horizontal acceleration into an apparent tilt).
                inclinationUpdate(
                    force: aiding.lowPassedForce - a,
                    acceleration: a, interval: interval, low: low, high: high, &dTheta, &dBias)
                if horizontalAccelerationSquared >= Self.headingAidingAcceleration * Self.headingAidingAcceleration {
                    aiding.headingAidedAt = imu.timestamp
                }
            } else if gnssChain,
                horizontalAccelerationSquared > Self.unalignedAcceleration * Self.unalignedAcceleration
            {
                // Heading not known yet and the vehicle accelerates: the receiver's acceleration cannot be
                // turned into the filter's frame, and the accelerometer's is not gravity. The gyro carries
                // the tilt until the alignment.
            } else if imu.timestamp - lastVerticalTurn < settings.accelerometerLowPassSeconds,
                !forceAgreesWithTilt(
                    recorder.inclinationForce(filter: lowPassedForceEarth, orientation: orientation),
                    toleranceRadians: settings.verticalTurnToleranceDegrees * radiansPerDegree, dTheta)
            {
                // Turning about the vertical only, or lately: the tilt has not changed (the gyro carries it
                // exactly), and the low-passed force holds the turn's centripetal acceleration.
                verticalTurnSkipped += 1
            } else {
                // The force the update measures, and its own check (the same as the flag's in real time).
                let lowPassed = recorder.inclinationForce(filter: lowPassedForceEarth, orientation: orientation)
                inclinationUpdate(
                    force: lowPassed, acceleration: .zero, interval: interval, low: low, high: high, &dTheta, &dBias)
            }
            if let h = aiding.pendingHeading {
                aiding.pendingHeading = nil
                applyGnssHeading(h, at: imu.timestamp, &dTheta, &dBias)
            }
            if let heading = takeHeadingInnovation() {
                let variance = settings.headingNoiseDensity * settings.headingNoiseDensity / heading.seconds
                unseen.noteHeadingCorrection(gain: attitudeCovariance.m22 / (attitudeCovariance.m22 + variance))
                scalarUpdate(2, residual: heading.innovation - dTheta.z, variance: variance, &dTheta, &dBias)
            }
            // At rest the low-passed gyro reading is the bias: the reading of `restConfirmationSeconds`
            // ago, once rest has lasted that much longer (a turn starting slowly shows itself by then).
            // The newest reading at least that old stays first; older ones are no longer needed.
            restRates.append((imu.timestamp, rest.lowPassedRate))
            let confirmed = imu.timestamp - settings.restConfirmationSeconds
            while restRates.count > 1, restRates[1].time <= confirmed { restRates.removeFirst() }
            let restRate = restRates[0].time <= confirmed ? restRates[0].rate : nil
            if flags.contains(.atRest), let rate = restRate,
                rest.restSeconds >= rest.minimumSeconds + settings.restConfirmationSeconds
            {
                let residual = rate - gyroBias
                let variance = settings.restBiasNoiseDensity * settings.restBiasNoiseDensity / interval
                scalarUpdate(3, residual: residual.x - dBias.x, variance: variance, &dTheta, &dBias)
                scalarUpdate(4, residual: residual.y - dBias.y, variance: variance, &dTheta, &dBias)
                scalarUpdate(5, residual: residual.z - dBias.z, variance: variance, &dTheta, &dBias)
            }
            recorder.measured(
                propagation, correction: (dTheta, dBias), posterior: covarianceBlocks,
                headingMeasured: headingMeasured, orientation: orientation, at: imu.timestamp)
            inject(dTheta, dBias)
        }
        orientation = orientation.renormalized
        guard orientation.isFinite, gyroBias.isFinite, attitudeCovariance.isFinite, biasCovariance.isFinite else {
            recorder.reset()
            return restarted(at: imu)
        }
        if elapsed < Self.minimumInitialisingSeconds
            || (settings.useMagnetometer && magneticGate.isLearningFirstReference)
            || !aiding.headingKnown
        {
            flags.insert(.initialising)
        }
        refreshUnseenVariance()
        return output(imu.timestamp, flags: flags)
    }

    /// The state became non-finite (a sample the checks let through drove it there): start again from
    /// this sample, keeping the sample checks and their counts, and say so.
    mutating func restarted(at imu: ImuSample) -> FusionOutput? {
        var checks = validator
        checks.countReset()
        let uncalibrated = (magnetometerUncalibrated, uncalibratedEvidence, uncalibratedButLearning)
        let kept = (others: others, agreement: agreement)
        self = KalmanFilter(settings: settings)
        validator = checks
        (magnetometerUncalibrated, uncalibratedEvidence, uncalibratedButLearning) = uncalibrated
        // The magnetometers stay, their gates start afresh with the filter; the counts go on.
        others = kept.others.map { OtherMagnetometer(name: $0.name, gate: settings.magneticGate) }
        agreement = kept.agreement
        return output(imu.timestamp, flags: [.initialising, .filterReset])
    }

    /// 1-sigma uncertainty of the gyro bias about the earth's vertical, rad/s: the rate at which an
    /// error of the bias estimate drifts the gyro-carried heading.
    @inline(__always)
    func verticalBiasSigma(rotation r: Matrix3) -> Double {
        let up = r.row2
        return max(0, up.dot(biasCovariance * up)).squareRoot()
    }

    /// The current heading, degrees clockwise from magnetic north after the reference offset.
    public var headingDegrees: Double? {
        orientation.headingDegrees.map { normalizedDegrees($0 - settings.referenceOffsetDegrees) }
    }

    /// The orientation reported: the state, predicted ahead by the sensor latency.
    var reportedOrientation: Quaternion {
        orientation.predicted(rate: latestRate, seconds: settings.sensorLatencySeconds)
    }

    /// 1-sigma heading uncertainty from the state alone, degrees.
    public var headingSigmaDegrees: Double { headingVariance.squareRoot() * degreesPerRadian }

    /// The filter's own part of the reported heading variance, degrees^2: the state's, widened while
    /// no calibration is applied by as far as the uncalibrated readings can turn the compass.
    var reportedOwnVarianceDegrees2: Double {
        MagnetometerCalibrationNotice.ownVarianceDegrees2(
            headingVariance * degreesPerRadian * degreesPerRadian,
            uncalibratedBoundRadians: !magnetometerUncalibrated
                ? nil
                : uncalibratedButLearning
                    ? uncalibratedEvidence.headingBoundRadians(eastRow: orientation.rotationMatrix.row0) : .pi)
    }

    /// Where the reported heading accuracy comes from now (the bound of the latest output, whatever
    /// its flags).
    public var headingAccuracyParts: HeadingAccuracyParts {
        unseen.accuracyParts(
            filterSigmaDegrees: reportedOwnVarianceDegrees2.squareRoot(), eastRow: unseen.followedEastRow)
    }

    /// The heading (earth z) variance now, rad^2: the stored value plus the pending propagation's
    /// share of it, (A + B G^T + G B^T + G C G^T + Q)_22.
    @inline(__always)
    var headingVariance: Double {
        let g2 = pendingG.row2
        return attitudeCovariance.m22 + 2 * crossCovariance.row2.dot(g2) + g2.dot(biasCovariance * g2)
            + pendingAttitudeNoise
    }

    // MARK: - Steps

    mutating func start(specificForce: Vector3, field: Vector3?) {
        // Without a usable field the heading is arbitrary; the large initial uncertainty below covers it.
        if let initial = TiltCompensatedCompass.initialOrientation(specificForce: specificForce, field: field) {
            orientation = initial.orientation
        }
        // Without the magnetometer the heading is unknown until GNSS gives it.
        let tilt = 5 * radiansPerDegree, heading = (settings.useMagnetometer ? 30 : 180) * radiansPerDegree
        attitudeCovariance = Matrix3.diagonal(Vector3(tilt * tilt, tilt * tilt, heading * heading))
        crossCovariance = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
        let b = settings.initialGyroBiasSigma
        biasCovariance = Matrix3.diagonal(Vector3(b * b, b * b, b * b))
        lowPassedForceEarth = orientation.rotate(specificForce)
        started = true
    }

    /// Accumulates one step of P <- F P F^T + Q with F = [[I, -R dt], [0, I]] (earth-frame attitude
    /// error, sensor-frame bias).
    @inline(__always)
    mutating func accumulatePropagation(rotation r: Matrix3, dt: Double, rate: Double) {
        pendingG = pendingG - r * dt
        let rateNoise = settings.gyroRateNoise * rate
        pendingAttitudeNoise += (settings.gyroNoiseDensity * settings.gyroNoiseDensity + rateNoise * rateNoise) * dt
        pendingBiasNoise += settings.gyroBiasRandomWalk * settings.gyroBiasRandomWalk * dt
    }

    /// Applies the accumulated propagation to the covariance blocks.
    mutating func applyPendingPropagation() {
        let g = pendingG
        let gt = g.transposed
        let gc = g * biasCovariance
        let y = crossCovariance * gt
        // A' = A + Y + Y^T + (G C) G^T is symmetric: form its upper triangle and mirror it.
        var a = attitudeCovariance
        a.m00 += 2 * y.m00 + gc.row0.dot(g.row0)
        a.m11 += 2 * y.m11 + gc.row1.dot(g.row1)
        a.m22 += 2 * y.m22 + gc.row2.dot(g.row2)
        a.m01 += y.m01 + y.m10 + gc.row0.dot(g.row1)
        a.m10 = a.m01
        a.m02 += y.m02 + y.m20 + gc.row0.dot(g.row2)
        a.m20 = a.m02
        a.m12 += y.m12 + y.m21 + gc.row1.dot(g.row2)
        a.m21 = a.m12
        crossCovariance = crossCovariance + gc
        attitudeCovariance = a.addingToDiagonal(pendingAttitudeNoise)
        biasCovariance = biasCovariance.addingToDiagonal(pendingBiasNoise)
        pendingG = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
        pendingAttitudeNoise = 0
        pendingBiasNoise = 0
    }

    /// The inclination update: the low-passed earth-frame `force` (the receiver's acceleration already
    /// taken out when known) should be gravity; `acceleration` is the horizontal acceleration it
    /// contained, which couples the heading error in. Skipped while |force| is not within g's
    /// tolerance.
    @inline(__always)
    mutating func inclinationUpdate(
        force: Vector3, acceleration a: Vector3, interval: Double, low: Double, high: Double,
        _ dTheta: inout Vector3, _ dBias: inout Vector3
    ) {
        let squared = force.squaredNorm
        guard squared >= low * low && squared <= high * high else { return }
        let u = force / squared.squareRoot()
        // The rotation vector taking u onto +z: axis (u_y, -u_x, 0)/s, angle atan2(s, u_z).
        let k = tiltAngleOverSine(u)
        if settings.inclinationGateDegrees > 0,
            !forceAgreesWithTilt(force, toleranceRadians: settings.inclinationGateDegrees * radiansPerDegree, dTheta)
        {
            inclinationGated += 1
            return
        }
        let variance = settings.inclinationNoiseDensity * settings.inclinationNoiseDensity / interval
        if a.x == 0 && a.y == 0 {
            scalarUpdate(0, residual: u.y * k - dTheta.x, variance: variance, &dTheta, &dBias)
            scalarUpdate(1, residual: -u.x * k - dTheta.y, variance: variance, &dTheta, &dBias)
        } else {
            let h0 = Vector3(1, 0, -a.x / standardGravity), h1 = Vector3(0, 1, -a.y / standardGravity)
            attitudeUpdate(h0, residual: u.y * k - h0.dot(dTheta), variance: variance, &dTheta, &dBias)
            attitudeUpdate(h1, residual: -u.x * k - h1.dot(dTheta), variance: variance, &dTheta, &dBias)
        }
    }

    /// Whether the force's direction is within `toleranceRadians` beyond 3 sigma of the attitude
    /// uncertainty of the carried vertical (as `inclinationGateDegrees` judges it).
    func forceAgreesWithTilt(_ force: Vector3, toleranceRadians: Double, _ dTheta: Vector3) -> Bool {
        guard toleranceRadians > 0 else { return false }
        let squared = force.squaredNorm
        guard squared > 0 else { return false }
        let u = force / squared.squareRoot()
        let k = tiltAngleOverSine(u)
        let rx = u.y * k - dTheta.x, ry = -u.x * k - dTheta.y
        let t2 = toleranceRadians * toleranceRadians
        return rx * rx <= 9 * attitudeCovariance.m00 + t2 && ry * ry <= 9 * attitudeCovariance.m11 + t2
    }

    /// A horizontal acceleration this large, low-passed (m/s^2), tells the heading within a few
    /// degrees over a few seconds: the heading counts as GNSS-aided then.
    static let headingAidingAcceleration = 0.5
    /// Before the heading is known, a GNSS acceleration above this (m/s^2, low-passed) keeps the
    /// accelerometer out of the tilt: about a degree of tilt.
    static let unalignedAcceleration = 0.2

    /// One scalar measurement h . dtheta of the attitude error (h in the earth frame).
    mutating func attitudeUpdate(
        _ h: Vector3, residual: Double, variance: Double, _ dTheta: inout Vector3, _ dBias: inout Vector3
    ) {
        let pa = attitudeCovariance * h
        let pb = crossCovariance.row0 * h.x + crossCovariance.row1 * h.y + crossCovariance.row2 * h.z
        update(pa: pa, pb: pb, innovationVariance: h.dot(pa) + variance, residual: residual, &dTheta, &dBias)
    }

    /// The gain and downdate of one scalar measurement, given P H^T split into its attitude (`pa`) and
    /// bias (`pb`) parts and H P H^T + R.
    @inline(__always)
    mutating func update(
        pa: Vector3, pb: Vector3, innovationVariance: Double, residual: Double, _ dTheta: inout Vector3,
        _ dBias: inout Vector3
    ) {
        let inv = 1 / innovationVariance
        let ka = pa * inv, kb = pb * inv
        dTheta += ka * residual
        dBias += kb * residual
        attitudeCovariance.subtractSymmetricOuter(ka, pa)
        crossCovariance = crossCovariance - Matrix3.outer(ka, pb)
        biasCovariance.subtractSymmetricOuter(kb, pb)
    }

    /// One scalar measurement of error-state component `index` (0-2 attitude, 3-5 bias). The two
    /// diagonal blocks stay exactly symmetric: their downdate p p^T / s is formed once per pair.
    mutating func scalarUpdate(
        _ index: Int, residual: Double, variance: Double, _ dTheta: inout Vector3, _ dBias: inout Vector3
    ) {
        let pa: Vector3, pb: Vector3, pii: Double
        switch index {
        case 0:
            pa = attitudeCovariance.column0
            pb = crossCovariance.row0
            pii = attitudeCovariance.m00
        case 1:
            pa = attitudeCovariance.column1
            pb = crossCovariance.row1
            pii = attitudeCovariance.m11
        case 2:
            pa = attitudeCovariance.column2
            pb = crossCovariance.row2
            pii = attitudeCovariance.m22
        case 3:
            pa = crossCovariance.column0
            pb = biasCovariance.column0
            pii = biasCovariance.m00
        case 4:
            pa = crossCovariance.column1
            pb = biasCovariance.column1
            pii = biasCovariance.m11
        default:
            pa = crossCovariance.column2
            pb = biasCovariance.column2
            pii = biasCovariance.m22
        }
        update(pa: pa, pb: pb, innovationVariance: pii + variance, residual: residual, &dTheta, &dBias)
    }

    /// The heading may be off by about `radians` more than the filter thought (it followed something
    /// that was): its variance grows by the square.
    mutating func widenHeading(byRadians radians: Double) {
        // Adding to the attitude block commutes with the pending propagation, which can wait.
        attitudeCovariance.m22 += radians * radians
        pendingHeadingWidening += radians * radians
    }

    /// Turns the heading by an angle of any size about the earth's vertical (dtheta_z: the heading
    /// decreases by it), exactly rather than by the small-angle injection, with the earth-frame
    /// quantities the filter keeps.
    mutating func turnHeading(by angle: Double) {
        let turn = Quaternion(rotationVector: Vector3(0, 0, angle))
        orientation = turn * orientation
        lowPassedForceEarth = turn.rotate(lowPassedForceEarth)
        aiding.lowPassedForce = turn.rotate(aiding.lowPassedForce)
        aiding.forceIntegral = turn.rotate(aiding.forceIntegral)
        yawEstimator.noteHeadingCorrection(radians: angle)
    }

    /// Applies an error-state correction; the earth-frame low-passes turn with the frame they live in.
    mutating func inject(_ dTheta: Vector3, _ dBias: Vector3) {
        if dTheta.squaredNorm > 0 {
            magneticGate.noteHeadingCorrection(radians: dTheta.z)
            yawEstimator.noteHeadingCorrection(radians: dTheta.z)
            for i in others.indices { others[i].gate.noteHeadingCorrection(radians: dTheta.z) }
            orientation = Quaternion(rotationVector: dTheta) * orientation
            lowPassedForceEarth += dTheta.cross(lowPassedForceEarth)
            aiding.rotate(by: dTheta)
        }
        gyroBias += dBias
    }

    /// Gates one magnetometer reading; an accepted one joins the innovation average. Returns the flags
    /// it raised.
    @inline(__always)
    mutating func gateMagnetometer<Recorder: KalmanStepRecorder>(
        field m: Vector3, rotation r: Matrix3, dt: Double, rate: Double, turned: Double, at time: Double,
        recorder: inout Recorder
    ) -> FusionFlags {
        if magnetometerUncalibrated { uncalibratedEvidence.add(m, rotation: r, at: time) }
        let earth = r * m
        let strength = m.norm
        let horizontal = (earth.x * earth.x + earth.y * earth.y).squareRoot()
        guard horizontal > 1e-3 * strength else { return [.magnetometerRejected] }
        let dip = approximateAtan2(-earth.z, horizontal) * degreesPerRadian
        // Clockwise angle of the horizontal field from +y: the earth-frame heading error about z.
        let alpha = atan2Small(earth.x, earth.y)
        let verdict = magneticGate.assess(
            strengthMicrotesla: strength, dipDegrees: dip, headingInnovation: alpha,
            headingVariance: headingVariance, verticalBiasSigma: verticalBiasSigma(rotation: r),
            tiltSigma: max(attitudeCovariance.m00, attitudeCovariance.m11, 0).squareRoot(), dt: dt)
        if verdict.flags.contains(.magneticReferenceChanged) { unseen.forgetTurns() }
        if let offset = magneticGate.adoptedHeadingOffset {
            // The heading started from a compass that was off by about this much: as wide as that.
            magneticGate.adoptedHeadingOffset = nil
            widenHeading(byRadians: offset)
        }
        let offBank = compareWithBank(headingInnovation: alpha, dt: dt, at: time)
        if compareWithGnss(headingInnovation: alpha, dt: dt, at: time) || offBank {
            return verdict.flags.union([.magnetometerRejected, .compassDisagreesWithGnss])
        }
        if agreement != nil,
            !agreement!.assess(
                0, innovation: alpha, gyroDeviation: magneticGate.gyroDeviation, gateAccepts: verdict.use,
                calibrated: true, dt: dt, at: time, strengthMicrotesla: strength, dipDegrees: dip,
                referenceStrengthMicrotesla: magneticGate.referenceFieldMicrotesla,
                referenceDipDegrees: magneticGate.referenceDipDegrees),
            verdict.use
        {
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
        magneticGate.noteApplied()
        unseen.noteTrusted(
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

    /// The unseen disturbance's heading variance at the gate's reference dip (60 degrees until known),
    /// for the share of it turning has not exposed.
    var unseen = UnseenDisturbance.Variance()

    @inline(__always)
    mutating func refreshUnseenVariance() {
        unseen.refresh(
            fraction: settings.useMagnetometer ? settings.unseenDisturbanceFraction : 0,
            dipDegrees: magneticGate.referenceDipDegrees ?? TypicalEarthField.dipDegrees)
    }

    /// Always inlined: as a call it copied the whole filter (1.5 KB) per sample.
    @inline(__always)
    func output(_ timestamp: Double, flags: FusionFlags) -> FusionOutput {
        var flags = flags
        if magnetometerUncalibrated { flags.insert(.magnetometerUncalibrated) }
        // While GNSS holds the heading, a field error the compass checks cannot see is seen against it:
        // the filter's own variance is the whole of it.
        let variance = reportedOwnVarianceDegrees2 + (flags.contains(.gnssAided) ? 0 : unseen.degrees2)
        return FusionOutput(
            timestamp: timestamp, orientation: reportedOrientation,
            referenceOffsetDegrees: settings.referenceOffsetDegrees,
            headingVarianceDegrees2: flags.contains(.initialising) || !variance.isFinite ? nil : variance,
            gyroBias: gyroBias, flags: flags)
    }
}
