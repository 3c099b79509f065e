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
    /// The same until the bias has been measured at rest, rad/s/sqrt(s): a bias learned in motion is
    /// learned through the accelerometer's and the compass's models (a walker's tilted low-passed
    /// force, a building's field), whose errors last seconds, and a bias taken from them can be wrong by
    /// more than its covariance says; this keeps the filter ready to learn it again, and its bound and
    /// gate aware of it (0.6 deg/s after 100 s). Default 1e-3.
    public var gyroBiasRandomWalkBeforeRest = 1e-3
    /// Gyro bias uncertainty at start, rad/s (1 sigma): the spread of zero-rate offsets a consumer MEMS
    /// gyro leaves the factory with (datasheets give +-3 to +-5 deg/s; the phones' raw gyros show
    /// 0.8-5). A bias learned at rest soon narrows it. Default 0.02 (1.15 deg/s).
    public var initialGyroBiasSigma = 0.02

    // MARK: Accelerometer (inclination)
    /// Time constant of the low-pass applied to the specific force in the earth frame, seconds: linear
    /// accelerations that come and go average out before they reach the estimate. Default 3.
    public var accelerometerLowPassSeconds = 3.0
    /// Noise density of the low-passed gravity direction, rad*sqrt(s): an update covering T seconds
    /// has variance density^2 / T, so the filter behaves the same at any sample rate. Default 0.006.
    public var inclinationNoiseDensity = 0.006
    /// Correlation time of the linear acceleration the low-pass averages out, seconds, while the gyro
    /// bias has not been measured at rest: RMS linear acceleration a (the force's departure from its
    /// low-passed value) then adds a noise density of a sqrt(this) / g to the inclination's. A walker's
    /// steps and a hand's sway leave the low-passed force tilted by a few degrees for seconds, which
    /// an unknown bias would otherwise absorb; once the bias is known at rest, the tilt the gyro carries
    /// between corrections is trusted and the sensor's density alone applies. Of the order of a heel
    /// strike's impulse (10 ms). 0 = the fixed density alone. Default 0.01.
    public var linearAccelerationCorrelationSeconds = 0.01
    /// The accelerometer is rejected while the low-passed specific force differs from g by more than
    /// this fraction (sustained linear acceleration). Default 0.1.
    public var accelerationRejectionTolerance = 0.1
    /// The low-passed force's direction may differ from the gyro-carried vertical by this much beyond
    /// 3 sigma of the attitude uncertainty, degrees; further off, it is acceleration that has not
    /// averaged out (a vehicle's sustained turn or acceleration), not tilt, and is not used. The
    /// attitude uncertainty grows while the gyro carries it, so a real change of tilt is taken in the
    /// end. 0 turns the check off. Default 0 (off).
    public var inclinationGateDegrees = 0.0
    /// A turn about the vertical alone faster than this, degrees per second, keeps the accelerometer out
    /// of the tilt (without GNSS acceleration) until the low-passed force has forgotten it
    /// (`accelerometerLowPassSeconds` after it): such a turn does not change the tilt, which the gyro
    /// then carries exactly, while its centripetal acceleration (speed times rate: 0.9 m/s^2, 5 degrees
    /// of apparent tilt, at 10 m/s and 5 deg/s) is all the force's horizontal part shows. A vehicle's
    /// turns are of this kind; a hand-held device rarely turns about the vertical alone. 0 = off.
    /// Default 5.
    public var verticalTurnDegreesPerSecond = 5.0
    /// A turn counts as about the vertical alone while the horizontal part of the earth-frame rate is at
    /// most this share of the vertical part (a car's roll and pitch rates in a turn are a few percent
    /// of its yaw rate). Default 0.2.
    public var verticalTurnRatio = 0.2
    /// During such a turn the accelerometer is still used while the low-passed force points within this
    /// many degrees, beyond 3 sigma of the attitude uncertainty, of the gyro-carried vertical, degrees:
    /// a device turned in place (a hand-held compass swept round) has no centripetal acceleration to
    /// keep out, and its tilt keeps being corrected. A vehicle's turn shows its speed times rate: 1
    /// degree at 2 m/s and 5 deg/s, 5 degrees at 10 m/s, so those are still left out. 0 = a turn always
    /// keeps the accelerometer out. Default 1: above the filter's steady tilt error (a few tenths).
    public var verticalTurnToleranceDegrees = 1.0
    /// How long the point the sensor turns about is assumed to stay put in the sensor frame, seconds:
    /// the memory of the lever-arm fit that takes the rotation's centripetal and tangential
    /// acceleration out of the specific force (`LeverArmEstimator`). A grip on a handheld, a joint, a
    /// vehicle's mounting: seconds to forever. 0 turns the fit off. Default 0 (off): the fit improves
    /// the inclination where the sensor swings about a pivot, but where the gate lets disturbed
    /// readings through, their headings move with the tilt it changes, so it is a choice for setups
    /// where inclination matters more than a magnet's neighbourhood (docs/results.md, "lever arm").
    public var leverArmSeconds = 0.0
    /// Prior 1-sigma length of the lever arm, metres: a handheld turned at the wrist or the elbow, an
    /// IMU mounted off a vehicle's centre. Default 0.3.
    public var leverArmPriorMeters = 0.3
    /// Noise density of the force the rotation does not explain (the pivot's own acceleration), m/s^2
    /// * sqrt(s): with the prior, how much turning it takes before the fit is believed. Default 1.
    public var pivotAccelerationNoiseDensity = 1.0

    // MARK: Magnetometer (heading)
    /// Noise density of the horizontal field direction, rad*sqrt(s): white noise plus the slowly
    /// varying inhomogeneity of indoor fields, which is why it is far above the sensor's own noise.
    /// Default 0.095.
    public var headingNoiseDensity = 0.095
    /// Strength, dip and gyro-consistency checks that decide when the magnetometer is used.
    public var magneticGate = MagneticGateSettings()
    /// How several magnetometers are judged against each other (`MagnetometerAgreement`).
    public var magnetometerAgreement = MagnetometerAgreementSettings()
    /// The heading is flagged gyro-only after this long without a magnetometer correction, s. Default 2.
    public var gyroOnlyAfterSeconds = 2.0

    // MARK: GNSS aiding
    /// Use the magnetometer for the heading. false: the heading comes from GNSS alone (course,
    /// dual-antenna heading, or velocity changes against the accelerometer) and is unknown until
    /// they give it. Default true.
    public var useMagnetometer = true
    /// The vehicle moves along its x axis (a car, a wheeled robot; not a boat, a drone or a walker):
    /// the GNSS course over ground is the heading while the speed allows. Default false.
    public var courseIsHeading = false
    /// Slowest speed at which the course is taken for the heading, m/s: below it the course is
    /// noise (its error is the velocity noise over the speed) and a reversing vehicle's course points
    /// backwards. Default 2.
    public var minimumCourseSpeedMetresPerSecond = 2.0
    /// 1-sigma angle between course and heading a vehicle keeps (side slip in turns, a mounting
    /// misaligned with the wheels), degrees: added to the course's own noise. Default 2.
    public var courseSlipDegrees = 2.0
    /// GNSS velocities further apart than this do not form an acceleration (an outage broke the
    /// chain), seconds. Default 1.
    public var maximumVelocityGapSeconds = 1.0
    /// 1-sigma error of each component of a receiver's velocity when its message gives no
    /// covariance, m/s. Default 0.1 (Doppler velocity of a consumer receiver).
    public var defaultVelocitySigmaMetresPerSecond = 0.1
    /// A magnetometer heading that differs from a GNSS-held heading by more than this, on average
    /// over `compassDisagreementSeconds`, is flagged and no longer steers the heading while GNSS
    /// holds it, degrees. Default 10.
    public var compassDisagreementDegrees = 10.0
    /// The averaging time of that comparison, seconds. Default 10.
    public var compassDisagreementSeconds = 10.0
    /// A GNSS speed above this, m/s, means the vehicle moves: never at rest. Default 0.5.
    public var restMaximumSpeedMetresPerSecond = 0.5
    /// The bank of yaw hypotheses that finds the heading from GNSS velocity and the accelerometer.
    public var gnssYaw = GnssYawEstimatorSettings()
    /// Without a known heading, the bank's heading is taken once its 1-sigma error is at most this,
    /// degrees; 0 leaves the alignment to the single closed-form one. Default 10: the filter's
    /// heading updates refine it from there, and a car's first turn brings the bank below it.
    public var gnssYawAlignmentDegrees = 10.0
    /// With a known heading, the compass is flagged when the bank's heading, once within this 1-sigma
    /// error, degrees, stays further from the filter's than `compassDisagreementDegrees` over
    /// `compassDisagreementSeconds`; 0 = no such check. Default 5.
    public var gnssYawCheckDegrees = 5.0

    // MARK: Rest
    /// Rest detection (see `RestDetector`). At rest the low-passed gyro reading observes the bias.
    public var restDetector = RestDetector()
    /// Noise density of the at-rest bias observation, rad/s*sqrt(s). Default 1.2e-4.
    public var restBiasNoiseDensity = 1.2e-4
    /// The bias is learned from gyro readings this old, seconds, once rest has lasted this much longer
    /// than `RestDetector.minimumSeconds`: the slow start of a vehicle's turn looks like rest until
    /// its rate exceeds the detector's limit, and by then its readings must not have become bias.
    /// Default 1.
    public var restConfirmationSeconds = 1.0
    /// Measurement updates happen at most this often, seconds; between them magnetometer innovations
    /// are averaged (the low-passed accelerometer and gyro change slowly anyway). Default 0.02 (50 Hz).
    public var measurementUpdateSeconds = 0.02

    // MARK: Output
    /// 1-sigma strength of the field disturbance no check can see, as a fraction of the field
    /// strength (see `UnseenDisturbance`): its heading error, atan(fraction / cos(dip)) at the
    /// reference dip, is added to the state's own in the reported accuracy, for the share of it that
    /// turning has not exposed, plus the error the exposed part showed (`SensorFixedDisturbance`).
    /// The gate passes a steady disturbance of up to `strengthTolerance` (10 %); indoors a few percent
    /// is common (a lab's undisturbed field can be 10 % off the World Magnetic Model's). Default
    /// 0.022: 3.6 degrees at a dip of 69 degrees, 1.3 at 20 (its coverage is measured in
    /// docs/results.md).
    public var unseenDisturbanceFraction = 0.022
    /// Subtracted from the output heading ("this direction is zero"), degrees. Default 0.
    public var referenceOffsetDegrees = 0.0
    /// Applied to every magnetometer reading before use. Default: none (the calibration stage
    /// usually does this upstream).
    public var magnetometerCalibration: MagnetometerCalibration? = nil
    /// The IMU's output latency, seconds (its digital low-pass filter's group delay plus transport):
    /// the reported orientation is predicted this far ahead with the current angular rate, so it
    /// describes the present rather than the moment the sensor sampled. A property of the sensor,
    /// from its datasheet or measured against a reference; the filter state itself is not shifted.
    /// Default 0 (no prediction).
    public var sensorLatencySeconds = 0.0
    /// Longest time step integrated as is, seconds; longer gaps are clamped and counted. Default 0.1.
    public var maximumStepSeconds = 0.1
    /// Offline smoother only: a magnetometer reading the gate accepted whose heading, seen with the
    /// smoothed attitude, disagrees with the smoothed heading by more than this many degrees is left
    /// out, and the recording smoothed again. The causal gate judges a reading before it knows what
    /// follows (the first readings of a magnet's approach pass it); the smoothed heading, within about
    /// a degree where the field is clean, can tell such readings apart from noise. Default 5: well
    /// above that error, so noise alone never removes a reading. 0 turns it off.
    public var smootherReadingToleranceDegrees = 5.0

    public init() {}
}
