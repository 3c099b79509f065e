/// What the owner of the magnetometer calibration tells a filter when the calibration applied to the
/// readings it receives changes. The filter's magnetic reference, its disturbance gate and its
/// heading uncertainty follow from it (see `KalmanFilter.noteCalibration(_:)`).
public struct MagnetometerCalibrationNotice: Sendable, Equatable {
    /// True when an accepted calibration is applied to the readings; false while none is, so a
    /// heading taken from them can be off by any angle.
    public var calibrated: Bool
    /// Strength of the calibrated field (the fit's radius), microtesla; nil when not known.
    public var fieldStrengthMicrotesla: Double?
    /// How far the change can have turned the compass heading, rad, in [0, pi]: the change of the
    /// calibrated field over its horizontal part (pi when nothing bounds it).
    public var headingShiftRadians: Double

    /// True while no calibration is applied only because one is still being learned: nothing says the
    /// readings are wrong (a mounting they contradict, iron found that nothing removes), so what they
    /// show as the device turns may bound the heading (`UncalibratedHeadingEvidence`).
    public var learning: Bool

    public init(
        calibrated: Bool, fieldStrengthMicrotesla: Double?, headingShiftRadians: Double, learning: Bool = false
    ) {
        self.calibrated = calibrated
        self.learning = learning
        self.fieldStrengthMicrotesla = fieldStrengthMicrotesla
        self.headingShiftRadians = min(Double.pi, max(0, headingShiftRadians))
    }

    /// 95 % bound reported while no calibration is applied, degrees: any heading is possible.
    public static let uncalibratedBoundDegrees = 180.0

    /// The variance whose 95 % bound (1.96 sigma) is `uncalibratedBoundDegrees`, degrees^2.
    public static let uncalibratedVarianceDegrees2 =
        (uncalibratedBoundDegrees / 1.96) * (uncalibratedBoundDegrees / 1.96)

    /// A filter's own heading variance as reported, degrees^2: while no calibration is applied, the
    /// state's plus that of the bound the uncalibrated readings allow (`uncalibratedBoundRadians`, pi
    /// when nothing bounds them: at least the 180-degree bound's). It is the filter's own part (the
    /// disturbance parts add to it), so the accuracy parts add up to the reported bound.
    @inline(__always)
    static func ownVarianceDegrees2(_ varianceDegrees2: Double, uncalibratedBoundRadians: Double?) -> Double {
        guard let bound = uncalibratedBoundRadians else { return varianceDegrees2 }
        if bound >= .pi { return max(varianceDegrees2, uncalibratedVarianceDegrees2) }
        let sigma = bound * degreesPerRadian / 1.96
        return varianceDegrees2 + sigma * sigma
    }
}
