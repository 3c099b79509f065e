/// The Kalman filter's measurement update, every `measurementUpdateSeconds`: the pending propagation is
/// applied, then the inclination (or a GNSS alignment), a GNSS heading, the magnetometers' averaged
/// heading and the rest observation of the bias, each as scalar updates into one correction that is
/// injected at the end.
extension KalmanFilter {
    @inline(__always)
    mutating func measurementUpdate<Recorder: KalmanStepRecorder>(
        atRest: Bool, at time: Double, recorder: inout Recorder
    ) {
        let interval = secondsSinceMeasurementUpdate
        secondsSinceMeasurementUpdate = 0
        let propagation = pending
        covarianceBlocks.propagate(by: pending)
        pending = .none
        let headingMeasured =
            headingSeconds > 0 || aiding.pendingHeading != nil || others.contains { $0.innovationSeconds > 0 }
        var correction = KalmanCorrection()
        updateInclination(interval: interval, at: time, recorder: &recorder, &correction)
        if let h = aiding.pendingHeading {
            aiding.pendingHeading = nil
            applyGnssHeading(h, at: time, &correction)
        }
        updateHeading(&correction)
        updateBiasAtRest(atRest: atRest, interval: interval, at: time, &correction)
        recorder.measured(
            propagation, correction: correction, posterior: covarianceBlocks, headingMeasured: headingMeasured,
            orientation: orientation, at: time)
        inject(correction)
    }

    /// The tilt from the low-passed specific force, one of four ways: without a heading, GNSS
    /// acceleration aligns it; with the GNSS acceleration chain, the receiver's acceleration is taken
    /// out of the force first; accelerating before the alignment, nothing; turning about the
    /// vertical, nothing (unless the force shows the tilt is off); otherwise the force is gravity.
    @inline(__always)
    mutating func updateInclination<Recorder: KalmanStepRecorder>(
        interval: Double, at time: Double, recorder: inout Recorder, _ correction: inout KalmanCorrection
    ) {
        let gnssChain = aiding.chainActive(
            at: time, primeSeconds: settings.accelerometerLowPassSeconds,
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
            inclinationUpdate(force: aiding.lowPassedForce - a, acceleration: a, interval: interval, &correction)
            if horizontalAccelerationSquared >= Self.headingAidingAcceleration * Self.headingAidingAcceleration {
                aiding.headingAidedAt = time
            }
        } else if gnssChain,
            horizontalAccelerationSquared > Self.unalignedAcceleration * Self.unalignedAcceleration
        {
            // Heading not known yet and the vehicle accelerates: the receiver's acceleration cannot be
            // turned into the filter's frame, and the accelerometer's is not gravity. The gyro carries
            // the tilt until the alignment.
        } else if time - lastVerticalTurn < settings.accelerometerLowPassSeconds,
            !forceAgreesWithTilt(
                recorder.inclinationForce(filter: lowPassedForceEarth, orientation: orientation),
                toleranceRadians: settings.verticalTurnToleranceDegrees * radiansPerDegree, correction.attitude)
        {
            // Turning about the vertical only, or lately: the tilt has not changed (the gyro carries it
            // exactly), and the low-passed force holds the turn's centripetal acceleration.
            verticalTurnSkipped += 1
        } else {
            // The force the update measures, and its own check (the same as the flag's in real time).
            let lowPassed = recorder.inclinationForce(filter: lowPassedForceEarth, orientation: orientation)
            inclinationUpdate(force: lowPassed, acceleration: .zero, interval: interval, &correction)
        }
    }

    /// The inclination update: the low-passed earth-frame `force` (the receiver's acceleration already
    /// taken out when known) should be gravity; `acceleration` is the horizontal acceleration it
    /// contained, which couples the heading error in. Skipped while |force| is not within g's
    /// tolerance.
    @inline(__always)
    mutating func inclinationUpdate(
        force: Vector3, acceleration a: Vector3, interval: Double, _ correction: inout KalmanCorrection
    ) {
        let squared = force.squaredNorm
        guard gravityBounds.contains(squared: squared) else { return }
        let u = force / squared.squareRoot()
        // The rotation vector taking u onto +z: axis (u_y, -u_x, 0)/s, angle atan2(s, u_z).
        let k = tiltAngleOverSine(u)
        if settings.inclinationGateDegrees > 0,
            !forceAgreesWithTilt(
                force, toleranceRadians: settings.inclinationGateDegrees * radiansPerDegree, correction.attitude)
        {
            inclinationGated += 1
            return
        }
        // Linear acceleration of RMS a, correlated over tau_c, leaves the low-passed direction an error of
        // noise density a sqrt(tau_c) / g on top of the sensor's own.
        let variance =
            (settings.inclinationNoiseDensity * settings.inclinationNoiseDensity
                + (biasLearnedAtRest ? 0 : linearAccelerationSquared) * settings.linearAccelerationCorrelationSeconds
                    / (standardGravity * standardGravity))
            / interval
        let d = correction.attitude
        if a.x == 0 && a.y == 0 {
            covarianceBlocks.measure(.tiltEast, residual: u.y * k - d.x, variance: variance, &correction)
            covarianceBlocks.measure(
                .tiltNorth, residual: -u.x * k - correction.attitude.y, variance: variance, &correction)
        } else {
            let h0 = Vector3(1, 0, -a.x / standardGravity), h1 = Vector3(0, 1, -a.y / standardGravity)
            covarianceBlocks.measure(attitude: h0, residual: u.y * k - h0.dot(d), variance: variance, &correction)
            covarianceBlocks.measure(
                attitude: h1, residual: -u.x * k - h1.dot(correction.attitude), variance: variance, &correction)
        }
    }

