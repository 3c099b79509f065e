import CompassCore
import WireFormat
import MessageBus

/// Magnetometer calibration as a stage: fixed, or learned online from normal motion
/// (`OnlineCalibrator`, with the gyro's help for a new hard iron), persisted to a file; publishes
/// calibration/status (progress, fit quality, the figure-eight prompt) on every accepted fit, so
/// fusion renews its magnetic reference with it. It owns the calibration and nothing else: the gyro
/// passes through untouched (its bias is a state of the fusion filter).
final class CalibrationStage: StageLogic, InPlaceTransform, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// Fixed calibration: hard-iron offset subtracted, microtesla, then the soft-iron matrix applied.
        var hardIronMicrotesla = Vector3.zero
        var softIron = Matrix3.identity
        /// Learn hard and soft iron from normal motion (the fixed values are the start).
        var online = false
        /// Calibration file: loaded at start, saved (atomically) when a better calibration is accepted.
        var file = ""
        /// Allow the status to ask for the figure-eight motion.
        var prompt = true
        /// Publish calibration/status this often (stream seconds), and on every change.
        var statusSeconds = 1.0
        /// The field the motors add per ampere drawn (motor/current), microtesla per ampere: fixed, or
        /// the start when learning.
        var motorMicroteslaPerAmpere = Vector3.zero
        /// With `online`, learn those coefficients while the current varies.
        var learnMotor = true
        /// Find the magnetometer's mounting against the IMU from motion (`MountingRotationDetector`).
        var detectRotation = false
        /// Which magnetometer: "" = the primary (imu/mag), NAME = imu/mag/NAME (its status then on
        /// calibration/status/NAME).
        var magnetometer = ""

        static let table = SettingTable<Settings>([
            .vector(
                "hard_iron_ut", \.hardIronMicrotesla, unit: "uT", range: -5000...5000,
                "fixed hard-iron offset subtracted from the field"),
            .matrix("soft_iron", \.softIron, range: -100...100, "fixed row-major matrix applied after the offset"),
            .bool("online", \.online, "learn hard and soft iron from normal motion (the fixed values are the start)"),
            .string(
                "file", \.file,
                "calibration file: loaded at start, saved (atomically) when a better calibration is accepted; "
                    + "stages of several magnetometers may share one (each under its name)"),
            .bool("prompt", \.prompt, "allow the status to ask for the figure-eight motion"),
            .number(
                "status_period_s", \.statusSeconds, unit: "s", range: 0.001...86_400,
                "publish calibration/status this often (and on every change)"
            ).formerly("status_seconds"),
            .vector(
                "motor_ut_per_a", \.motorMicroteslaPerAmpere, unit: "uT/A", range: -100...100,
                "field the motors add per ampere drawn (from motor/current), removed from every reading; "
                    + "fixed, or the start when learning"),
            .bool(
                "learn_motor", \.learnMotor,
                "with online: learn motor_ut_per_a from the readings while the motor current varies"),
            .bool(
                "detect_rotation", \.detectRotation,
                "find how the magnetometer is mounted against the IMU (a rotation name) from motion; its readings "
                    + "are held back until the rotation is clear, then turned into the IMU's axes; kept in file"),
            .string(
                "magnetometer", \.magnetometer,
                "which magnetometer this stage calibrates: '' = the primary (imu/mag), NAME = imu/mag/NAME of a "
                    + "source's extra_magnetometers (status then on calibration/status/NAME); one stage per "
                    + "magnetometer (they may share one file, keyed by name)"),
        ])

        /// The fixed calibration (identity when nothing is given).
        var fixed: MagnetometerCalibration {
            MagnetometerCalibration(
                hardIronOffsetMicrotesla: hardIronMicrotesla, softIronCorrection: softIron, fieldRadiusMicrotesla: 0)
        }
    }

    static let type = StageType(
        name: "calibration", role: .transform,
        summary: "hard- and soft-iron calibration (fixed or online, persisted; a new hard iron found with the gyro)",
        settings: Settings.table, outputTopics: [PipelineTopics.calibrationStatus, PipelineTopics.motorCompensation]
    ) { settings, context in CalibrationStage(settings, log: context.log) }

    static let identity = MagnetometerCalibration(hardIronOffsetMicrotesla: .zero, fieldRadiusMicrotesla: 0)

    let settings: Settings
    let log: @Sendable (String) -> Void
    var online: OnlineCalibrator?
    var lastImuTime: Double?
    var throttle: StatusThrottle<StatusState>
    var savedResidual: Double?
    var refitsAccepted = 0
    /// Readings beyond physical limits, passed on without learning from them.
    var implausible = 0
    var lastLogged: CalibrationFit?
    /// The motors' field, removed in proportion to the current on motor/current (see
    /// `MotorCurrentCompensator`); idle until a current arrives.
    var motor: MotorCurrentCompensator
    var motorLearnedLogged = false
    var currentsReceived = 0
    /// Stamp of the first motor current, seconds; readings held back while the motors' field is learned.
    var firstCurrentTime: Double?
    var motorWithheld = 0
    /// How long after the first current readings wait for the motors' field to be learned, seconds: a
    /// few throttle changes. Past it they pass on with what is known (a current that never varies
    /// teaches nothing).
    static let motorHoldSeconds = 30.0
    /// Finds the magnetometer's mounting (detect_rotation); keeps checking one loaded from the file.
    var detector: MountingRotationDetector?
    /// The magnetometer's mounting applied before the calibration: found, or loaded with the file.
    var magnetometerRotation: MountingRotation?
    /// How the mounting was found (saved beside it).
    var rotationFound: String?
    /// Readings held back while the mounting was not yet clear.
    var withheld = 0
    /// The latest of them (raw microtesla, magnetometer axes, with their times): once the mounting is
    /// known they are turned and binned for the first fits, so the calibration is not learned from
    /// scratch after the wait. The latest `heldReadingsLimit` are used (the array trims itself to them
    /// whenever it holds twice as many).
    var held: [(field: Vector3, time: Double)] = []
    static let heldReadingsLimit = 60_000
    var contradictionLogged = false
    /// While learning without a mounting to apply (none given, none to find): checks from motion that
    /// the readings turn with the IMU. A magnetometer that turns as if mounted otherwise gives a heading
    /// off by the mounting's yaw, whatever the calibration: it is then reported uncalibrated (the
    /// heading's bound is 180 degrees) and the remedy named.
    var mountingCheck: MountingRotationDetector?
    /// The mounting the check found, when it is not the identity.
    var mountingContradiction: MountingRotationDetector.Detection?
    /// frame_id of the IMU's messages: the axes turned readings are in.
    var imuFrame: String?

    /// What a status change is: the calibrator's state, whether the prompt is shown, and how many
    /// fits were accepted (every accepted fit is published at once).
    struct StatusState: Equatable {
        var state: OnlineCalibrator.State
        var prompt: Bool
        var fits: Int
    }

    /// The topic of the magnetometer this stage calibrates, and of its status.
    let magnetometerTopic: String
    let statusTopic: String
    /// Where the motor compensation goes, and the coefficients last sent there.
    let motorTopic: String
    var sentMotorCoefficients: Vector3?

    init(_ settings: Settings, log: @escaping @Sendable (String) -> Void) {
        self.settings = settings
        self.log = log
        magnetometerTopic = PipelineTopics.magnetometer(named: settings.magnetometer)
        statusTopic = PipelineTopics.calibrationStatus(named: settings.magnetometer)
        motorTopic = PipelineTopics.motorCompensation(named: settings.magnetometer)
        throttle = StatusThrottle(intervalSeconds: settings.statusSeconds)
        var motorSettings = MotorCompensationSettings()
        motorSettings.coefficientsMicroteslaPerAmpere = settings.motorMicroteslaPerAmpere
        motorSettings.learn = settings.online && settings.learnMotor
        motor = MotorCurrentCompensator(settings: motorSettings)
        super.init()
        var start: MagnetometerCalibration? = settings.fixed == Self.identity ? nil : settings.fixed
        if !settings.file.isEmpty {
            switch CalibrationFile.load(settings.file, magnetometer: settings.magnetometer) {
            case .success(let stored):
                start = stored.calibration
                // Coefficients in the file are the start unless the pipeline gives its own.
                if settings.motorMicroteslaPerAmpere == .zero, let k = stored.motorMicroteslaPerAmpere {
                    motorSettings.coefficientsMicroteslaPerAmpere = k
                    motor = MotorCurrentCompensator(settings: motorSettings)
                }
                magnetometerRotation = stored.magnetometerRotation
                rotationFound = stored.magnetometerRotationFound
                notes.append(
                    "loaded the calibration in \(settings.file)"
                        + (stored.magnetometerRotation.map { ", for the magnetometer mounted \($0)" } ?? ""))
            case .failure(let why) where why.exists:
                log("calibration: \(settings.file) is refused (\(why.reason)); starting uncalibrated")
                notes.append("refused \(settings.file): \(why.reason)")
            case .failure:
                break
            }
        }
        if settings.detectRotation { detector = MountingRotationDetector() }
        if settings.online && detector == nil && magnetometerRotation == nil {
            mountingCheck = MountingRotationDetector()
        }
        if settings.online {
            online = OnlineCalibrator(initial: start)
        } else if let start, start != settings.fixed {
            online = OnlineCalibrator(initial: start)  // a loaded file, applied as is
            online?.settings.minimumCoverage = 2  // never refits: fixed mode
        }
    }

    var current: MagnetometerCalibration { online?.calibration ?? settings.fixed }
    var isIdentity: Bool {
        online == nil && settings.fixed == Self.identity && motor.coefficients == .zero && !motor.settings.learn
            && !turnsReadings
    }
    /// True while the online calibrator learns (the gyro-aided fit reads the IMU), or the mounting is
    /// being found; a loaded file in fixed mode is applied as is.
    var learning: Bool { settings.online || detector != nil }
    /// Readings are turned (a mounting found or loaded) or held back: whole messages are rewritten.
    var turnsReadings: Bool { detector != nil || magnetometerRotation != nil }

    /// In place: the vectors of little-endian payloads are overwritten where they are; an identity
    /// calibration passes messages on unread; readings to turn or hold back are decoded.
    var inputHandling: InputHandling {
        isIdentity ? .passThrough : turnsReadings ? .decoded : .inPlace(.patchedMessage)
    }

    /// While the motors' field is being learned (a current arrived, learning is on, nothing is known
    /// yet), readings are held back: the heading must not start from a field the motors bend, which
    /// the fusion filter would take for the earth's and then find the corrected readings inconsistent
    /// with. At most `motorHoldSeconds` after the first current.
    func holdsForMotor(at time: Double) -> Bool {
        guard let first = firstCurrentTime, motorFieldToLearn else { return false }
        return time - first < Self.motorHoldSeconds
    }

    /// The motors' field is to be learned and nothing of it is known yet.
    var motorFieldToLearn: Bool { motor.settings.learn && !motor.learned && motor.coefficients == .zero }

    func inPlaceSample(_ frame: WireFrame.View) -> InPlaceSample? {
        switch frame.topic {
        case PipelineTopics.imuRaw where learning:
            return decodeInPlace(frame)
        case magnetometerTopic where !isIdentity:
            // A big-endian payload has no offset to patch: the general path re-encodes it. A reading to
            // hold back for the motors takes the general path too (in place, a message cannot drop one).
            guard let sample = decodeInPlace(frame, magnetometerTopic: magnetometerTopic), sample.offset != nil else {
                return nil
            }
            if case .magnetometer(let header, _, _) = sample, holdsForMotor(at: header.stamp.seconds) { return nil }
            return sample
        case PipelineTopics.motorCurrent:
            // Applied in stream order (apply), not while the batch is decoded. The first current may start
            // holding readings back: its message takes the general path, which can drop them.
            guard let m = batteryState(frame.type, frame.encoding, UnsafeRawBufferPointer(frame.payload)) else {
                return .unchanged
            }
            if firstCurrentTime == nil && motorFieldToLearn { return nil }
            return .current(header: m.header, drawnAmperes: m.drawnAmperes)
        default:
            return .unchanged
        }
    }

    func apply(_ sample: InPlaceSample, to frame: WireFrame.View, extra: inout [WireFrame]) {
        switch sample {
        case .imu(let header, let w, let a, _):
            observeMotion(header, w, a)
        case .magnetometer(let header, let field, let offset):
            let value = calibrated(header, field)
            if let offset { CDRSamples.overwrite(value, at: offset, in: frame.payload) }
            status(header, into: &extra)
        case .current(let header, let amperes):
            noteCurrent(amperes, at: header.stamp.seconds)
        case .unchanged:
            break
        }
    }

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        switch frame.topic {
        case PipelineTopics.imuRaw where learning || turnsReadings:
            let m = try imuSample(frame)
            observeMotion(m.header, m.angularVelocity, m.linearAcceleration)
            if turnsReadings && imuFrame == nil { imuFrame = m.header.frameId }
            output.append(frame)
        case magnetometerTopic where turnsReadings:
            var full = try decoded(frame, as: MagneticFieldMessage.self)
            guard let rotation = mounting(full.header, full.magneticField) else {
                withheld += 1
                hold(full.magneticField * 1e6, time: full.header.stamp.seconds)
                status(full.header, into: &output)
                return
            }
            full.magneticField = calibrated(full.header, rotation.apply(full.magneticField))
            full.magneticFieldCovariance = MountStage.turned(full.magneticFieldCovariance, by: rotation)
            if let imuFrame, !rotation.isIdentity { full.header.frameId = imuFrame }
            output.append(cdrFrame(full, topic: magnetometerTopic))
            status(full.header, into: &output)
        case magnetometerTopic where !isIdentity:
            let m = try magneticSample(frame)
            if holdsForMotor(at: m.header.stamp.seconds) {
                // Learned from (the motors' fit needs it), not passed on.
                _ = calibrated(m.header, m.field)
                motorWithheld += 1
                status(m.header, into: &output)
                return
            }
            let calibrated = calibrated(m.header, m.field)
            if let offset = m.fieldOffset {
                CDRSamples.overwrite(calibrated, at: offset, in: &frame.payload)
                output.append(frame)
            } else {
                var full = try decoded(frame, as: MagneticFieldMessage.self)
                full.magneticField = calibrated
                output.append(cdrFrame(full, topic: magnetometerTopic))
            }
            status(m.header, into: &output)
        case PipelineTopics.motorCurrent:
            if let m = frame.payload.withUnsafeBytes({ batteryState(frame.type, frame.encoding, $0) }) {
                noteCurrent(m.drawnAmperes, at: m.header.stamp.seconds)
            }
            output.append(frame)
        default:
            output.append(frame)
        }
    }

    /// A motor/current payload as sensor_msgs/BatteryState; one of another type or encoding, or that does
    /// not decode, is counted as implausible (and passed on unread).
    func batteryState(_ type: String, _ encoding: String, _ payload: UnsafeRawBufferPointer) -> BatteryStateMessage? {
        guard encoding == "cdr", type == BatteryStateMessage.typeName,
            let m = try? BatteryStateMessage(cdr: payload)
        else {
            implausible += 1
            return nil
        }
        return m
    }

    /// A motor current, amperes drawn (from sensor_msgs/BatteryState); one that is not finite is
    /// counted as implausible and changes nothing.
    func noteCurrent(_ amperes: Double, at time: Double) {
        guard amperes.isFinite, time.isFinite else {
            implausible += 1
            return
        }
        currentsReceived += 1
        if firstCurrentTime == nil { firstCurrentTime = time }
        motor.addCurrent(amperes, time: time)
    }

    /// One IMU sample for the gyro-aided fit (read only: it passes on unchanged).
    func observeMotion(_ header: RosHeader, _ angularVelocity: Vector3, _ linearAcceleration: Vector3) {
        // An impossible reading must not turn the fit's frame: fusion skips it too.
        guard SampleValidator.isPlausible(angularVelocity: angularVelocity, specificForce: linearAcceleration) else {
            implausible += 1
            return
        }
        let t = header.stamp.seconds
        let dt = lastImuTime.map { min(0.1, max(0, t - $0)) } ?? 0
        lastImuTime = t
        online?.addMotion(rate: angularVelocity, specificForce: linearAcceleration, dt: dt)
        motor.addMotion(rate: angularVelocity, dt: dt)
        detector?.addMotion(rate: angularVelocity, dt: dt)
        mountingCheck?.addMotion(rate: angularVelocity, dt: dt)
    }

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

    /// One magnetometer sample (tesla) through the online calibrator; the calibrated field, tesla.
    func calibrated(_ header: RosHeader, _ field: Vector3) -> Vector3 {
        let t = header.stamp.seconds, measured = field * 1e6
        guard SampleValidator.isPlausible(fieldMicrotesla: measured) else {
            implausible += 1
            return field  // passed on as it came: fusion skips it, the fits never see it
        }
        checkMounting(measured, time: t)
        // The motors' field first: hard and soft iron are learned from what the earth and the sensor give.
        let raw = motor.compensate(measured, softIron: current.softIronCorrection, time: t)
        if motor.learned && !motorLearnedLogged { motorLearned(at: t) }
        if var calibrator = online {
            if let fit = calibrator.add(raw, time: t) { accepted(fit, at: t) }
            online = calibrator
        }
        return current.apply(raw) * 1e-6
    }

    /// Every refit the calibrator accepts is applied; the log names one only when it moved the
    /// calibration noticeably (offset or field radius by more than 0.5 uT, or another model), so a
    /// calibration refined every 0.5 s does not flood the log; the report counts them all.
    func accepted(_ fit: CalibrationFit, at time: Double) {
        refitsAccepted += 1
        let o = fit.calibration.hardIronOffsetMicrotesla
        let moved =
            lastLogged.map {
                ($0.calibration.hardIronOffsetMicrotesla - o).norm > 0.5 || $0.model != fit.model
                    || abs($0.calibration.fieldRadiusMicrotesla - fit.calibration.fieldRadiusMicrotesla) > 0.5
            } ?? true
        if moved {
            lastLogged = fit
            let article = fit.model.rawValue.first.map { "aeiou".contains($0) } == true ? "an" : "a"
            log(
                "calibration: at \(format(time, 2)) s accepted \(article) \(fit.model.rawValue) fit, "
                    + "offset \(format(o.x, 1)), \(format(o.y, 1)), \(format(o.z, 1)) uT, "
                    + "field \(format(fit.calibration.fieldRadiusMicrotesla, 1)) uT, rms "
                    + "\(format(fit.rmsResidualMicrotesla, 2)) uT"
                    // A gyro-aided fit is made from turning, not from binned directions: no coverage.
                    + (fit.directionCoverage.isFinite ? ", coverage \(format(fit.directionCoverage * 100, 0)) %" : ""))
        }
        guard savedResidual.map({ fit.rmsResidualMicrotesla < $0 }) ?? true else { return }
        save(fit)
    }

    /// The first learned motor coefficients: logged, and saved with the calibration when there is one.
    func motorLearned(at time: Double) {
        motorLearnedLogged = true
        // The readings binned so far still hold the motors' field.
        online?.discardReadings()
        let k = motor.coefficients, u = motor.uncertainty
        log(
            "calibration: at \(format(time, 2)) s learned the motors' field: \(format(k.x, 3)), \(format(k.y, 3)), "
                + "\(format(k.z, 3)) uT/A (+- \(format(max(u.x, u.y, u.z), 3)))")
        if let fit = online?.fit { save(fit) }
    }

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

    /// Saves that failed, and why the last one did.
    var saveFailures = 0
    var lastSaveFailure = ""

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
        if let o = online {
            notes.append(
                "calibration \(o.state) (progress \(format(o.progressPercent, 0)) %), \(refitsAccepted) fit(s) accepted"
                    + (o.gyroAidedFits > 0 ? " (\(o.gyroAidedFits) gyro-aided)" : "")
                    + (o.gravityAidedFits > 0 ? " (\(o.gravityAidedFits) gravity-aided)" : ""))
            if refitsAccepted == 0 {
                let needed = format(o.settings.gyroAided.minimumRotationSpread, 2)
                let window = format(o.settings.gyroAided.windowSeconds, 0)
                notes.append(
                    StageReport.noCalibrationFitPrefix
                        + "the gyro-aided fit's windows turned with a spread of at most "
                        + "\(format(o.largestRotationSpread, 3)) (it needs \(needed): turning about two axes or "
                        + "more, about 30 degrees each way, within \(window) s), and the sphere fit needs "
                        + "\(format(100 * o.settings.minimumCoverage, 0)) % of the directions within "
                        + "\(format(o.settings.maximumReadingAgeSeconds, 0)) s")
            }
        }
        return []
    }
}
