/// Orientation and gyro bias by an error-state (multiplicative) Kalman filter.
///
/// State: orientation q (sensor to ENU, y = magnetic north) and gyro bias b. Error state: a small
/// rotation in the EARTH frame (q_true = exp(dtheta) * q) and the bias error, with a 6x6 covariance
/// kept as three 3x3 blocks (`KalmanCovariance`). The gyro propagates q; measurements are applied as
/// independent scalar updates, which is exact for independent noises and keeps every operation in
/// plain `Double`s:
///   - inclination: the specific force, low-passed in the earth frame (linear accelerations that come
///     and go cancel out there), observes the horizontal error components dtheta_x, dtheta_y;
///   - heading: the horizontal direction of the field in the earth frame observes dtheta_z only, so
///     the magnetometer never tilts the estimate;
///   - rest: the low-passed gyro reading observes the bias directly.
/// The magnetometer is used only while `MagneticDisturbanceGate` trusts it: strength and dip match the
/// reference and its heading agrees with the gyro-carried heading.
///
/// One file per part of the step, as VQF splits `updateGyr`, `updateAcc` and `updateMag`: this one
/// holds the state and the order of the step; `KalmanFilterMotion` the gyro propagation and the
/// accelerometer's low-pass; `KalmanFilterMeasurements` the measurement update (inclination, heading,
/// rest); `KalmanFilterMagnetometer` the primary magnetometer's gate and calibration;
/// `KalmanFilterMagnetometers` the others; `GnssAiding` GNSS; `KalmanCovariance` the algebra.
public struct KalmanFilter: Sendable {
    public var settings: KalmanFilterSettings

