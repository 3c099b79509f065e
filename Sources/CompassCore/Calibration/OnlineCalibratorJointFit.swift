/// The joint gyro-aided fit (`GyroAidedWindows`), used while the sensor's own iron dominates the raw
/// readings: a phone's hard iron of hundreds of microtesla, learned from a person's first seconds of
/// handling and refined as the motion goes on.
extension OnlineCalibrator {
    /// True when the recent raw readings' median strength is more than twice the strongest earth field
    /// (`plausibleRadiusMicrotesla`): an offset several times the field, so the readings' direction is
    /// the sensor's own iron far more than the earth's, and uncalibrated they say nothing of the
    /// heading. An offset-only fit, whatever soft iron it leaves, is then far better than none; with a
    /// smaller offset the sphere and ellipsoid fits, which see soft iron, stay the first.
    var rawStrengthIronDominated: Bool {
        let strengths = recentReadings.map(\.norm)
        guard !strengths.isEmpty else { return false }
        return finiteMedian(strengths) > 2 * settings.plausibleRadiusMicrotesla.upperBound
    }

    /// True while the gyro-aided windows are solved together: the sensor's iron dominates the raw
    /// readings, and no calibration is in force or the one in force is the joint fit's own.
    var jointly: Bool { ironDominates && (calibration == nil || refinesJointly) }

    /// The windows of the last `maximumReadingAgeSeconds` solved together, accepted when they explain
    /// the readings within `firstFitResidualMicrotesla`, agree on the field strength, turned enough
    /// together, and (a first fit) the recent readings lie on its sphere as closely; a refinement is
    /// accepted once the offset has moved by a microtesla (a degree and a half of heading at a
    /// horizontal field of 40 uT).
    mutating func tryJointGyroAidedFit() -> CalibrationFit? {
        gyroWindows.removeWindows(endingBefore: latestTime - settings.maximumReadingAgeSeconds)
        guard gyroWindows.windows.count >= 2,
            let s = gyroWindows.solve(
                maximumResidual: settings.firstFitResidualMicrotesla,
                strengthTolerance: settings.maximumStrengthChange,
                plausibleStrength: settings.plausibleRadiusMicrotesla, minimumSpread: settings.firstFitRotationSpread),
            s.windowCount >= 2
        else { return nil }
        let softIron = calibration?.softIronCorrection ?? .identity
        guard let inverse = softIron.inverse else { return nil }
        let offset = inverse * s.correctedOffset
        if let current = calibration {
            guard (offset - current.hardIronOffsetMicrotesla).norm >= 1 else { return nil }
        } else if let miss = recentSphereMiss(offset: offset, radius: s.strengthMicrotesla),
            miss > settings.maximumStrengthChange * s.strengthMicrotesla
        {
            return nil
        }
        let accepted = MagnetometerCalibration(
            hardIronOffsetMicrotesla: offset, softIronCorrection: softIron, fieldRadiusMicrotesla: s.strengthMicrotesla)
        let result = acceptGyroAided(accepted, rms: s.rmsResidualMicrotesla, readings: s.readingCount)
        jointFitInForce = true
        gyroBiasEstimate = s.gyroBiasRadiansPerSecond
        return result
    }

    /// Puts a gyro-aided calibration in force. A sphere or ellipsoid fit is held to its offset only
    /// when the caller says so (`gyroAidedOffset`): a joint fit's, a phone's first, is not that sure.
    mutating func acceptGyroAided(_ accepted: MagnetometerCalibration, rms: Double, readings: Int) -> CalibrationFit {
        let result = CalibrationFit(
            model: .gyroAided, calibration: accepted, rmsResidualMicrotesla: rms,
            meanResultantLength: .nan, directionCoverage: .nan, readingCount: readings)
        calibration = accepted
        fit = result
        state = .calibrated
        residualLowPass = 0
        degradedSince = nil
        misfitting = false
        gyroAidedFits += 1
        gyroAidedOffset = nil
        return result
    }
}
