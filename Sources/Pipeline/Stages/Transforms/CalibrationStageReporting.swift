import CompassCore
import WireFormat
import MessageBus

/// What the calibration stage tells: the file it saves, calibration/status, and the summary.
extension CalibrationStage {
    func save(_ fit: CalibrationFit) {
        guard !settings.file.isEmpty else { return }
        do {
            try CalibrationFile.save(
                fit, motor: motor.coefficients == .zero ? nil : motor.coefficients, rotation: magnetometerRotation,
                rotationFound: rotationFound, magnetometer: settings.magnetometer, to: settings.file)
            savedResidual = fit.rmsResidualMicrotesla
        } catch {
            // Said once; counted, and the run reports the loss (the file does not hold what was learned).
            if saveFailures == 0 { log("calibration: cannot save \(settings.file): \(error)") }
            saveFailures += 1
            lastSaveFailure = "\(error)"
        }
    }

    func status(_ header: RosHeader, into output: inout [WireFrame], force: Bool = false) {
        // The motors' field per ampere, whenever it changes once currents arrive (the report shows it
        // with the share of the field it explains).
        if currentsReceived > 0, motor.coefficients != sentMotorCoefficients {
            sentMotorCoefficients = motor.coefficients
            output.append(
                cdrFrame(Vector3StampedMessage(header: header, vector: motor.coefficients), topic: motorTopic))
        }
        let learned = online?.state ?? (settings.fixed == Self.identity ? .uncalibrated : .calibrated)
        // A magnetometer mounted otherwise than the readings are taken: no calibration makes it right.
        let state = mountingContradiction == nil ? learned : .uncalibrated
        let prompt = settings.prompt && (online?.needsMotion ?? false)
        let due = throttle.due(
            StatusState(state: state, prompt: prompt, fits: refitsAccepted), at: header.stamp.seconds, force: force)
        guard due else {
            return
        }
        let fit = online?.fit
        let c = current
        let w = c.softIronCorrection
        let message = CalibrationStatusMessage(
            header: header, state: state.rawValue, prompt: prompt, progress: online?.progressPercent ?? 100,
            coverage: online?.coverage ?? .nan, rmsResidual: fit?.rmsResidualMicrotesla ?? .nan,
            fieldStrength: fit?.calibration.fieldRadiusMicrotesla ?? .nan, hardIron: c.hardIronOffsetMicrotesla,
            softIron: Covariance9([w.m00, w.m01, w.m02, w.m10, w.m11, w.m12, w.m20, w.m21, w.m22]),
            gyroBias: Vector3(.nan, .nan, .nan))
        output.append(cdrFrame(message, topic: statusTopic))
    }

    func finish() throws -> [WireFrame] {
        if implausible > 0 {
            notes.append("\(implausible) implausible reading(s) passed on without learning from them")
        }
        if saveFailures > 0 {
            notes.append(
                "\(saveFailures) save(s) of \(settings.file) failed (the last: \(lastSaveFailure)): it does not hold "
                    + "the calibration learned")
            losses += saveFailures
        }
        if currentsReceived > 0 {
            let k = motor.coefficients, u = motor.uncertainty
            let how =
                motor.learned
                ? "learned from \(motor.windowsAccepted) window(s), +- \(format(max(u.x, u.y, u.z), 3)) uT/A"
                : motor.settings.learn
                    ? "not learned yet (\(motor.windowsAccepted) window(s) accepted, \(motor.windowsRefused) refused); "
                        + "applied as given" : "fixed"
            notes.append(
                "motors' field \(format(k.x, 3)), \(format(k.y, 3)), \(format(k.z, 3)) uT/A from \(currentsReceived) "
                    + "current reading(s), \(how)")
            if motorWithheld > 0 {
                notes.append(
                    "\(motorWithheld) magnetometer reading(s) held back until the motors' field was learned"
                        + (motor.learned
                            ? "" : " (not learned within \(format(Self.motorHoldSeconds, 0)) s: then passed on)"))
            }
        } else if motor.coefficients != .zero {
            notes.append("motor_ut_per_a is set but no current arrived on \(PipelineTopics.motorCurrent)")
        }
        if let d = detector {
            let counted =
                "\(d.windowsCounted) window(s) counted, \(d.windowsStill) with too little turning, "
                + "\(d.windowsDisturbed) disturbed"
            if let found = d.detected {
                notes.append("magnetometer mounting found: \(found) (\(counted))")
            } else {
                let standing = d.standing.map {
                    "; best so far \(d.candidates[$0.best]), \(format($0.ratio, 1)) x better than "
                        + "\(d.candidates[$0.runnerUp]) (needs \(format(d.settings.margin, 0)) x)"
                }
                notes.append("magnetometer mounting undetermined: \(counted)\(standing ?? "")")
            }
        }
        if let loaded = magnetometerRotation, detector?.detected == nil || contradictionLogged {
            notes.append(
                "applied the magnetometer mounting in \(settings.file): \(loaded)"
                    + (contradictionLogged ? " (the motion says otherwise: was the compass remounted?)" : ""))
        }
        if let found = mountingContradiction {
            let how = found.ratio > 100 ? "clearly" : "\(format(found.ratio, 1)) x better than \(found.runnerUp)"
            notes.append(
                "the magnetometer's readings turn as if it were mounted \(found.rotation) against the IMU (\(how)): "
                    + "reported uncalibrated from then on; give --mag-rotation \(found.rotation) (or auto)")
        }
        if withheld > 0 {
            notes.append(
                "\(withheld) magnetometer reading(s) held back until the mounting was clear"
                    + (magnetometerRotation == nil ? " (all of them: it never was)" : ""))
        }
        if let o = online { notes += onlineNotes(o) }
        return []
    }

    /// What the online calibrator says at the end: its state, the fit in force, or why none was accepted.
    func onlineNotes(_ o: OnlineCalibrator) -> [String] {
        var out = [
            "calibration \(o.state) (progress \(format(o.progressPercent, 0)) %), \(refitsAccepted) fit(s) accepted"
                + (o.gyroAidedFits > 0 ? " (\(o.gyroAidedFits) gyro-aided)" : "")
                + (o.gravityAidedFits > 0 ? " (\(o.gravityAidedFits) gravity-aided)" : "")
        ]
        if let fit = o.fit {
            // The one line a fleet's health reads: the hard iron at the end of a recording.
            let h = fit.calibration.hardIronOffsetMicrotesla
            out.append(
                "in force at the end: \(article(fit.model)) \(fit.model.rawValue) fit, offset \(format(h.x, 2)), "
                    + "\(format(h.y, 2)), \(format(h.z, 2)) uT, field "
                    + "\(format(fit.calibration.fieldRadiusMicrotesla, 2)) uT, "
                    + "rms \(format(fit.rmsResidualMicrotesla, 2)) uT")
        }
        if refitsAccepted == 0 {
            let needed = format(o.settings.gyroAided.minimumRotationSpread, 2)
            let window = format(o.settings.gyroAided.windowSeconds, 0)
            out.append(
                StageReport.noCalibrationFitPrefix
                    + "the gyro-aided fit's windows turned with a spread of at most "
                    + "\(format(o.largestRotationSpread, 3)) (it needs \(needed): turning about two axes or "
                    + "more, about 30 degrees each way, within \(window) s), and the sphere fit needs "
                    + "\(format(100 * o.settings.minimumCoverage, 0)) % of the directions within "
                    + "\(format(o.settings.maximumReadingAgeSeconds, 0)) s")
        }
        return out
    }
}