    public internal(set) var orientation = Quaternion.identity
    public internal(set) var gyroBias = Vector3.zero
    /// The error covariance as of the last measurement update; the propagation since then is pending.
    var covarianceBlocks = KalmanCovariance(
        attitude: .identity, cross: Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0), bias: .identity)
    /// Propagation accumulated since the last measurement update, applied at once at the next. Its
    /// heading widening is applied to the covariance when it happens and kept here for the record,
    /// so that the smoother's prediction has it too (without it the smoother would carry a renewed
    /// calibration's heading back across the renewal as if nothing had changed).
    var pending = KalmanPropagation.none

    /// The primary magnetometer's gate, calibration state and unseen-disturbance term.
    public internal(set) var frontEnd: MagnetometerFrontEnd
    /// The magnetometer gate (its reference strength and dip are public there).
    public var magneticGate: MagneticDisturbanceGate { frontEnd.gate }

    var validator: SampleValidator
    var rest: RestDetector
    var started = false
    /// True while an estimate given by `setEstimate` waits for the first sample (which keeps it).
    var estimateGiven = false
    var elapsed = 0.0
    var lowPassedForceEarth = Vector3.zero
    /// The specific force's squared departure from its low-passed value, low-passed alike, (m/s^2)^2:
    /// the linear acceleration the low-pass has to average out (`linearAccelerationCorrelationSeconds`).
    var linearAccelerationSquared = 0.0
    /// True once the gyro bias was measured at rest.
    var biasLearnedAtRest = false
    var secondsSinceMagneticUpdate = 0.0
    var latestRate = Vector3.zero
    var secondsSinceMeasurementUpdate = 0.0
    var headingSum = 0.0, headingSeconds = 0.0
    var forceWeight = LowPassWeight()
    /// The rotation's share of the specific force (see `LeverArmEstimator`).
    public internal(set) var leverArm = LeverArmEstimator()
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
    /// With several magnetometers, the primary's own verdict at the latest sample (the output's flags
    /// leave it out while another magnetometer steers the heading).
    public internal(set) var primaryMagneticFlags: FusionFlags = []
    /// Magnetometers besides the primary (`addMagnetometer`), each with its own gate.
    public internal(set) var others: [OtherMagnetometer] = []
    /// Every magnetometer judged against the others; nil while there is only the primary.
    public internal(set) var agreement: MagnetometerAgreement?
    /// True while the calibration owner says no calibration is applied to the readings.
    public var magnetometerUncalibrated: Bool { frontEnd.uncalibrated }

    /// Samples skipped so far, by reason.
    public var skipped: SkippedSampleCounts { validator.skipped }

    public init(settings: KalmanFilterSettings = .init()) {
        self.settings = settings
        validator = SampleValidator(maximumStepSeconds: settings.maximumStepSeconds)
        rest = settings.restDetector
        frontEnd = MagnetometerFrontEnd(gate: settings.magneticGate)
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
    /// plain filter pays nothing for it. The order: rest detection, gyro propagation, the
    /// accelerometer's low-pass, the magnetometers' gates, then (every `measurementUpdateSeconds`) the
    /// measurement update.
    @inline(__always)
    mutating func step<Recorder: KalmanStepRecorder>(
        imu: ImuSample, magnetometer: MagnetometerSample?, recorder: inout Recorder
    ) -> FusionOutput? {
        guard let dt = validator.step(for: imu) else { return nil }
        let field = usableField(magnetometer)
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
        let motion = propagate(gyro: imu.angularVelocity, dt: dt, at: imu.timestamp)
        if !lowPassSpecificForce(imu.specificForce, rotation: motion.rotation, dt: dt, recorder: &recorder) {
            flags.insert(.accelerationRejected)
        }
        secondsSinceMagneticUpdate += dt
        flags.formUnion(
            updateMagnetometers(primary: field, motion: motion, dt: dt, at: imu.timestamp, recorder: &recorder))
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
            measurementUpdate(atRest: flags.contains(.atRest), at: imu.timestamp, recorder: &recorder)
        }
        orientation = orientation.renormalized
        guard orientation.isFinite, gyroBias.isFinite, covarianceBlocks.isFinite else {
            recorder.reset()
            return restarted(at: imu)
        }
        if elapsed < Self.minimumInitialisingSeconds
            || (settings.useMagnetometer && frontEnd.gate.isLearningFirstReference)
            || !aiding.headingKnown
        {
            flags.insert(.initialising)
        }
        refreshUnseenVariance()
        return output(imu.timestamp, flags: flags)
    }

    mutating func start(specificForce: Vector3, field: Vector3?) {
        defer {
            lowPassedForceEarth = orientation.rotate(specificForce)
            started = true
            estimateGiven = false
        }
        if estimateGiven { return }
        // Without a usable field the heading is arbitrary; the large initial uncertainty below covers it.
        if let initial = TiltCompensatedCompass.initialOrientation(specificForce: specificForce, field: field) {
            orientation = initial.orientation
        }
        // Without the magnetometer the heading is unknown until GNSS gives it.
        covarianceBlocks = KalmanCovariance(
            tiltSigma: 5 * radiansPerDegree, headingSigma: (settings.useMagnetometer ? 30 : 180) * radiansPerDegree,
            biasSigma: settings.initialGyroBiasSigma)
    }

    /// The state became non-finite (a sample the checks let through drove it there): start again from
    /// this sample, keeping the sample checks and their counts, and say so.
    mutating func restarted(at imu: ImuSample) -> FusionOutput? {
        var checks = validator
        checks.countReset()
        let kept = (frontEnd: frontEnd, others: others, agreement: agreement)
        self = KalmanFilter(settings: settings)
        validator = checks
        frontEnd.keepCalibrationState(of: kept.frontEnd)
        // The magnetometers stay, their gates start afresh with the filter; the counts go on.
        others = kept.others.map { OtherMagnetometer(name: $0.name, gate: settings.magneticGate) }
        agreement = kept.agreement
        return output(imu.timestamp, flags: [.initialising, .filterReset])
    }

    // MARK: - The estimate

    /// What the filter estimates, as a caller reads and restores it (VQF's `getState` and
    /// `setState`): orientation (sensor to ENU, y = magnetic north), gyro bias (rad/s, sensor axes)
    /// and their error covariance.
    public struct Estimate: Sendable, Equatable {
        public var orientation: Quaternion
        public var gyroBiasRadiansPerSecond: Vector3
        public var covariance: KalmanCovariance

        public init(orientation: Quaternion, gyroBiasRadiansPerSecond: Vector3, covariance: KalmanCovariance) {
            self.orientation = orientation
            self.gyroBiasRadiansPerSecond = gyroBiasRadiansPerSecond
            self.covariance = covariance
        }
    }

    /// The estimate now, the propagation since the last measurement update included.
    public var estimate: Estimate {
        var copy = covarianceBlocks
        copy.propagate(by: pending)
        return Estimate(orientation: orientation, gyroBiasRadiansPerSecond: gyroBias, covariance: copy)
    }

    /// Replaces the estimate (a state saved earlier, or one known from elsewhere). Given before the
    /// first sample, the first sample keeps it instead of starting from the compass. The low-passes,
    /// the gates and the counts are kept. Returns false, changing nothing, when it is not finite or the
    /// orientation is not a rotation.
    @discardableResult
    public mutating func setEstimate(_ estimate: Estimate) -> Bool {
        let q = estimate.orientation
        let norm = (q.w * q.w + q.x * q.x + q.y * q.y + q.z * q.z).squareRoot()
        guard q.isFinite, abs(norm - 1) < 1e-6, estimate.gyroBiasRadiansPerSecond.isFinite,
            estimate.covariance.isFinite, estimate.covariance.cross.isFinite
        else { return false }
        orientation = q.renormalized
        gyroBias = estimate.gyroBiasRadiansPerSecond
        covarianceBlocks = estimate.covariance
        pending = .none
        if !started { estimateGiven = true }
        return true
    }

    // MARK: - What it reports

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

    /// The heading (earth z) variance now, rad^2, the pending propagation included.
    @inline(__always)
    var headingVariance: Double { covarianceBlocks.headingVariance(pending: pending) }

    /// The filter's own part of the reported heading variance, degrees^2: the state's, widened while
    /// no calibration is applied by as far as the uncalibrated readings can turn the compass. Always
    /// inlined: as a getter it took a copy of the whole filter (3.5 KB) per sample.
    @inline(__always)
    var reportedOwnVarianceDegrees2: Double {
        frontEnd.ownVarianceDegrees2(
            headingVariance * degreesPerRadian * degreesPerRadian, eastRow: orientation.rotationMatrix.row0)
    }

    /// Where the reported heading accuracy comes from now (the bound of the latest output, whatever
    /// its flags).
    public var headingAccuracyParts: HeadingAccuracyParts {
        frontEnd.accuracyParts(ownVarianceDegrees2: reportedOwnVarianceDegrees2)
    }

    /// Always inlined: as a call it copied the whole filter (3.5 KB) per sample.
    @inline(__always)
    func output(_ timestamp: Double, flags: FusionFlags) -> FusionOutput {
        var flags = flags
        if frontEnd.uncalibrated { flags.insert(.magnetometerUncalibrated) }
        // While GNSS holds the heading, a field error the compass checks cannot see is seen against it:
        // the filter's own variance is the whole of it.
        let variance = reportedOwnVarianceDegrees2 + (flags.contains(.gnssAided) ? 0 : frontEnd.unseen.degrees2)
        return FusionOutput(
            timestamp: timestamp, orientation: reportedOrientation,
            referenceOffsetDegrees: settings.referenceOffsetDegrees,
            headingVarianceDegrees2: flags.contains(.initialising) || !variance.isFinite ? nil : variance,
            gyroBias: gyroBias, flags: flags)
    }
}
