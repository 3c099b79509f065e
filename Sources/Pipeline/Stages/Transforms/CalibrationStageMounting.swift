import CompassCore
import WireFormat
import MessageBus

/// Finding how the magnetometer is mounted against the IMU (`detect_rotation`): readings held back
/// until the rotation is clear, then learned from in the IMU's axes.
extension CalibrationStage {
    /// A raw reading (microtesla, magnetometer axes) for the mounting check; once the check is clear it
    /// stops (a mounting does not change while the stage runs).
    func checkMounting(_ measured: Vector3, time: Double) {
        guard mountingCheck != nil else { return }
        mountingCheck?.addReading(measured, time: time)
        guard let found = mountingCheck?.detected else { return }
        mountingCheck = nil
        guard !found.rotation.isIdentity else { return }
        mountingContradiction = found
        knownWrong += 1
        let name = found.rotation.description
        log(
            "calibration: at \(format(time, 2)) s the magnetometer's readings turn as if it were mounted \(found) "
                + "against the IMU: its heading is off by that turn, so it is reported unusable (bound 180 degrees). "
                + "Give its mounting (--mag-rotation \(name), or auto to find it; a mount stage or "
                + "detect_rotation in a pipeline)")
    }

    /// The mounting that turns a raw reading (tesla, magnetometer axes) into the IMU's axes; nil while it
    /// is still being found. The finder sees every plausible reading; once it is clear the mounting is
    /// applied (and never changed: a different answer later, against a loaded file, is reported, since
    /// the calibration was learned for the first).
    func mounting(_ header: RosHeader, _ field: Vector3) -> MountingRotation? {
        let t = header.stamp.seconds
        // Mutated where it is stored: a copy would copy its sums on every reading.
        if detector != nil, SampleValidator.isPlausible(fieldMicrotesla: field * 1e6) {
            let before = detector?.detected
            detector?.addReading(field * 1e6, time: t)
            if before == nil, let found = detector?.detected { mountingFound(found, at: t) }
        }
        return magnetometerRotation
    }

    func hold(_ field: Vector3, time: Double) {
        guard settings.online, SampleValidator.isPlausible(fieldMicrotesla: field) else { return }
        if held.count >= 2 * Self.heldReadingsLimit { held.removeFirst(held.count - Self.heldReadingsLimit) }
        held.append((field, time))
    }

    /// The held readings, turned into the IMU's axes, binned for the first fits. Not when the motors'
    /// field is being removed: the current that went with each reading is not kept.
    func learnFromHeld(_ rotation: MountingRotation) {
        defer { held = [] }
        guard online != nil, currentsReceived == 0, motor.coefficients == .zero else { return }
        for (field, time) in held.suffix(Self.heldReadingsLimit) {
            online?.addEarlier(rotation.apply(field), time: time)
        }
    }

    func mountingFound(_ found: MountingRotationDetector.Detection, at time: Double) {
        guard let loaded = magnetometerRotation else {
            magnetometerRotation = found.rotation
            rotationFound = found.description
            log("calibration: at \(format(time, 2)) s the magnetometer's mounting is \(found)")
            learnFromHeld(found.rotation)
            return
        }
        guard !contradictionLogged, loaded.matrix != found.rotation.matrix else { return }
        contradictionLogged = true
        log(
            "calibration: at \(format(time, 2)) s the motion says the magnetometer is mounted \(found), but "
                + "\(settings.file) was learned for \(loaded); still applying \(loaded): was the compass remounted? "
                + "Remove the file to start again")
    }

}
