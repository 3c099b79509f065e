/// Parameters of `OnlineCalibrator`.
public struct OnlineCalibrationSettings: Sendable, Equatable {
    /// Readings kept per direction bin (32 bins over the sphere); older ones are replaced. Default 8.
    public var readingsPerBin = 8
    /// Fraction of the 32 direction bins that must hold readings before a fit is tried. Default 0.6.
    public var minimumCoverage = 0.6
    /// Coverage from which the ellipsoid (soft-iron) fit is tried instead of the sphere alone. Default 0.8.
    public var ellipsoidCoverage = 0.8
    /// A fit is accepted only when its RMS residual is at most this, microtesla. Default 2.
    public var maximumResidualMicrotesla = 2.0
    /// Plausible field strengths, microtesla (the earth's field is 22-67 uT everywhere). Default 20...70.
    public var plausibleRadiusMicrotesla: ClosedRange<Double> = 20...70
    /// Readings older than this are not used, seconds: a fit describes the sensor as it is now (a magnet
    /// attached or removed changes it). Default 30.
    public var maximumReadingAgeSeconds = 30.0
    /// Seconds between fit attempts. Default 0.5.
    public var refitSeconds = 0.5
    /// The calibration is declared degraded when new readings miss its sphere by more than
    /// max(this, 3 x the fit's RMS) microtesla on average for `degradedSeconds`. Default 3.
    public var degradedResidualMicrotesla = 3.0
    /// See `degradedResidualMicrotesla`. Default 5.
    public var degradedSeconds = 5.0
    /// The gyro-aided hard-iron fit, tried while no calibration is accepted or the readings miss the
    /// current one (see `degradedResidualMicrotesla`).
    public var gyroAided = GyroAidedFitSettings()
    /// A new hard iron leaves the earth's field as it was: a gyro-aided fit whose field strength
    /// differs from the accepted calibration's radius by more than this fraction is an external
    /// disturbance, not a new hard iron. Default 0.1 (the gate's strength tolerance).
    public var maximumStrengthChange = 0.1
    /// Likewise for the dip against the dip seen with the accepted calibration, degrees. Default 5.
    public var maximumDipChangeDegrees = 5.0
    /// A gyro-aided fit is accepted only when its RMS residual per axis is at most this, microtesla:
    /// about twice the per-axis noise of a consumer magnetometer (0.6 uT measured at rest on the
    /// BROAD sensor), leaving room for a degree of gyro integration error. Fast turning (a gyro scale
    /// error) and a field that changes with position both raise it. Default 1.25.
    public var maximumGyroAidedResidualMicrotesla = 1.25
    /// While the sensor's own iron dominates the raw readings (their strength over twice the strongest
    /// earth field, `plausibleRadiusMicrotesla`: a phone's hard iron of hundreds of microtesla), no
    /// calibration is known to be wrong, and a gyro-aided fit is held to looser limits: its RMS residual
    /// per axis (and the recent readings' miss of its sphere) at most this, microtesla. The offset-only
    /// model leaves a phone's soft iron (its field stretched 5-15 % along one axis: 1-3 uT at 42 uT) in
    /// the residual, with a hand's sway. Default 2.5.
    public var firstFitResidualMicrotesla = 2.5
    /// Likewise, the windows of the last `maximumReadingAgeSeconds` are solved together
    /// (`GyroAidedWindows`), and their rotation spread together (`GyroAidedFitSettings`'s measure, per
    /// reading) must be at least this: 0.01 is about 6 degrees RMS of turning about every axis, what a
    /// hand holding a phone or a pocket swinging with a leg gives; with a few hundred readings the
    /// offset along the least-turned axis is then known to about a microtesla. Default 0.01.
    public var firstFitRotationSpread = 0.01
    /// The windows' length while the sensor's iron dominates the raw readings, seconds: a raw
    /// phone gyro's bias of 5 deg/s turns a window's rotations by 10 degrees over 2 s (20 over 4), and
    /// windows are solved together, so short ones lose no turning. Default 2.
    public var firstFitWindowSeconds = 2.0
    /// What a gyro-aided offset can resolve, microtesla (its error on real recordings is about 1 uT;
    /// 2 uT turn the heading by 7 degrees at a 16 uT horizontal field). A first gyro-aided fit whose
    /// offset is smaller finds the readings calibrated already and applies none; a sphere or
    /// ellipsoid fit whose offset differs from the latest gyro-aided one by more is refused (fitted to
    /// part of the sphere it can wander, the gyro-aided one cannot). Default 2.
    public var maximumOffsetDisagreementMicrotesla = 2.0
    /// Gyro-aided windows averaged after a new hard iron. Default 8.
    public var gyroAidedRefinements = 8
    /// The gravity-aided fit (`GravityAidedHardIronFit`), tried while the readings cover too little of
    /// the sphere for the sphere and ellipsoid fits (a device turned about the vertical).
    public var gravityAided = GravityAidedFitSettings()
    /// Largest ratio of the soft-iron correction's eigenvalues a fit may have: the soft iron of a phone's
    /// or a robot's own parts stretches the field by a few percent, by a fifth either way at most (1.2
    /// against 0.85: 1.4); a correction that stretches one axis by more than 1.6 times another is an
    /// ellipsoid fitted to too little of the sphere (or to a field fixed in the world), not soft iron
    /// (such fits on the simulator's walker reach 2.9 to 3.9). Default 1.6.
    public var maximumSoftIronAnisotropy = 1.6
    /// A fit replaces the calibration in force (or none) only when it explains the same readings with
    /// at most this share of that calibration's RMS residual (each given its own best field strength):
    /// evidence that it is better, not a description of other readings. Default 0.9.
    public var requiredResidualRatio = 0.9
    /// A refit replaces an accepted calibration only with an RMS residual within this multiple of the
    /// readings' noise (`OnlineCalibrator.strengthNoise`) or within the accepted fit's own. Default 1.5.
    public var noiseMultiple = 1.5
    public init() {}
}
