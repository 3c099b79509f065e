/// What `KalmanFilter.step` tells a recorder.
protocol KalmanStepRecorder {
    /// The filter started (or started again after a reset) with this covariance.
    mutating func started(posterior: KalmanCovariance, at timestamp: Double)
    /// A measurement update: the propagation since the previous record, the correction applied and
    /// the covariance after it.
    mutating func measured(
        _ propagation: KalmanPropagation, correction: KalmanCorrection,
        posterior: KalmanCovariance, headingMeasured: Bool, orientation: Quaternion, at timestamp: Double)
    /// The state became non-finite and the filter starts again: nothing carries across.
    mutating func reset()
    /// Each sample's specific force in the earth frame (the filter's orientation), m/s^2.
    mutating func propagated(earthForce: Vector3)
    /// The low-passed earth-frame specific force the inclination update measures: the filter's own
    /// causal one, or one the recorder knows better. `orientation` is the filter's at this update.
    mutating func inclinationForce(filter: Vector3, orientation: Quaternion) -> Vector3
    /// Whether the magnetometer reading is used: the gate's verdict, or a decision made earlier.
    mutating func useMagnetometer(gateAccepts: Bool) -> Bool
}

/// The recorder of the plain filter.
struct NoStepRecorder: KalmanStepRecorder {
    @inline(__always) mutating func started(posterior: KalmanCovariance, at timestamp: Double) {}
    @inline(__always) mutating func measured(
        _ propagation: KalmanPropagation, correction: KalmanCorrection,
        posterior: KalmanCovariance, headingMeasured: Bool, orientation: Quaternion, at timestamp: Double
    ) {}
    @inline(__always) mutating func reset() {}
    @inline(__always) mutating func propagated(earthForce: Vector3) {}
    @inline(__always) mutating func inclinationForce(filter: Vector3, orientation: Quaternion) -> Vector3 { filter }
    @inline(__always) mutating func useMagnetometer(gateAccepts: Bool) -> Bool { gateAccepts }
}
