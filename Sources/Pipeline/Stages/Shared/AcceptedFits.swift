import CompassCore
import WireFormat

/// Recognises a newly accepted calibration fit in the calibration/status stream: the status is
/// calibrated and its residual changed. Shared by the summary and report sinks.
struct AcceptedFits {
    private var lastResidual: Double?

    mutating func isNewFit(_ c: CalibrationStatusMessage) -> Bool {
        guard c.state == OnlineCalibrator.State.calibrated.rawValue, c.rmsResidual.isFinite,
            c.rmsResidual != lastResidual
        else { return false }
        lastResidual = c.rmsResidual
        return true
    }
}
