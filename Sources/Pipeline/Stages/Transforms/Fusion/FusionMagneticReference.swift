import Foundation
import CompassCore
import WireFormat
import MessageBus

/// The magnetic reference the gate compares with (the World Magnetic Model at the site), true north, and
/// what a change of calibration tells the filter.
extension FusionStage {
    /// The World Magnetic Model's strength and dip at the site become the reference, once per site
    /// (a fix that moves by more than 0.1 degrees is a new site); an expected field given in the
    /// settings wins.
    func takeReference(at time: Double) {
        guard settings.expectedStrengthMicrotesla <= 0, let p = position,
            referenceSite.map({
                abs($0.latitudeDegrees - p.latitudeDegrees) > 0.1 || abs($0.longitudeDegrees - p.longitudeDegrees) > 0.1
            }) ?? true,
            let year = settings.decimalYear ?? decimalYear(unixSeconds: time),
            case .success(let e) = model.elements(at: p, decimalYear: year)
        else { return }
        referenceSite = p
        let strength = e.totalNanotesla / 1000
        filter.setMagneticReference(strengthMicrotesla: strength, dipDegrees: e.inclinationDegrees)
    }

    /// A calibration/status that changes the calibration becomes a notice to the filter: how far the
    /// change can have turned the compass is the change of the calibrated field (offset, and the
    /// soft-iron change times the radius) over the horizontal field at the reference dip.
    func noteCalibration(_ c: CalibrationStatusMessage) {
        calibrationCheck = nil  // a calibration stage speaks for the readings
        let applied = CalibrationShift.applied
        let calibrated = applied(c)
        let previous = calibration
        calibration = c
        let wasCalibrated = previous.map(applied) ?? false
        // A first status that is already calibrated (a file, fixed values) changed nothing. Later ones are
        // measured from the calibration the reference was last renewed for, so refinements that each
        // turn the compass a little renew it once their sum matters, and not at every refit.
        var shift = 0.0
        if let p = previous {
            let dip = gate.referenceDipDegrees ?? TypicalEarthField.dipDegrees
            guard
                CalibrationShift.radians(from: p, to: c, dipDegrees: dip) != nil
                    || CalibrationShift.learning(p) != CalibrationShift.learning(c)
            else { return }
            shift = CalibrationShift.radians(from: renewedFor ?? p, to: c, dipDegrees: dip) ?? 0
        }
        if calibrated != wasCalibrated || shift >= gate.settings.consistencyGateDegrees * radiansPerDegree {
            renewedFor = calibrated ? c : nil
        }
        let notice = MagnetometerCalibrationNotice(
            calibrated: calibrated, fieldStrengthMicrotesla: c.fieldStrength.isFinite ? c.fieldStrength : nil,
            headingShiftRadians: shift, learning: CalibrationShift.learning(c))
        filter.noteCalibration(notice)
    }

    /// Declination (degrees east) and true-north flags for a time.
    func trueNorth(at time: Double) -> (declination: Double, flags: UInt16) {
        guard let p = position else { return (.nan, HeadingMessage.flagNoPosition) }
        guard let year = settings.decimalYear ?? decimalYear(unixSeconds: time) else {
            return (.nan, HeadingMessage.flagModelOutOfRange)
        }
        switch model.elements(at: p, decimalYear: year) {
        case .success(let e): return (e.declinationDegrees, e.isInCautionZone ? HeadingMessage.flagModelCautionZone : 0)
        case .failure: return (.nan, HeadingMessage.flagModelOutOfRange)
        }
    }
}

/// How far a change of calibration can have turned a compass.
enum CalibrationShift {
    /// Whether a status says a calibration is applied (degraded: the accepted one still is, though new
    /// readings miss it).
    static func applied(_ m: CalibrationStatusMessage) -> Bool {
        m.state == OnlineCalibrator.State.calibrated.rawValue || m.state == OnlineCalibrator.State.degraded.rawValue
    }

    /// Whether a status says a calibration is being learned (collecting): nothing applied yet and nothing
    /// found wrong (a mounting the readings contradict is reported uncalibrated).
    static func learning(_ m: CalibrationStatusMessage) -> Bool {
        m.state == OnlineCalibrator.State.collecting.rawValue
    }

    /// How far the calibrated field can have moved, microtesla: the offset change plus the soft-iron
    /// change (Frobenius) times the radius.
    static func moved(from a: CalibrationStatusMessage, to c: CalibrationStatusMessage) -> Double {
        let radius = c.fieldStrength.isFinite ? c.fieldStrength : TypicalEarthField.strengthMicrotesla
        let softIronChange = zip(a.softIron.array, c.softIron.array).reduce(0.0) { $0 + ($1.0 - $1.1) * ($1.0 - $1.1) }
        return (a.hardIron - c.hardIron).norm + softIronChange.squareRoot() * radius
    }

    /// The heading change, radians, of a new calibration `c` after `p` (nil when nothing changed): the
    /// field's movement over the horizontal field at `dipDegrees`, at most pi.
    static func radians(from p: CalibrationStatusMessage, to c: CalibrationStatusMessage, dipDegrees: Double) -> Double?
    {
        let sameStrength = p.fieldStrength == c.fieldStrength || (p.fieldStrength.isNaN && c.fieldStrength.isNaN)
        let distance = moved(from: p, to: c)
        if applied(p) == applied(c) && !(distance > 1e-9) && sameStrength { return nil }
        let radius = c.fieldStrength.isFinite ? c.fieldStrength : TypicalEarthField.strengthMicrotesla
        let horizontal = max(radius * cos(dipDegrees * radiansPerDegree), 1e-3)
        return distance.isFinite ? min(Double.pi, distance / horizontal) : .pi
    }
}