    /// Whether the force's direction is within `toleranceRadians` beyond 3 sigma of the attitude
    /// uncertainty of the carried vertical (as `inclinationGateDegrees` judges it), `dTheta` being the
    /// correction gathered so far.
    func forceAgreesWithTilt(_ force: Vector3, toleranceRadians: Double, _ dTheta: Vector3) -> Bool {
        guard toleranceRadians > 0 else { return false }
        let squared = force.squaredNorm
        guard squared > 0 else { return false }
        let u = force / squared.squareRoot()
        let k = tiltAngleOverSine(u)
        let rx = u.y * k - dTheta.x, ry = -u.x * k - dTheta.y
        let t2 = toleranceRadians * toleranceRadians
        let p = covarianceBlocks.attitude
        return rx * rx <= 9 * p.m00 + t2 && ry * ry <= 9 * p.m11 + t2
    }

    /// A horizontal acceleration this large, low-passed (m/s^2), tells the heading within a few
    /// degrees over a few seconds: the heading counts as GNSS-aided then.
    static let headingAidingAcceleration = 0.5
    /// Before the heading is known, a GNSS acceleration above this (m/s^2, low-passed) keeps the
    /// accelerometer out of the tilt: about a degree of tilt.
    static let unalignedAcceleration = 0.2

    /// The magnetometers' heading innovation averaged over the interval, with the noise density over
    /// the seconds it covers.
    @inline(__always)
    mutating func updateHeading(_ correction: inout KalmanCorrection) {
        guard let heading = takeHeadingInnovation() else { return }
        let variance = settings.headingNoiseDensity * settings.headingNoiseDensity / heading.seconds
        let p22 = covarianceBlocks.attitude.m22
        frontEnd.unseen.noteHeadingCorrection(gain: p22 / (p22 + variance))
        covarianceBlocks.measure(
            .heading, residual: heading.innovation - correction.attitude.z, variance: variance, &correction)
    }

    /// At rest the low-passed gyro reading is the bias: the reading of `restConfirmationSeconds` ago,
    /// once rest has lasted that much longer (a turn starting slowly shows itself by then). The newest
    /// reading at least that old stays first; older ones are no longer needed.
    @inline(__always)
    mutating func updateBiasAtRest(
        atRest: Bool, interval: Double, at time: Double, _ correction: inout KalmanCorrection
    ) {
        restRates.append((time, rest.lowPassedRate))
        let confirmed = time - settings.restConfirmationSeconds
        while restRates.count > 1, restRates[1].time <= confirmed { restRates.removeFirst() }
        let restRate = restRates[0].time <= confirmed ? restRates[0].rate : nil
        guard atRest, let rate = restRate, rest.restSeconds >= rest.minimumSeconds + settings.restConfirmationSeconds
        else { return }
        biasLearnedAtRest = true
        let residual = rate - gyroBias
        let variance = settings.restBiasNoiseDensity * settings.restBiasNoiseDensity / interval
        covarianceBlocks.measure(.biasX, residual: residual.x - correction.bias.x, variance: variance, &correction)
        covarianceBlocks.measure(.biasY, residual: residual.y - correction.bias.y, variance: variance, &correction)
        covarianceBlocks.measure(.biasZ, residual: residual.z - correction.bias.z, variance: variance, &correction)
    }

    /// Applies an error-state correction; the earth-frame low-passes turn with the frame they live in.
    @inline(__always)
    mutating func inject(_ correction: KalmanCorrection) {
        let dTheta = correction.attitude
        if dTheta.squaredNorm > 0 {
            frontEnd.gate.noteHeadingCorrection(radians: dTheta.z)
            yawEstimator.noteHeadingCorrection(radians: dTheta.z)
            for i in others.indices { others[i].gate.noteHeadingCorrection(radians: dTheta.z) }
            orientation = Quaternion(rotationVector: dTheta) * orientation
            lowPassedForceEarth += dTheta.cross(lowPassedForceEarth)
            aiding.rotate(by: dTheta)
        }
        gyroBias += correction.bias
    }

    /// Applies the pending propagation to the covariance now (before a change that does not commute
    /// with it); its heading widening stays for the record.
    mutating func applyPendingPropagation() {
        covarianceBlocks.propagate(by: pending)
        pending = pending.applied
    }

    /// The heading may be off by about `radians` more than the filter thought (it followed something
    /// that was): its variance grows by the square.
    mutating func widenHeading(byRadians radians: Double) {
        // Adding to the attitude block commutes with the pending propagation, which can wait.
        covarianceBlocks.widenHeading(byRadians: radians)
        pending.headingWidening += radians * radians
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
}
