import CompassCore
import MessageBus
import WireFormat

/// What the engine knows of the readings' calibration, as a calibration stage would tell the fusion
/// stage. Without either call the readings are taken as they come and judged by the stage's check
/// for iron nobody removes (as `fusion-node replay --no-calibration` runs).
extension FusionEngine {
    /// The readings are calibrated already (by the device, or by the caller): the check for uncalibrated
    /// readings is off, as when a calibration stage speaks for them. Before the first sample.
    public func declareCalibrated() throws(FusionEngineError) {
        try takeCalibration(.uncalibrated, fieldStrengthMicrotesla: .nan, what: "declareCalibrated")
        calibration = nil
    }

    /// A calibration file (`fusion-node calibrate`'s) applied to every reading, as `fusion-node replay
    /// --calibration FILE` applies it without learning. Before the first sample.
    public func useCalibration(file path: String) throws(FusionEngineError) {
        let contents: CalibrationFile.Contents
        switch CalibrationFile.load(path) {
        case .success(let c): contents = c
        case .failure(let refusal): throw FusionEngineError(message: "calibration file \(path): \(refusal.reason)")
        }
        if contents.motorMicroteslaPerAmpere != nil || contents.magnetometerRotation != nil {
            throw FusionEngineError(
                message: "calibration file \(path): it holds a motor compensation or a magnetometer rotation, "
                    + "which the library does not apply; use fusion-node replay --calibration")
        }
        let c = contents.calibration
        try takeCalibration(c, fieldStrengthMicrotesla: c.fieldRadiusMicrotesla, what: "useCalibration")
    }

    /// Learn the calibration online from the readings, as `fusion-node replay` does by default: the
    /// calibration stage of its graph (online, no prompt) in front of the fusion stage. Before the first
    /// sample. The fusion stage reads a change of calibration once the next IMU sample is fused, as a
    /// replay reads it after the IMU sample its reading pairs with; a reading between two IMU samples (a
    /// magnetometer at its own rate) reaches the filter two IMU samples later than in a replay, which
    /// holds each IMU sample until the next arrives.
    public func learnCalibration() throws(FusionEngineError) {
        guard lastImuTime == -.infinity else {
            throw FusionEngineError(message: "learnCalibration: the calibration is set before the first sample")
        }
        // The replay graph's calibration stage (ProcessingGraphStages without a file).
        let settings = try Self.stageSettings(
            CalibrationStage.type, stage: "calibration", yaml: "online: true\nprompt: false", named: "calibration")
        calibrator = CalibrationStage(CalibrationStage.Settings.table.read(settings), log: { _ in })
    }

    /// A reading through the online calibrator: the calibrated field, microtesla (as the fusion stage
    /// gets it from the calibration stage: through tesla), and its status messages kept for the fusion
    /// stage.
    func learn(_ field: Vector3, header: RosHeader, with calibrator: CalibrationStage) -> Vector3 {
        let calibrated = calibrator.calibratedTesla(header, microtesla: field).map { $0 * 1e6 } ?? field
        calibrator.status(header, into: &statusFrames)
        return calibrated
    }

    /// The calibration stage's status messages since the last call, read by the fusion stage as the bus
    /// would hand them over.
    func deliverStatus() {
        for frame in statusFrames where frame.topic == PipelineTopics.calibrationStatus {
            if let c = try? CalibrationStatusMessage(cdrBytes: frame.payload) { stage.noteCalibration(c) }
        }
        statusFrames.removeAll(keepingCapacity: true)
    }

    func takeCalibration(_ c: MagnetometerCalibration, fieldStrengthMicrotesla: Double, what: String)
        throws(FusionEngineError)
    {
        guard lastImuTime == -.infinity else {
            throw FusionEngineError(message: "\(what): the calibration is set before the first sample")
        }
        calibration = c
        let w = c.softIronCorrection
        stage.noteCalibration(
            CalibrationStatusMessage(
                header: RosHeader(stamp: RosTime(sec: 0, nanosec: 0), frameId: Self.frameId),
                state: OnlineCalibrator.State.calibrated.rawValue, prompt: false, progress: 100, coverage: .nan,
                rmsResidual: .nan, fieldStrength: fieldStrengthMicrotesla, hardIron: c.hardIronOffsetMicrotesla,
                softIron: Covariance9([w.m00, w.m01, w.m02, w.m10, w.m11, w.m12, w.m20, w.m21, w.m22]),
                gyroBias: Vector3(.nan, .nan, .nan)))
    }
}
