import CompassCore
import WireFormat
import MessageBus

/// Magnetometer calibration as a stage: fixed, or learned online from normal motion
/// (`OnlineCalibrator`, with the gyro's help for a new hard iron), persisted to a file; publishes
/// calibration/status (progress, fit quality, the figure-eight prompt) on every accepted fit, so
/// fusion renews its magnetic reference with it. It owns the calibration and nothing else: the gyro
/// passes through untouched (its bias is a state of the fusion filter).
final class CalibrationStage: StageLogic, InPlaceTransform, @unchecked Sendable {

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

    /// Saves that failed, and why the last one did.
    var saveFailures = 0
    var lastSaveFailure = ""

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

    /// One magnetometer sample (tesla) through the online calibrator; the calibrated field, tesla.
    func calibrated(_ header: RosHeader, _ field: Vector3) -> Vector3 {
        // An implausible reading is passed on as it came: fusion skips it, the fits never see it.
        calibratedTesla(header, microtesla: field * 1e6) ?? field
    }

    /// One reading (microtesla, as `FusionEngine` takes it) through the online calibrator; the calibrated
    /// field, tesla, or nil for a reading no sensor gives (counted).
    func calibratedTesla(_ header: RosHeader, microtesla measured: Vector3) -> Vector3? {
        let t = header.stamp.seconds
        guard SampleValidator.isPlausible(fieldMicrotesla: measured) else {
            implausible += 1
            return nil
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
            log(
                "calibration: at \(format(time, 2)) s accepted \(article(fit.model)) \(fit.model.rawValue) fit, "
                    + "offset \(format(o.x, 1)), \(format(o.y, 1)), \(format(o.z, 1)) uT, "
                    + "field \(format(fit.calibration.fieldRadiusMicrotesla, 1)) uT, rms "
                    + "\(format(fit.rmsResidualMicrotesla, 2)) uT"
                    // A gyro-aided fit is made from turning, not from binned directions: no coverage.
                    + (fit.directionCoverage.isFinite ? ", coverage \(format(fit.directionCoverage * 100, 0)) %" : ""))
        }
        guard savedResidual.map({ fit.rmsResidualMicrotesla < $0 }) ?? true else { return }
        save(fit)
    }

    /// "a" or "an" before a fit model's name.
    func article(_ model: CalibrationFit.Model) -> String {
        model.rawValue.first.map { "aeiou".contains($0) } == true ? "an" : "a"
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

}
