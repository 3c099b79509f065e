/// Parameters of `ComplementaryFilter`, with units and defaults.
public struct ComplementaryFilterSettings: Sendable, Equatable {
    /// Time constant of the earth-frame low-pass of the specific force, seconds. Default 3.
    public var accelerometerLowPassSeconds = 3.0
    /// Time constant of the pull toward the accelerometer's gravity direction, seconds. Default 2.
    public var inclinationTimeConstantSeconds = 2.0
    /// The accelerometer is not used while the low-passed specific force differs from g by more than
    /// this fraction. Default 0.1.
    public var accelerationRejectionTolerance = 0.1
    /// Time constant of the pull toward the compass heading, seconds. Default 5.
    public var headingTimeConstantSeconds = 5.0
    /// Largest heading correction rate, degrees per second, so a display never snaps. Default 2.
    public var maximumHeadingCorrectionDegreesPerSecond = 2.0
    /// Strength, dip and gyro-consistency checks that decide when the compass is trusted.
    public var magneticGate = MagneticGateSettings()
    /// Rest detection; at rest the gyro bias is learned from the low-passed gyro reading.
    public var restDetector = RestDetector()
    /// Time constant of the at-rest bias learning, seconds. Default 2.
    public var biasLearningSeconds = 2.0
    /// Assumed gyro bias residual after learning, degrees per second, for the accuracy estimate: the
    /// heading may drift this fast while the compass is not used. Default 0.05.
    public var residualBiasDegreesPerSecond = 0.05
    /// 1-sigma strength of the field disturbance no check can see, as a fraction of the field: it adds
    /// atan(fraction / cos(dip)) at the reference dip to the heading uncertainty of a trusted compass,
    /// for the share turning has not exposed (see `UnseenDisturbance`,
    /// `KalmanFilterSettings.unseenDisturbanceFraction`). Default 0.022.
    public var unseenDisturbanceFraction = 0.022
    /// 1-sigma heading error of the trusted compass after the filter's averaging, degrees: the
    /// sensor's noise and the field's inhomogeneity over the space the sensor moves in, which no
    /// amount of turning removes. It plays the part the Kalman filter's own heading variance plays
    /// there, whose steady state with that filter's noise densities is about 1 degree. Default 1.
    public var compassHeadingSigmaDegrees = 1.0
    /// Subtracted from the output heading ("this direction is zero"), degrees. Default 0.
    public var referenceOffsetDegrees = 0.0
    /// Applied to every magnetometer reading before use. Default: none.
    public var magnetometerCalibration: MagnetometerCalibration? = nil
    /// The IMU's output latency, seconds (its digital low-pass filter's group delay plus transport):
    /// the reported orientation is predicted this far ahead with the current angular rate, so it
    /// describes the present rather than the moment the sensor sampled. A property of the sensor,
    /// from its datasheet or measured against a reference; the filter state itself is not shifted.
    /// Default 0 (no prediction).
    public var sensorLatencySeconds = 0.0
    /// Longest time step integrated as is, seconds; longer gaps are clamped and counted. Default 0.1.
    public var maximumStepSeconds = 0.1

    public init() {}
}
