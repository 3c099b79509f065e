/// Parameters of `MagneticDisturbanceGate`.
public struct MagneticGateSettings: Sendable, Equatable {
    /// Reference field strength, microtesla; nil learns it from the first second of readings (give the
    /// World Magnetic Model's value when the position is known).
    public var referenceFieldMicrotesla: Double? = nil
    /// Reference dip, degrees below the horizon; nil learns it like the strength.
    public var referenceDipDegrees: Double? = nil
    /// Seconds of readings averaged to learn a missing reference. Default 1.
    public var learningSeconds = 1.0
    /// Allowed relative strength deviation from the reference. Default 0.1.
    public var strengthTolerance = 0.1
    /// Allowed dip deviation from the reference, degrees. Default 5.
    public var dipToleranceDegrees = 5.0
    /// Time constant of the low-pass applied to strength and dip before they are compared with the
    /// reference, seconds: per-sample magnetometer noise must not look like interference. Default 0.25.
    public var checkLowPassSeconds = 0.25
    /// Time constant of the short average of compass-minus-gyro heading, seconds. Default 2.
    public var consistencyLowPassSeconds = 2.0
    /// Time constant of the baseline that short average is compared with, seconds: slow gyro drift
    /// moves the baseline along, a disturbance moves the short average away from it. Frozen while
    /// the magnetometer is rejected. Default 10.
    public var consistencyBaselineSeconds = 10.0
    /// The short average may leave the baseline by at most max(this, 3 sigma) degrees, plus the
    /// scale-error allowance below. Default 4.
    public var consistencyGateDegrees = 4.0
    /// Bound on the gyro's relative rate error (scale factor and misalignment): the consistency gate
    /// widens by this fraction of the angle turned since the last accepted reading, since after a
    /// long fast motion the gyro-carried heading may have drifted that far. Default 0.005.
    public var gyroScaleErrorBound = 0.005
    /// How long every check must pass before a rejected magnetometer is used again, s. Default 0.5.
    public var recoverySeconds = 0.5
    /// A steady field whose strength or dip differs from the reference becomes the new reference after
    /// this many seconds. Default 20.
    public var newFieldSeconds = 20.0
    /// For this long after the heading check starts, seconds, its baseline may itself be wrong: the
    /// heading was set from the first readings, which a vehicle accelerating as the filter starts tilts
    /// by degrees (at a dip of 67 degrees each degree of tilt is 2.4 of heading), or which steel beside
    /// the start bends. Three of the baseline's time constants: a vehicle's first acceleration (up to
    /// 10 s) and the low-passed force's settling after it. 0 = no such allowance. Default 30.
    public var startupSeconds = 30.0
    /// Within `startupSeconds`, a compass that fails the heading check alone (strength and dip pass) with
    /// a steady offset, within half the check's floor, for this long, seconds, becomes the new baseline:
    /// the start's heading was wrong, not the field. More than twice the short average's time constant.
    /// Default 5.
    public var startupAdoptionSeconds = 5.0
    /// Time constant, seconds, of the strength and dip average a new field is judged steady on while the
    /// reference was learned from the readings (not given, not a calibration's): a device swung or
    /// carried by a walker sees a field that swings by 10-20 % with each step or swing (about 1 s), and
    /// one second of learning can land anywhere in that swing. Three such cycles. Default 3.
    public var learnedFieldAverageSeconds = 3.0

    /// Time constant, seconds, of the average of accepted readings' strength (low-passed as the
    /// check's) and of the mean square of their departures from it: how much the field varies from
    /// place to place where the device is carried, which turns the heading by as much as it changes the
    /// strength (`strengthScatter`). Half a minute: the span a calibration's readings cover. Default 30.
    public var strengthScatterSeconds = 30.0

    public init() {}
}
