/// What every filter keeps of its primary magnetometer besides its own math: the disturbance gate
/// (the one verdict on each reading, and the magnetic reference), whether a calibration is applied
/// to the readings and, while none is, what they show of how far the compass can be off, and the
/// unseen-disturbance part of the reported accuracy. The Kalman and the complementary filter share it,
/// so a change to how a reading is judged or how a calibration is followed is made once.
public struct MagnetometerFrontEnd: Sendable {
    /// The disturbance gate: the verdict on each reading, and the reference strength and dip.
    public internal(set) var gate: MagneticDisturbanceGate
    /// True while the calibration owner says no calibration is applied to the readings.
    public internal(set) var uncalibrated = false
    /// While they are uncalibrated, what the readings show of how far the compass can be off.
    public internal(set) var uncalibratedEvidence = UncalibratedHeadingEvidence()
    /// Whether that evidence may bound the heading (see `MagnetometerCalibrationNotice.learning`).
    var uncalibratedButLearning = false
    /// The unseen disturbance's heading variance at the gate's reference dip (60 degrees until known),
    /// for the share of it turning has not exposed.
    var unseen = UnseenDisturbance.Variance()
    /// The heading variance of the field's variation from place to place (the gate's `strengthScatter`
    /// at the reference dip), degrees^2, and the mean square and dip it was computed for (an arctangent
    /// per sample would cost about 10 %).
    var scatterDegrees2 = 0.0, strengthScatterDegrees2 = 0.0
    var scatterComputedFor = (squared: 0.0, dip: Double.nan)

    init(gate settings: MagneticGateSettings) {
        gate = MagneticDisturbanceGate(settings: settings)
    }

    /// True for a reading no calibration corrects whose strength is no earth strength (a phone's raw
    /// field, hundreds of microtesla of its own iron): its direction is the sensor's iron, which turns
    /// with the device, so as a compass it would say the device never turns, and the gyro's turning
    /// would be taken for bias. Such a reading never corrects the heading.
    @inline(__always)
    func cannotBeEarthField(strengthMicrotesla: Double) -> Bool {
        uncalibrated && !TypicalEarthField.plausibleStrengthMicrotesla.contains(strengthMicrotesla)
    }

    /// Sets the reference the gate compares strength and dip with; the turns seen so far no longer
    /// tell about the unseen disturbance. The caller refreshes the unseen variance.
    mutating func setReference(strengthMicrotesla: Double, dipDegrees: Double) {
        gate.setReference(strengthMicrotesla: strengthMicrotesla, dipDegrees: dipDegrees)
        unseen.forgetTurns()
    }

    /// Follows a change of the calibration applied to the readings. Returns nil while none is applied;
    /// otherwise whether the gate took it as a renewal (not a refinement), after which the filter
    /// widens its heading by as far as the change can have turned the compass. The caller refreshes
    /// the unseen variance.
    mutating func noteCalibration(_ notice: MagnetometerCalibrationNotice) -> Bool? {
        if notice.calibrated || !uncalibrated { uncalibratedEvidence.reset() }
        uncalibrated = !notice.calibrated
        uncalibratedButLearning = notice.learning
        guard notice.calibrated else { return nil }
        let renewed = gate.follow(notice)
        unseen.forgetTurns()
        return renewed
    }

    /// After a filter restarts: the calibration state stays what its owner last said.
    mutating func keepCalibrationState(of previous: MagnetometerFrontEnd) {
        uncalibrated = previous.uncalibrated
        uncalibratedEvidence = previous.uncalibratedEvidence
        uncalibratedButLearning = previous.uncalibratedButLearning
    }

    /// Recomputes the unseen variance for `fraction` (the filter's `unseenDisturbanceFraction`, 0
    /// without a magnetometer) at the gate's reference dip.
    @inline(__always)
    mutating func refreshUnseenVariance(fraction: Double) {
        let dip = gate.referenceDipDegrees ?? TypicalEarthField.dipDegrees
        unseen.refresh(fraction: fraction, dipDegrees: dip)
        let squared = fraction > 0 ? gate.strengthScatterSquared : 0
        if abs(squared - scatterComputedFor.squared) > 0.05 * scatterComputedFor.squared
            || dip != scatterComputedFor.dip
        {
            scatterComputedFor = (squared, dip)
            let sigma = UnseenDisturbance.headingSigmaDegrees(fraction: squared.squareRoot(), dipDegrees: dip)
            strengthScatterDegrees2 = sigma * sigma
        }
        let innovation = fraction > 0 ? gate.innovationSquared * degreesPerRadian * degreesPerRadian : 0
        scatterDegrees2 = max(strengthScatterDegrees2, innovation)
    }

    /// The filter's own heading variance, degrees^2, with the field's variation from place to place
    /// (`scatterDegrees2`), widened while no calibration is applied by as far as the uncalibrated
    /// readings can turn the compass (`eastRow`: the orientation matrix's first row, evaluated only then).
    @inline(__always)
    func ownVarianceDegrees2(_ filterVarianceDegrees2: Double, eastRow: @autoclosure () -> Vector3) -> Double {
        // The compass the filter follows is off by the field's variation where the device is.
        MagnetometerCalibrationNotice.ownVarianceDegrees2(
            filterVarianceDegrees2 + scatterDegrees2,
            uncalibratedBoundRadians: !uncalibrated
                ? nil : uncalibratedButLearning ? uncalibratedEvidence.headingBoundRadians(eastRow: eastRow()) : .pi)
    }

    /// Where the reported heading accuracy comes from, given the filter's own variance (degrees^2).
    func accuracyParts(ownVarianceDegrees2: Double) -> HeadingAccuracyParts {
        unseen.accuracyParts(filterSigmaDegrees: ownVarianceDegrees2.squareRoot(), eastRow: unseen.followedEastRow)
    }
}

/// A magnetometer reading in the earth frame (ENU, y = magnetic north), as the gates read it: its
/// strength, dip and heading innovation. Nil when the field has no horizontal part to speak of (a
/// thousandth of its strength): no heading then.
struct EarthFieldReading {
    /// The reading turned into the earth frame by the filter's orientation, microtesla.
    let earth: Vector3
    let strengthMicrotesla: Double
    let horizontalMicrotesla: Double

    @inline(__always)
    init?(earth: Vector3, strengthMicrotesla: Double) {
        let horizontal = (earth.x * earth.x + earth.y * earth.y).squareRoot()
        guard horizontal > 1e-3 * strengthMicrotesla else { return nil }
        self.earth = earth
        self.strengthMicrotesla = strengthMicrotesla
        horizontalMicrotesla = horizontal
    }

    /// Degrees below the horizon.
    var dipDegrees: Double { approximateAtan2(-earth.z, horizontalMicrotesla) * degreesPerRadian }

    /// The clockwise angle of the horizontal field from +y, rad: the earth-frame heading error about z.
    var headingInnovation: Double { atan2Small(earth.x, earth.y) }
}
