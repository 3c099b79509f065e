import Foundation
import CompassCore
import WireFormat
import MessageBus

/// The check of readings no calibration stage speaks for (`CalibrationCheck`), and what follows a finding.
extension FusionStage {
    func check(_ pair: (imu: ImuSample, magnetometer: MagnetometerSample?)) {
        guard calibrationCheck != nil else { return }
        let i = pair.imu
        calibrationCheck!.addMotion(rate: i.angularVelocity, specificForce: i.specificForce, time: i.timestamp)
        guard let m = pair.magnetometer, let found = calibrationCheck!.add(m.fieldMicrotesla, time: m.timestamp)
        else { return }
        calibrationFinding = found
        // The smoother's headings come at the end: judged wrong at once. The filter's are compared with
        // the corrected readings first: its gate may have kept the iron out all along.
        if settings.smooth { declareUnusable(found, at: m.timestamp, off: nil) }
    }

    /// After a finding: the filter's heading against the readings corrected by the correction found (the
    /// corrected field turned into the earth frame by the filter's orientation points north when the
    /// heading is right). A disagreement beyond `CalibrationCheckSettings.maximumDisagreementDegrees`
    /// over 10 s makes the heading unusable; agreement means the gate keeps the iron out.
    func compareWithCorrected(_ o: FusionOutput, field: Vector3?) {
        // A check that ended (the heading declared unusable, or a calibration stage spoke) compares no more.
        guard let found = calibrationFinding, let field, let check = calibrationCheck,
            let correction = check.latestCorrection
        else { return }
        let w = o.orientation.rotate(correction.apply(field))
        guard (w.x * w.x + w.y * w.y).squareRoot() > 1 else { return }
        let off = atan2(w.x, w.y)
        // About 10 s at 100 Hz: a strong field close to the sensor (a magnet at 2 cm) scatters the corrected
        // headings by 10 degrees from one reading to the next.
        let alpha = 0.001
        correctedDisagreement.sin += (sin(off) - correctedDisagreement.sin) * alpha
        correctedDisagreement.cos += (cos(off) - correctedDisagreement.cos) * alpha
        correctedDisagreement.count += 1
        let mean = atan2(correctedDisagreement.sin, correctedDisagreement.cos) * degreesPerRadian
        if correctedDisagreement.count >= 500 && abs(mean) > check.settings.maximumDisagreementDegrees {
            declareUnusable(found, at: o.timestamp, off: mean)
        }
    }

    func declareUnusable(_ found: CalibrationCheck.Finding, at time: Double, off: Double?) {
        headingDeclaredUnusable = true
        calibrationCheck = nil
        knownWrong += 1
        let o = found.fit.calibration.hardIronOffsetMicrotesla
        let how =
            off.map { "the heading is \(format(abs($0), 0)) degrees off the corrected readings" }
            ?? "its heading is off by up to \(format(found.headingShiftDegrees, 0)) degrees"
        log(
            "fusion: at \(format(time, 2)) s: the magnetometer's readings, which nothing calibrates, show "
                + "\(Self.describe(found)); \(how), so it is reported unusable (bound 180). Calibrate it: drop "
                + "--no-calibration (or add a calibration stage), or fusion-node calibrate; hard iron "
                + "\(format(o.x, 1)), \(format(o.y, 1)), \(format(o.z, 1)) uT")
        let notice = MagnetometerCalibrationNotice(
            calibrated: false, fieldStrengthMicrotesla: nil, headingShiftRadians: 0)
        filter.noteCalibration(notice)
    }

    static func describe(_ f: CalibrationCheck.Finding) -> String {
        let o = f.fit.calibration.hardIronOffsetMicrotesla
        let iron = f.fit.calibration.softIronCorrection == .identity ? "hard iron" : "hard and soft iron"
        return "\(format(o.norm, 1)) uT of \(iron) (a \(f.fit.model.rawValue) fit, rms "
            + "\(format(f.fit.rmsResidualMicrotesla, 2)) uT)"
    }
}
