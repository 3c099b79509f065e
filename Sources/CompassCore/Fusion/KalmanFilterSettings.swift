/// Parameters of `KalmanFilter`. Every value has its unit and default; defaults suit a consumer or
/// industrial MEMS IMU at 50-1000 Hz and are not tuned to any one recording.
public struct KalmanFilterSettings: Sendable, Equatable {
    // MARK: Process model
    /// Gyro angle random walk, rad/s/sqrt(Hz): how fast attitude uncertainty grows between
    /// corrections. Default 0.003.
    public var gyroNoiseDensity = 0.003
    /// Attitude noise density per unit of angular rate, sqrt(s): scale-factor and misalignment
    /// errors make the gyro-carried attitude drift faster the faster the sensor turns. Default 0.0015.
    public var gyroRateNoise = 0.0015
    /// Gyro bias instability as a random walk, rad/s/sqrt(s). Default 1e-4.
    public var gyroBiasRandomWalk = 1e-4
    /// Gyro bias uncertainty at start, rad/s (1 sigma). Default 0.01 (0.57 deg/s).
    public var initialGyroBiasSigma = 0.01

    // MARK: Accelerometer (inclination)
    /// Time constant of the low-pass applied to the specific force in the earth frame, seconds: linear
    /// accelerations that come and go average out before they reach the estimate. Default 3.
    public var accelerometerLowPassSeconds = 3.0
    /// Noise of the low-passed gravity direction per update, rad. Default 0.1.
    public var inclinationNoise = 0.1
    /// The accelerometer is rejected while the low-passed specific force differs from g by more than
    /// this fraction (sustained linear acceleration). Default 0.1.
    public var accelerationRejectionTolerance = 0.1

    // MARK: Magnetometer (heading)
    /// Noise of the horizontal field direction per update, rad: white noise plus the slowly varying
    /// inhomogeneity of indoor fields, which is why it is far above the sensor's own noise. Default 1.6.
    public var headingNoise = 1.6
    /// Strength, dip and gyro-consistency checks that decide when the magnetometer is used.
    public var magneticGate = MagneticGateSettings()
    /// The heading is flagged gyro-only after this long without a magnetometer correction, s. Default 2.
    public var gyroOnlyAfterSeconds = 2.0

    // MARK: Rest
    /// Rest detection (see `RestDetector`). At rest the low-passed gyro reading observes the bias.
    public var restDetector = RestDetector()
    /// Noise of the at-rest bias observation, rad/s. Default 0.002.
    public var restBiasNoise = 0.002

    // MARK: Output
    /// Heading uncertainty the state cannot see, degrees (1 sigma), added to the filter's own in the
    /// reported accuracy: indoor fields are inhomogeneous by a degree or more, and a static disturbance
    /// present from the start passes every check. Default 3 (on the nine BROAD trials the 95 % bound
    /// then covers the true error on 91.6 % of the scored samples; with 1, on 88 %).
    public var headingAccuracyFloorDegrees = 3.0
    /// Subtracted from the output heading ("this direction is zero"), degrees. Default 0.
    public var referenceOffsetDegrees = 0.0
    /// Applied to every magnetometer reading before use. Default: none (the calibration stage
    /// usually does this upstream).
    public var magnetometerCalibration: MagnetometerCalibration? = nil
    /// Longest time step integrated as is, seconds; longer gaps are clamped and counted. Default 0.1.
    public var maximumStepSeconds = 0.1

    public init() {}
}
