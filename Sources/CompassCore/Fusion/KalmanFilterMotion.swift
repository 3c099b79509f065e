/// The Kalman filter's per-sample motion: the gyro propagates the orientation and the covariance, and
/// the accelerometer's specific force is low-passed in the earth frame for the inclination update.
extension KalmanFilter {
    /// What one gyro step leaves for the rest of the step: the propagated orientation as a matrix,
    /// the bias-corrected rate's magnitude (rad/s) and the angle turned (rad).
    struct Motion {
        let rotation: Matrix3
        let rate: Double
        let turned: Double
    }

    /// Propagates the orientation with the bias-corrected gyro (rad/s) over `dt` seconds and
    /// accumulates the covariance's propagation; follows turns about the vertical, and tells the
    /// gates how far the device turned.
    @inline(__always)
    mutating func propagate(gyro: Vector3, dt: Double, at time: Double) -> Motion {
        // Not renormalised here: the exponential is unit to rounding and the injection renormalises.
        orientation = orientation * Quaternion(rotationVector: (gyro - gyroBias) * dt)
        let r = orientation.rotationMatrix
        latestRate = gyro - gyroBias
        let rate = latestRate.norm
        pending.accumulate(
            rotation: r, dt: dt, rate: rate, gyroNoiseDensity: settings.gyroNoiseDensity,
            gyroRateNoise: settings.gyroRateNoise,
            gyroBiasRandomWalk: biasLearnedAtRest
                ? settings.gyroBiasRandomWalk : max(settings.gyroBiasRandomWalk, settings.gyroBiasRandomWalkBeforeRest))
        if settings.verticalTurnDegreesPerSecond > 0 { followVerticalTurn(rotation: r, dt: dt, at: time) }
        frontEnd.gate.noteRotation(radians: rate * dt)
        for i in others.indices { others[i].gate.noteRotation(radians: rate * dt) }
        return Motion(rotation: r, rate: rate, turned: rate * dt)
    }

    /// The rate in the earth frame, low-passed over half a second: a vehicle's turn is about the
    /// vertical alone, and lasts.
    @inline(__always)
    mutating func followVerticalTurn(rotation r: Matrix3, dt: Double, at time: Double) {
        let earthRate = r * latestRate
        let w = forceWeight(dt, tau: Self.verticalTurnLowPassSeconds)
        verticalRate += (abs(earthRate.z) - verticalRate) * w
        horizontalRate += ((earthRate.x * earthRate.x + earthRate.y * earthRate.y).squareRoot() - horizontalRate) * w
        if verticalRate > settings.verticalTurnDegreesPerSecond * radiansPerDegree
            && horizontalRate < settings.verticalTurnRatio * verticalRate
        {
            lastVerticalTurn = time
        }
    }

    static let verticalTurnLowPassSeconds = 0.5

    /// Low-passes the specific force (m/s^2, sensor axes) in the earth frame, where linear
    /// accelerations that come and go cancel; the rotation's own share (a lever arm about a pivot)
    /// would not, so it is taken out first. Returns whether the low-passed force is gravity within
    /// `accelerationRejectionTolerance`.
    @inline(__always)
    mutating func lowPassSpecificForce<Recorder: KalmanStepRecorder>(
        _ specificForce: Vector3, rotation r: Matrix3, dt: Double, recorder: inout Recorder
    ) -> Bool {
        let rotational = leverArm.rotationalAcceleration(
            rate: latestRate, specificForce: specificForce, gravity: r.row2 * standardGravity, dt: dt,
            parameters: LeverArmEstimator.Parameters(settings))
        let force = r * (specificForce - rotational)
        recorder.propagated(earthForce: force)
        aiding.forceIntegral += force * dt
        aiding.forceSeconds += dt
        let w = forceWeight(dt, tau: settings.accelerometerLowPassSeconds)
        linearAccelerationSquared += ((force - lowPassedForceEarth).squaredNorm - linearAccelerationSquared) * w
        lowPassedForceEarth += (force - lowPassedForceEarth) * w
        return gravityBounds.contains(squared: lowPassedForceEarth.squaredNorm)
    }

    /// |f| within g (1 +- `accelerationRejectionTolerance`), m/s^2.
    var gravityBounds: GravityBounds {
        GravityBounds(
            low: standardGravity * (1 - settings.accelerationRejectionTolerance),
            high: standardGravity * (1 + settings.accelerationRejectionTolerance))
    }
}

/// The range of specific force taken for gravity, m/s^2; compared squared, with no square root.
struct GravityBounds {
    let low: Double, high: Double

    @inline(__always)
    func contains(squared: Double) -> Bool { squared >= low * low && squared <= high * high }
}
