import Foundation
import CompassCore
import WireFormat
import Bags
import MessageBus
import CZeroMQ

func requireCDR(_ frame: borrowing WireFrame, _ type: String) throws {
    guard frame.type == type else { throw UnexpectedFrame(reason: "expected \(type), got \(frame.type)") }
    guard frame.encoding == "cdr" else { throw UnexpectedFrame(reason: "expected cdr encoding, got \(frame.encoding)") }
}

func decoded<M: RosMessage>(_ frame: borrowing WireFrame, as _: M.Type) throws -> M {
    try requireCDR(frame, M.typeName)
    do { return try M(cdrBytes: frame.payload) } catch { throw UnexpectedFrame(reason: "undecodable \(M.typeName): \(error)") }
}

/// Partial decoding of input frames (see `CDRSamples`), with the type checked first.
func imuSample(_ frame: borrowing WireFrame) throws -> (header: RosHeader, angularVelocity: Vector3, linearAcceleration: Vector3, angularVelocityOffset: Int?) {
    try requireCDR(frame, ImuMessage.typeName)
    do { return try frame.payload.withUnsafeBytes { raw in Result { () throws(CDRError) in try CDRSamples.imu(raw) } }.get() } catch {
        throw UnexpectedFrame(reason: "undecodable \(ImuMessage.typeName): \(error)")
    }
}

func magneticSample(_ frame: borrowing WireFrame) throws -> (header: RosHeader, field: Vector3, fieldOffset: Int?) {
    try requireCDR(frame, MagneticFieldMessage.typeName)
    do { return try frame.payload.withUnsafeBytes { raw in Result { () throws(CDRError) in try CDRSamples.magneticField(raw) } }.get() } catch {
        throw UnexpectedFrame(reason: "undecodable \(MagneticFieldMessage.typeName): \(error)")
    }
}

/// The header stamp of a little-endian CDR payload (sec, nanosec right after the 4-byte
/// encapsulation), read without decoding the rest; nil when the payload is too short.
func headerStamp(_ payload: ArraySlice<UInt8>) -> (sec: Int32, nanosec: UInt32)? {
    guard payload.count >= 12 else { return nil }
    return payload.withUnsafeBytes { headerStamp($0) }
}

/// The same, for a payload of at least 12 bytes seen in place.
func headerStamp(_ raw: UnsafeRawBufferPointer) -> (sec: Int32, nanosec: UInt32) {
    (Int32(littleEndian: raw.loadUnaligned(fromByteOffset: 4, as: Int32.self)), UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
}

// MARK: - Transforms

/// Magnetometer calibration as a stage: fixed, or learned online from normal motion (OnlineCalibrator),
/// persisted to a file; publishes calibration/status (progress, fit quality, the figure-eight prompt);
/// measures the gyro bias at rest and removes it before fusion.
final class CalibrationStage: StageLogicBase, InPlaceTransform {
    let fixed: MagnetometerCalibration
    var online: OnlineCalibrator?
    let file: String
    let promptAllowed: Bool
    let statusSeconds: Double
    let removeGyroBias: Bool
    let log: @Sendable (String) -> Void
    var rest = RestDetector()
    var gyroBias: Vector3?
    var lastImuTime: Double?
    var lastStatusTime: Double?
    var lastStatusState: (UInt8, Bool)?
    var savedResidual: Double?

    init(_ s: StageSettings, log: @escaping @Sendable (String) -> Void) {
        let h = s.numberList("hard_iron_ut"), m = s.numberList("soft_iron")
        fixed = MagnetometerCalibration(hardIronOffsetMicrotesla: Vector3(h[0], h[1], h[2]),
                                        softIronCorrection: Matrix3(m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8]),
                                        fieldRadiusMicrotesla: 0)
        file = s.string("file")
        promptAllowed = s.bool("prompt")
        statusSeconds = s.number("status_seconds")
        removeGyroBias = s.bool("gyro_bias")
        self.log = log
        super.init()
        var start: MagnetometerCalibration? = fixed == Self.identity ? nil : fixed
        if !file.isEmpty {
            switch CalibrationFile.load(file) {
            case .success(let stored): start = stored; notes.append("loaded the calibration in \(file)")
            case .failure(let why):
                if why.exists {
                    log("calibration: \(file) is refused (\(why.reason)); starting uncalibrated")
                    notes.append("refused \(file): \(why.reason)")
                }
            }
        }
        if s.bool("online") {
            online = OnlineCalibrator(initial: start)
        } else if let start, start != fixed {
            online = OnlineCalibrator(initial: start)   // a loaded file, applied as is
            online?.settings.minimumCoverage = 2        // never refits: fixed mode
        }
    }

    static let identity = MagnetometerCalibration(hardIronOffsetMicrotesla: .zero, fieldRadiusMicrotesla: 0)
    var current: MagnetometerCalibration { online?.calibration ?? fixed }
    var isIdentity: Bool { online == nil && !removeGyroBias && fixed == Self.identity }
    override var forwardsUnchanged: Bool { isIdentity }
    override var observesFrames: Bool { !isIdentity }

    // In place: the vectors of little-endian payloads are overwritten where they are.
    var worksInPlace: Bool { true }
    var writesInPlace: Bool { true }
    var forwardsMessage: Bool { true }
    func inPlaceSample(_ frame: WireFrame.View) -> InPlaceSample? {
        switch frame.topic {
        case PipelineTopics.imuRaw where removeGyroBias, PipelineTopics.magnetometer where !isIdentity:
            guard let sample = decodeInPlace(frame), sample.offset != nil else { return nil }   // big endian: general path
            return sample
        default:
            return .unchanged
        }
    }
    func apply(_ sample: InPlaceSample, to frame: WireFrame.View, extra: inout [WireFrame]) {
        switch sample {
        case .imu(let header, let w, let a, let offset):
            if let corrected = gyroCorrected(header, w, a), let offset { CDRSamples.overwrite(corrected, at: offset, in: frame.payload) }
        case .magnetometer(let header, let field, let offset):
            let value = calibrated(header, field)
            if let offset { CDRSamples.overwrite(value, at: offset, in: frame.payload) }
            status(header, into: &extra, force: false)
        case .unchanged:
            break
        }
    }

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        switch frame.topic {
        case PipelineTopics.imuRaw where removeGyroBias:
            let m = try imuSample(frame)
            guard let corrected = gyroCorrected(m.header, m.angularVelocity, m.linearAcceleration) else { output.append(frame); return }
            if let offset = m.angularVelocityOffset {
                CDRSamples.overwrite(corrected, at: offset, in: &frame.payload)   // unique here: no copy
                output.append(frame)
            } else {
                var full = try decoded(frame, as: ImuMessage.self)   // big endian: re-encoded as little endian
                full.angularVelocity = corrected
                output.append(imuFrame(full))
            }
        case PipelineTopics.magnetometer where !isIdentity:
            let m = try magneticSample(frame)
            let calibrated = calibrated(m.header, m.field)
            if let offset = m.fieldOffset {
                CDRSamples.overwrite(calibrated, at: offset, in: &frame.payload)
                output.append(frame)
            } else {
                var full = try decoded(frame, as: MagneticFieldMessage.self)
                full.magneticField = calibrated
                output.append(magFrame(full))
            }
            status(m.header, into: &output, force: false)
        default:
            output.append(frame)
        }
    }

    /// Rest detection on one IMU sample; the angular velocity with the bias removed, or nil while no
    /// bias is known yet.
    func gyroCorrected(_ header: RosHeader, _ angularVelocity: Vector3, _ linearAcceleration: Vector3) -> Vector3? {
        let t = header.stamp.seconds
        let dt = lastImuTime.map { min(0.1, max(0, t - $0)) } ?? 0
        lastImuTime = t
        if rest.update(rate: angularVelocity, specificForce: linearAcceleration, dt: dt) {
            gyroBias = rest.lowPassedRate
        }
        return gyroBias.map { angularVelocity - $0 }
    }

    /// One magnetometer sample (tesla) through the online calibrator; the calibrated field, tesla.
    func calibrated(_ header: RosHeader, _ field: Vector3) -> Vector3 {
        let raw = field * 1e6
        let t = header.stamp.seconds
        if var calibrator = online {
            if let fit = calibrator.add(raw, time: t) { accepted(fit, at: t) }
            online = calibrator
        }
        return current.apply(raw) * 1e-6
    }

    func accepted(_ fit: CalibrationFit, at time: Double) {
        log("calibration: at \(format(time, 2)) s accepted a \(fit.model.rawValue) fit, offset \(format(fit.calibration.hardIronOffsetMicrotesla.x, 1)), \(format(fit.calibration.hardIronOffsetMicrotesla.y, 1)), \(format(fit.calibration.hardIronOffsetMicrotesla.z, 1)) uT, field \(format(fit.calibration.fieldRadiusMicrotesla, 1)) uT, rms \(format(fit.rmsResidualMicrotesla, 2)) uT, coverage \(format(fit.directionCoverage * 100, 0)) %")
        guard !file.isEmpty, savedResidual.map({ fit.rmsResidualMicrotesla < $0 }) ?? true else { return }
        do {
            try CalibrationFile.save(fit, to: file)
            savedResidual = fit.rmsResidualMicrotesla
        } catch {
            log("calibration: cannot save \(file): \(error)")
        }
    }

    func status(_ header: RosHeader, into output: inout [WireFrame], force: Bool) {
        let t = header.stamp.seconds
        let state = online?.state ?? (fixed == Self.identity ? .uncalibrated : .calibrated)
        let prompt = promptAllowed && (online?.needsMotion ?? false)
        let changed = lastStatusState.map { $0 != (state.rawValue, prompt) } ?? true
        guard force || changed || t - (lastStatusTime ?? -.infinity) >= statusSeconds else { return }
        lastStatusTime = t
        lastStatusState = (state.rawValue, prompt)
        let fit = online?.fit
        let c = current
        let w = c.softIronCorrection
        let message = CalibrationStatusMessage(
            header: header, state: state.rawValue, prompt: prompt, progress: online?.progressPercent ?? 100, coverage: online?.coverage ?? .nan,
            rmsResidual: fit?.rmsResidualMicrotesla ?? .nan, fieldStrength: fit?.calibration.fieldRadiusMicrotesla ?? .nan,
            hardIron: c.hardIronOffsetMicrotesla, softIron: Covariance9([w.m00, w.m01, w.m02, w.m10, w.m11, w.m12, w.m20, w.m21, w.m22]),
            gyroBias: gyroBias ?? Vector3(.nan, .nan, .nan))
        output.append(WireFrame(topic: PipelineTopics.calibrationStatus, type: CalibrationStatusMessage.typeName, encoding: "cdr", payload: message.cdr()))
    }

    func finish() throws -> [WireFrame] {
        if let b = gyroBias { notes.append("gyro bias at rest \(format(b.x, 5)), \(format(b.y, 5)), \(format(b.z, 5)) rad/s") }
        if let o = online { notes.append("calibration \(o.state) (progress \(format(o.progressPercent, 0)) %)") }
        return []
    }
}

/// A calibration file: JSON, written to a temporary name, synced and renamed, so a crash never leaves
/// a broken file.
enum CalibrationFile {
    struct Stored: Codable {
        var version: Int
        var hard_iron_ut: [Double]
        var soft_iron: [Double]
        var field_ut: Double
        var rms_ut: Double
        var coverage: Double
    }
    struct Refusal: Error { let exists: Bool; let reason: String }

    static func load(_ path: String) -> Result<MagnetometerCalibration, Refusal> {
        guard FileManager.default.fileExists(atPath: path) else { return .failure(Refusal(exists: false, reason: "no such file")) }
        guard let data = FileManager.default.contents(atPath: path) else { return .failure(Refusal(exists: true, reason: "unreadable")) }
        let stored: Stored
        do { stored = try JSONDecoder().decode(Stored.self, from: data) } catch {
            return .failure(Refusal(exists: true, reason: "not a calibration file: \(error)"))
        }
        guard stored.version == 1 else { return .failure(Refusal(exists: true, reason: "version \(stored.version) is unknown")) }
        guard stored.hard_iron_ut.count == 3, stored.soft_iron.count == 9,
              (stored.hard_iron_ut + stored.soft_iron + [stored.field_ut]).allSatisfy(\.isFinite) else {
            return .failure(Refusal(exists: true, reason: "fields missing or not finite"))
        }
        let m = stored.soft_iron
        let matrix = Matrix3(m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8])
        guard matrix.inverse != nil, (15...80).contains(stored.field_ut) else {
            return .failure(Refusal(exists: true, reason: "implausible values (singular matrix or field \(stored.field_ut) uT)"))
        }
        let h = stored.hard_iron_ut
        return .success(MagnetometerCalibration(hardIronOffsetMicrotesla: Vector3(h[0], h[1], h[2]), softIronCorrection: matrix,
                                                fieldRadiusMicrotesla: stored.field_ut))
    }

    static func save(_ fit: CalibrationFit, to path: String) throws {
        let c = fit.calibration, w = c.softIronCorrection
        let stored = Stored(version: 1, hard_iron_ut: [c.hardIronOffsetMicrotesla.x, c.hardIronOffsetMicrotesla.y, c.hardIronOffsetMicrotesla.z],
                            soft_iron: [w.m00, w.m01, w.m02, w.m10, w.m11, w.m12, w.m20, w.m21, w.m22],
                            field_ut: c.fieldRadiusMicrotesla, rms_ut: fit.rmsResidualMicrotesla, coverage: fit.directionCoverage)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(stored)
        let temporary = path + ".tmp-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: data), let h = FileHandle(forWritingAtPath: temporary) else {
            throw PipelineRunError.stageFailed(stage: "calibration", reason: "cannot write \(temporary)")
        }
        try h.synchronize()
        try h.close()
        guard rename(temporary, path) == 0 else { throw PipelineRunError.stageFailed(stage: "calibration", reason: "cannot rename to \(path): \(String(cString: strerror(errno)))") }
    }
}

/// Interference gating: runs its own complementary filter and magnetic gate over the stream, so every
/// magnetometer sample is flagged for strength, dip and consistency with the gyro (the disturbance
/// that keeps strength and dip still turns the compass against the gyro). Counts and durations go out
/// on interference/status; with `drop`, flagged samples do not reach fusion.
final class GatingStage: StageLogicBase, InPlaceTransform {
    var filter: ComplementaryFilter
    var aligner = SampleAligner()
    let drop: Bool
    let statusSeconds: Double
    var explicitReference: Bool
    var assessed: UInt32 = 0, flagged: UInt32 = 0, periods: UInt32 = 0
    var disturbedSeconds = 0.0, disturbedSince: Double?
    var lastFlags: FusionFlags = []
    var lastStatusTime: Double?, lastStatusDisturbed: Bool?
    var header = RosHeader(stamp: RosTime(sec: 0, nanosec: 0), frameId: "")

    init(_ s: StageSettings, log: @escaping @Sendable (String) -> Void) throws {
        var settings = ComplementaryFilterSettings()
        settings.magneticGate.strengthTolerance = s.number("strength_tolerance")
        settings.magneticGate.dipToleranceDegrees = s.number("dip_tolerance_deg")
        explicitReference = false
        if s.number("expected_strength_ut") > 0 {
            settings.magneticGate.referenceFieldMicrotesla = s.number("expected_strength_ut")
            settings.magneticGate.referenceDipDegrees = s.number("expected_dip_deg")
            explicitReference = true
        } else if !s.string("latitude").isEmpty || !s.string("longitude").isEmpty {
            guard let lat = Double(s.string("latitude")), let lon = Double(s.string("longitude")) else {
                throw PipelineRunError.stageFailed(stage: "gating", reason: "latitude and longitude must both be numbers")
            }
            let elements = try worldMagneticModel(latitude: lat, longitude: lon, heightKm: s.number("height_km"), date: s.string("date"))
            settings.magneticGate.referenceFieldMicrotesla = elements.totalNanotesla / 1000
            settings.magneticGate.referenceDipDegrees = elements.inclinationDegrees
            explicitReference = true
        }
        filter = ComplementaryFilter(settings: settings)
        drop = s.bool("drop")
        statusSeconds = s.number("status_seconds")
    }

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        switch frame.topic {
        case PipelineTopics.imuRaw:
            let m = try imuSample(frame)
            output.append(frame)
            observe(m.header, m.angularVelocity, m.linearAcceleration)
        case PipelineTopics.magnetometer:
            let m = try magneticSample(frame)
            if assess(m.header, m.field) || !drop { output.append(frame) }
            status(m.header, into: &output, force: false)
        case PipelineTopics.calibrationStatus:
            // A calibration's radius is the expected strength unless one was given.
            if !explicitReference, let c = try? CalibrationStatusMessage(cdrBytes: frame.payload), c.state == 2, c.fieldStrength.isFinite,
               let dip = filter.magneticGate.referenceDipDegrees {
                filter.setMagneticReference(strengthMicrotesla: c.fieldStrength, dipDegrees: dip)
            }
            output.append(frame)
        default:
            output.append(frame)
        }
    }

    func observe(_ h: RosHeader, _ angularVelocity: Vector3, _ linearAcceleration: Vector3) {
        header = h
        if let pair = aligner.imu(ImuSample(timestamp: h.stamp.seconds, angularVelocity: angularVelocity, specificForce: linearAcceleration)) {
            _ = filter.update(imu: pair.imu, magnetometer: pair.magnetometer)
        }
    }

    /// Flags one magnetometer sample (tesla); true when it is clean (or not assessed yet).
    func assess(_ h: RosHeader, _ field: Vector3) -> Bool {
        var clean = true
        if let pair = aligner.magnetometer(MagnetometerSample(timestamp: h.stamp.seconds, fieldMicrotesla: field * 1e6)),
           let o = filter.update(imu: pair.imu, magnetometer: pair.magnetometer), !o.flags.contains(.initialising) {
            assessed += 1
            let reasons = o.flags.intersection([.magneticStrengthDisturbed, .magneticDipDisturbed, .magneticGyroInconsistent, .magnetometerRejected])
            clean = reasons.isEmpty
            track(clean: clean, time: h.stamp.seconds, flags: reasons)
        }
        return clean
    }

    // In place (observing only) unless flagged samples are dropped; a calibration status, which may
    // change the reference, takes the general path.
    var worksInPlace: Bool { !drop }
    var writesInPlace: Bool { false }
    var forwardsMessage: Bool { true }
    func inPlaceSample(_ frame: WireFrame.View) -> InPlaceSample? {
        switch frame.topic {
        case PipelineTopics.imuRaw, PipelineTopics.magnetometer: return decodeInPlace(frame)
        case PipelineTopics.calibrationStatus: return nil
        default: return .unchanged
        }
    }
    func apply(_ sample: InPlaceSample, to frame: WireFrame.View, extra: inout [WireFrame]) {
        switch sample {
        case .imu(let h, let w, let a, _): observe(h, w, a)
        case .magnetometer(let h, let field, _):
            _ = assess(h, field)
            status(h, into: &extra, force: false)
        case .unchanged: break
        }
    }

    func track(clean: Bool, time: Double, flags: FusionFlags) {
        lastFlags = flags
        if clean {
            if let since = disturbedSince { disturbedSeconds += time - since; disturbedSince = nil }
        } else {
            flagged += 1
            if disturbedSince == nil { disturbedSince = time; periods += 1 }
        }
    }

    func status(_ header: RosHeader, into output: inout [WireFrame], force: Bool) {
        let t = header.stamp.seconds
        let disturbed = disturbedSince != nil
        guard force || lastStatusDisturbed != disturbed || t - (lastStatusTime ?? -.infinity) >= statusSeconds else { return }
        lastStatusTime = t; lastStatusDisturbed = disturbed
        let running = disturbedSince.map { t - $0 } ?? 0
        let m = InterferenceStatusMessage(header: header, disturbed: disturbed, flags: lastFlags.rawValue, samplesAssessed: assessed,
                                          samplesFlagged: flagged, disturbedPeriods: periods, disturbedSeconds: disturbedSeconds + running,
                                          expectedStrength: filter.magneticGate.referenceFieldMicrotesla ?? .nan,
                                          expectedDip: filter.magneticGate.referenceDipDegrees ?? .nan)
        output.append(WireFrame(topic: PipelineTopics.interferenceStatus, type: InterferenceStatusMessage.typeName, encoding: "cdr", payload: m.cdr()))
    }

    func finish() throws -> [WireFrame] {
        var out: [WireFrame] = []
        status(header, into: &out, force: true)
        notes.append("\(flagged) of \(assessed) magnetometer samples flagged in \(periods) disturbed period(s)\(drop ? " and dropped" : "")")
        return out
    }
}

/// The World Magnetic Model's elements at a position; `date` is a decimal year or "" for today.
func worldMagneticModel(latitude: Double, longitude: Double, heightKm: Double, date: String) throws -> GeomagneticElements {
    let year: Double
    if date.isEmpty {
        guard let y = decimalYear(unixSeconds: Date().timeIntervalSince1970) else { throw PipelineRunError.stageFailed(stage: "wmm", reason: "no clock") }
        year = y
    } else {
        guard let y = Double(date) else { throw PipelineRunError.stageFailed(stage: "wmm", reason: "date '\(date)' is not a decimal year such as 2026.9") }
        year = y
    }
    do { return try WorldMagneticModel.wmm2025.elements(latitudeDegrees: latitude, longitudeDegrees: longitude, heightKilometres: heightKm, decimalYear: year) }
    catch { throw PipelineRunError.stageFailed(stage: "wmm", reason: "\(error)") }
}

/// The fusion filter as a stage: imu/data_raw + imu/mag in, heading + imu/data out.
final class FusionStage: StageLogicBase, InPlaceTransform {
    var filter: any OrientationFilter
    /// Declination source: a fixed position from the settings, or the latest fix message.
    var position: (latitude: Double, longitude: Double, heightKm: Double)?
    let fixedPosition: Bool
    let fixedYear: Double?
    var declination: (declination: Double, flags: UInt16)?
    var declinationKey: (Double, Double, Int)?
    var aligner = SampleAligner()
    let frameOverride: String
    /// Header of every IMU sample not fused yet (exact stamps, frame id), in order.
    var pendingHeaders: [RosHeader] = []
    var head = 0
    var latestField: [Double: Vector3] = [:]

    init(_ s: StageSettings) {
        filter = (FilterKind(rawValue: s.string("filter")) ?? .kalman).make(
            CommonFilterOptions(sensorLatencySeconds: s.number("sensor_latency"), referenceOffsetDegrees: s.number("reference_offset_deg")))
        frameOverride = s.string("frame_id")
        fixedYear = Double(s.string("date"))
        if let lat = Double(s.string("latitude")), let lon = Double(s.string("longitude")) {
            position = (lat, lon, s.number("height_km"))
            fixedPosition = true
        } else {
            fixedPosition = false
        }
    }

    /// Declination (degrees east) and true-north flags for a time, cached per position and day.
    func trueNorth(at time: Double) -> (declination: Double, flags: UInt16) {
        guard let p = position else { return (.nan, HeadingMessage.flagNoPosition) }
        guard let year = fixedYear ?? decimalYear(unixSeconds: time) else { return (.nan, HeadingMessage.flagModelOutOfRange) }
        let key = (p.latitude, p.longitude, Int(year * 365))
        if let k = declinationKey, k == key, let d = declination { return d }
        declinationKey = key
        do {
            let e = try WorldMagneticModel.wmm2025.elements(latitudeDegrees: p.latitude, longitudeDegrees: p.longitude,
                                                             heightKilometres: p.heightKm, decimalYear: year)
            declination = (e.declinationDegrees, e.isInCautionZone ? HeadingMessage.flagModelCautionZone : 0)
        } catch {
            declination = (.nan, HeadingMessage.flagModelOutOfRange)
        }
        return declination!
    }

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        switch frame.topic {
        case PipelineTopics.imuRaw:
            let m = try imuSample(frame)
            try fuseImu(m.header, m.angularVelocity, m.linearAcceleration, into: &output)
        case PipelineTopics.magnetometer:
            let m = try magneticSample(frame)
            try fuseMagnetometer(m.header, m.field, into: &output)
        case PipelineTopics.fix:
            let f = try decoded(frame, as: NavSatFixMessage.self)
            if !fixedPosition, f.status >= 0, f.latitude.isFinite, f.longitude.isFinite {
                position = (f.latitude, f.longitude, f.altitude.isFinite ? f.altitude / 1000 : 0)
            }
            output.append(frame)   // the direction stage uses the fixes too
        case PipelineTopics.calibrationStatus, PipelineTopics.interferenceStatus:
            output.append(frame)   // status travels on to the sinks
        default:
            throw UnexpectedFrame(reason: "fusion reads \(PipelineTopics.imuRaw) and \(PipelineTopics.magnetometer) only")
        }
    }

    func fuseImu(_ header: RosHeader, _ angularVelocity: Vector3, _ linearAcceleration: Vector3, into output: inout [WireFrame]) throws {
        pendingHeaders.append(header)
        try fuse(aligner.imu(ImuSample(timestamp: header.stamp.seconds, angularVelocity: angularVelocity, specificForce: linearAcceleration)), into: &output)
    }

    /// `field` in tesla.
    func fuseMagnetometer(_ header: RosHeader, _ field: Vector3, into output: inout [WireFrame]) throws {
        try fuse(aligner.magnetometer(MagnetometerSample(timestamp: header.stamp.seconds, fieldMicrotesla: field * 1e6)), into: &output)
    }

    // Reads samples in place and publishes only its own outputs; fixes and status take the general path.
    var worksInPlace: Bool { true }
    var writesInPlace: Bool { false }
    var forwardsMessage: Bool { false }
    func inPlaceSample(_ frame: WireFrame.View) -> InPlaceSample? { decodeInPlace(frame) }
    func apply(_ sample: InPlaceSample, to frame: WireFrame.View, extra: inout [WireFrame]) throws {
        switch sample {
        case .imu(let h, let w, let a, _): try fuseImu(h, w, a, into: &extra)
        case .magnetometer(let h, let field, _): try fuseMagnetometer(h, field, into: &extra)
        case .unchanged: break
        }
    }

    func fuse(_ pair: (imu: ImuSample, magnetometer: MagnetometerSample?)?, into output: inout [WireFrame]) throws {
        guard let pair else { return }
        var header = head < pendingHeaders.count ? pendingHeaders[head] : RosHeader(stamp: RosTime(seconds: pair.imu.timestamp), frameId: "imu_link")
        head += 1
        if head > 1024 { pendingHeaders.removeFirst(head); head = 0 }
        if !frameOverride.isEmpty { header.frameId = frameOverride }
        guard let o = filter.update(imu: pair.imu, magnetometer: pair.magnetometer) else { return }
        var h = FusionMessages.heading(o, header: header, field: pair.magnetometer?.fieldMicrotesla)
        let north = trueNorth(at: header.stamp.seconds)
        h.declination = north.declination
        h.trueHeading = h.magneticHeading.isFinite && north.declination.isFinite ? normalizedDegrees(h.magneticHeading + north.declination) : .nan
        h.flags |= north.flags
        let imu = FusionMessages.imu(o, header: header, sample: pair.imu)
        output.append(WireFrame(topic: PipelineTopics.heading, type: HeadingMessage.typeName, encoding: "cdr", payload: h.cdr()))
        output.append(imuFrame(imu, topic: PipelineTopics.imuFused))
    }

    func finish() throws -> [WireFrame] {
        var out: [WireFrame] = []
        try fuse(aligner.finish(), into: &out)
        let k = filter.skipped
        if k.total > 0 { notes.append("filter skipped \(k.total) sample(s): \(k)") }
        return out
    }
}

/// The best direction of travel: the GPS course (from successive fixes) when moving fast and straight
/// with a good course accuracy, the compass heading when its accuracy is good, otherwise nothing.
/// Publishes gyrocompass_msgs/Heading on `direction` with `source` saying which.
final class DirectionStage: StageLogicBase, TransformLogic {
    var selector: DirectionSourceSelector
    let defaultSigma: Double
    var previousFix: (t: Double, lat: Double, lon: Double, sigma: Double)?
    var course: CourseOverGround?
    var previousCourse: Double?
    var published = (gps: 0, compass: 0, none: 0)

    init(_ s: StageSettings) {
        selector = DirectionSourceSelector(minimumSpeedMetresPerSecond: s.number("min_speed"),
                                           maximumCourseAccuracyDegrees: s.number("max_course_accuracy_deg"),
                                           maximumCompassAccuracyDegrees: s.number("max_compass_accuracy_deg"))
        defaultSigma = s.number("default_position_sigma_m")
    }

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        switch frame.topic {
        case PipelineTopics.fix:
            let f = try decoded(frame, as: NavSatFixMessage.self)
            guard f.status >= 0, f.latitude.isFinite, f.longitude.isFinite else { course = nil; return }
            let t = f.header.stamp.seconds
            let sigma = f.positionCovarianceType > 0 ? ((f.positionCovariance.m0 + f.positionCovariance.m4) / 2).squareRoot() : defaultSigma
            if let p = previousFix, t - p.t >= 0.5 {
                // Local flat-earth displacement: fixes are close together.
                let north = (f.latitude - p.lat) * radiansPerDegree * 6_371_000
                let east = (f.longitude - p.lon) * radiansPerDegree * 6_371_000 * cos(f.latitude * radiansPerDegree)
                let distance = (north * north + east * east).squareRoot()
                let bearing = normalizedDegrees(atan2(east, north) * degreesPerRadian)
                // Both fixes' errors across the track, plus how much the course is still turning.
                var accuracy = atan2(2 * max(sigma, p.sigma), max(distance, 1e-9)) * degreesPerRadian
                if let previous = previousCourse { accuracy = max(accuracy, abs(signedDegrees(bearing - previous))) }
                course = CourseOverGround(courseDegrees: bearing, speedMetresPerSecond: distance / (t - p.t), courseAccuracyDegrees: accuracy)
                previousCourse = bearing
                previousFix = (t, f.latitude, f.longitude, sigma)
            } else if previousFix == nil {
                previousFix = (t, f.latitude, f.longitude, sigma)
            }
        case PipelineTopics.heading:
            var h = try decoded(frame, as: HeadingMessage.self)
            let compass = h.trueHeading.isFinite ? h.trueHeading : h.magneticHeading
            switch selector.choose(gps: course, compassHeadingDegrees: compass, compassAccuracyDegrees: h.headingAccuracy) {
            case .gpsCourse(let degrees, let accuracy):
                h.trueHeading = degrees
                h.magneticHeading = h.declination.isFinite ? normalizedDegrees(degrees - h.declination) : .nan
                h.headingAccuracy = accuracy
                h.source = HeadingMessage.Source.gpsCourse.rawValue
                published.gps += 1
            case .compass:
                h.source = HeadingMessage.Source.compass.rawValue
                published.compass += 1
            case .unknown:
                published.none += 1
                return
            }
            output.append(WireFrame(topic: PipelineTopics.direction, type: HeadingMessage.typeName, encoding: "cdr", payload: h.cdr()))
        default:
            return
        }
    }

    func finish() throws -> [WireFrame] {
        notes.append("direction from GPS course \(published.gps), compass \(published.compass), none \(published.none)")
        return []
    }
}

// MARK: - Sinks

/// Prints headings as text lines or messages as JSON lines.
final class StdoutSink: StageLogicBase, TransformLogic {
    let json: Bool
    let topics: Set<String>
    var changeFilter: HeadingChangeFilter
    var buffer = ""
    init(_ s: StageSettings) {
        json = s.string("format") == "json"
        topics = Set(s.list("topics"))
        changeFilter = HeadingChangeFilter(minimumChangeDegrees: s.number("min_change_deg"))
    }
    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        guard topics.contains(frame.topic) else { return }
        if json {
            let body: String
            do { body = try jsonFromCDR(type: frame.type, frame.payload) ?? "null" } catch { throw UnexpectedFrame(reason: "undecodable \(frame.type): \(error)") }
            buffer += "{\"topic\":\(JSONText.string(frame.topic)),\"type\":\(JSONText.string(frame.type)),\"message\":\(body)}\n"
        } else if frame.type == HeadingMessage.typeName {
            let h = try decoded(frame, as: HeadingMessage.self)
            guard h.magneticHeading.isFinite, let delivered = changeFilter.offer(h.magneticHeading) else { return }
            let name = CardinalDirection.name(forHeadingDegrees: delivered) ?? "-"
            let accuracy = h.headingAccuracy.isFinite ? "+-\(format(h.headingAccuracy, 1))" : "+-?"
            let flags = FusionFlags(rawValue: h.flags).description
            buffer += "t=\(format(h.header.stamp.seconds, 3)) heading=\(format(delivered, 1)) (\(name)) \(accuracy)\(flags.isEmpty ? "" : " [\(flags)]")\n"
        } else {
            buffer += "\(frame.topic) \(frame.type) \(frame.payload.count) bytes\n"
        }
        if buffer.utf8.count > 8192 { flush() }
        return
    }
    /// Writes what is buffered. If stdout has gone away (`| head`), the pipeline stops cleanly.
    func flush() {
        guard !buffer.isEmpty, !outputClosed else { buffer = ""; return }
        do { try FileHandle.standardOutput.write(contentsOf: Data(buffer.utf8)) } catch {
            outputClosed = true
            notes.append("stdout closed; stopping the pipeline")
            PipelineSignals.requestStop()
        }
        buffer = ""
    }
    var outputClosed = false
    func finish() throws -> [WireFrame] { flush(); return [] }
}

func format(_ x: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", x) }

/// Writes t,qw,qx,qy,qz for every imu/data message: the BROAD scorer's contract.
final class CSVSink: StageLogicBase, TransformLogic {
    let quaternions: CSVFile
    let accuracy: CSVFile?
    init(_ s: StageSettings) throws {
        quaternions = try CSVFile(path: s.string("path"), header: "t,qw,qx,qy,qz")
        accuracy = s.string("accuracy_path").isEmpty ? nil : try CSVFile(path: s.string("accuracy_path"), header: "t,heading_deg,accuracy_deg,flags")
    }
    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        if frame.topic == PipelineTopics.imuFused {
            let m = try decoded(frame, as: ImuMessage.self)
            let q = m.orientation
            try quaternions.append("\(stampText(m.header.stamp)),\(q.w),\(q.x),\(q.y),\(q.z)")
        } else if frame.topic == PipelineTopics.heading, let accuracy {
            let h = try decoded(frame, as: HeadingMessage.self)
            let heading = h.magneticHeading.isFinite ? format(h.magneticHeading, 4) : ""
            let acc = h.headingAccuracy.isFinite ? format(h.headingAccuracy, 4) : ""
            try accuracy.append("\(stampText(h.header.stamp)),\(heading),\(acc),\(FusionFlags(rawValue: h.flags))")
        }
        return
    }
    func finish() throws -> [WireFrame] {
        try quaternions.close()
        try accuracy?.close()
        notes.append("\(quaternions.rows) rows to \(quaternions.path)")
        return []
    }
}

/// Seconds with all nine nanosecond digits, exactly as stamped.
func stampText(_ t: RosTime) -> String {
    let ns = String(t.nanosec)
    return "\(t.sec).\(String(repeating: "0", count: 9 - ns.count))\(ns)"
}

/// A buffered CSV file.
final class CSVFile {
    let path: String
    let handle: FileHandle
    var buffer: String
    var rows = 0
    init(path: String, header: String) throws {
        self.path = path
        guard FileManager.default.createFile(atPath: path, contents: nil), let h = FileHandle(forWritingAtPath: path) else {
            throw PipelineRunError.stageFailed(stage: "csv", reason: "cannot create \(path)")
        }
        handle = h
        buffer = header + "\n"
    }
    func append(_ line: String) throws {
        buffer += line; buffer += "\n"
        rows += 1
        if buffer.utf8.count > 1 << 16 { try flush() }
    }
    func flush() throws { try handle.write(contentsOf: Data(buffer.utf8)); buffer = "" }
    func close() throws { try flush(); try handle.close() }
}

/// Records topics into a bag, finished properly at the end of the stream or on SIGINT/SIGTERM.
final class RecordSink: StageLogicBase, TransformLogic {
    let recorder: BagRecorder
    let topics: Set<String>
    var lastFlush = ProcessInfo.processInfo.systemUptime
    init(_ s: StageSettings) throws {
        let compression = s.string("compression") == "none" ? "" : s.string("compression")
        recorder = try BagRecorder(path: s.string("path"), storage: s.string("storage") == "sqlite3" ? .sqlite3 : .mcap, compression: compression)
        topics = Set(s.list("topics"))
    }
    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        guard topics.contains(frame.topic) else { return }
        guard frame.encoding == "cdr", let definition = MessageDefinitions.definition(for: frame.type) else {
            throw UnexpectedFrame(reason: "cannot record \(frame.type) in \(frame.encoding)")
        }
        // Log time = header stamp, read straight from the CDR header (sec, nanosec after the 4-byte encapsulation).
        guard let stamp = headerStamp(frame.payload) else { throw UnexpectedFrame(reason: "payload too short for a header") }
        let logTime = UInt64(UInt32(bitPattern: stamp.sec)) * 1_000_000_000 + UInt64(stamp.nanosec)
        try recorder.write(topic: "/" + frame.topic, type: frame.type, definition: definition, logTime: logTime, data: Array(frame.payload))
        // Flush at least once a second so a crash elsewhere loses at most the last second.
        let now = ProcessInfo.processInfo.systemUptime
        if now - lastFlush > 1 { try recorder.flush(); lastFlush = now }
        return
    }
    func finish() throws -> [WireFrame] {
        try recorder.finish()
        notes.append("recorded to \(recorder.path)")
        return []
    }
}

/// Publishes topics to external subscribers on their own endpoint, one frame per message, in CDR or
/// JSON. Lossless by default (back-pressure); `latest_only` keeps just the newest message for a slow
/// subscriber and counts what it replaced. It follows the subscriptions (XPUB, verbose both ways): a
/// message offered while nobody subscribes is not sent and is counted as such, so "published" only
/// counts messages a subscriber could receive.
final class PublishSink: StageLogicBase, TransformLogic {
    let socket: BusSocket
    let context: BusContext
    let topics: Set<String>
    let json: Bool
    let latestOnly: Bool
    var changeFilters: [String: HeadingChangeFilter] = [:]
    let minimumChange: Double
    var pending: [UInt8]?
    var dropped = 0, sent = 0, withoutSubscriber = 0
    /// Live subscribers.
    var subscribers = ReaderCount()
    init(_ s: StageSettings, log: @escaping @Sendable (String) -> Void) throws {
        context = BusContext()
        latestOnly = s.bool("latest_only")
        let endpoint = s.string("bind")
        socket = try readerFollowingPublisher(context, endpoint: endpoint, highWaterMark: latestOnly ? 1 : Int32(clamping: s.integer("high_water_mark")), stage: "publish")
        topics = Set(s.list("topics"))
        json = s.string("encoding") == "json"
        minimumChange = s.number("min_change_deg")
        super.init()
        try subscribers.wait(socket, for: s.integer("wait_for_subscribers"), logEveryPolls: 2) { missing in
            log("publish: waiting for \(missing) subscriber(s) on \(endpoint)")
        }
    }
    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        guard topics.contains(frame.topic) else { return }
        if minimumChange > 0, frame.type == HeadingMessage.typeName {
            // Deliver a heading only once it changed enough since the last one delivered on this topic.
            let h = try decoded(frame, as: HeadingMessage.self)
            let value = h.trueHeading.isFinite ? h.trueHeading : h.magneticHeading
            var filter = changeFilters[frame.topic] ?? HeadingChangeFilter(minimumChangeDegrees: minimumChange)
            let deliver = filter.offer(value) != nil
            changeFilters[frame.topic] = filter
            if !deliver { return }
        }
        var out = frame
        if json {
            do {
                guard let text = try jsonFromCDR(type: out.type, out.payload) else { throw UnexpectedFrame(reason: "no JSON form for \(out.type)") }
                out = WireFrame(topic: out.topic, type: out.type, encoding: "json", payload: Array(text.utf8))
            } catch let e as UnexpectedFrame { throw e } catch { throw UnexpectedFrame(reason: "undecodable \(out.type): \(error)") }
        }
        try subscribers.read(socket, timeoutMilliseconds: 0)   // the changes since the last frame
        guard subscribers.value > 0 else {
            withoutSubscriber += 1
            if pending != nil { dropped += 1; pending = nil }   // held for a subscriber who left
            return
        }
        let bytes = out.encoded()
        if latestOnly {
            if pending != nil { dropped += 1 }
            pending = bytes
            if try socket.send(pending!, blocking: false) { pending = nil; sent += 1 }
        } else {
            while try !socket.send(bytes, blocking: false) {
                try subscribers.read(socket, timeoutMilliseconds: 1)
                if PipelineSignals.stopRequested { dropped += 1; return }
            }
            sent += 1
        }
        return
    }
    func finish() throws -> [WireFrame] {
        if let p = pending, try socket.send(p, blocking: false) { sent += 1; pending = nil }
        notes.append("published \(sent) message(s)" + (dropped > 0 ? ", \(dropped) superseded or dropped" : "")
                     + (withoutSubscriber > 0 ? ", \(withoutSubscriber) not sent while nobody subscribed" : ""))
        socket.close()
        return []
    }
}

/// Counts messages on a topic and, when their header stamps are wall-clock times (the simulator's
/// `stamp: wall`), the latency from the source to here. Reports count, rate, p50/p99/max latency.
final class MeasureSink: StageLogicBase, InPlaceTransform {
    let topic: String
    let skipSeconds: Double
    let reportPath: String
    var count = 0
    var first: Double?, last = 0.0
    var latencies: [Double] = []
    init(_ s: StageSettings) { topic = s.string("topic"); skipSeconds = s.number("skip_seconds"); reportPath = s.string("report_path") }

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        guard frame.topic == topic else { return }
        measure(headerStamp(frame.payload))
    }

    // Reads every frame in place (only the header stamp of its topic).
    var worksInPlace: Bool { true }
    var writesInPlace: Bool { false }
    var forwardsMessage: Bool { false }
    func inPlaceSample(_ frame: WireFrame.View) -> InPlaceSample? { .unchanged }
    func apply(_ sample: InPlaceSample, to frame: WireFrame.View, extra: inout [WireFrame]) {
        guard frame.topic == topic else { return }
        measure(frame.payload.count >= 12 ? headerStamp(UnsafeRawBufferPointer(frame.payload)) : nil)
    }

    func measure(_ stamp: (sec: Int32, nanosec: UInt32)?) {
        let now = ProcessInfo.processInfo.systemUptime
        if first == nil { first = now }
        last = now
        count += 1
        guard let stamp else { return }
        let sec = Double(stamp.sec), ns = Double(stamp.nanosec)
        let wall = wallClockNow()
        let latency = (Double(wall.sec) - sec) + (Double(wall.nanosec) - ns) * 1e-9
        // Only meaningful for wall-clock stamps, and after the warm-up.
        if abs(latency) < 10 && now - first! >= skipSeconds { latencies.append(latency) }
    }

    func finish() throws -> [WireFrame] {
        let seconds = (first.map { last - $0 }) ?? 0
        var text = "measured \(count) \(topic) messages"
        var json = "{\"messages\":\(count),\"seconds\":\(seconds)"
        if seconds > 0 { text += String(format: " in %.3f s (%.0f/s)", seconds, Double(count) / seconds) }
        if !latencies.isEmpty {
            let sorted = latencies.sorted()
            func pct(_ q: Double) -> Double { sorted[min(sorted.count - 1, Int(q * Double(sorted.count - 1)))] * 1e6 }
            text += String(format: "; latency after the first %.0f s: p50 %.0f us, p99 %.0f us, max %.0f us", skipSeconds, pct(0.5), pct(0.99), sorted.last! * 1e6)
            json += ",\"p50_us\":\(pct(0.5)),\"p99_us\":\(pct(0.99)),\"max_us\":\(sorted.last! * 1e6),\"latency_samples\":\(sorted.count)"
        }
        notes.append(text)
        if !reportPath.isEmpty { try (json + "}\n").write(toFile: reportPath, atomically: true, encoding: .utf8) }
        return []
    }
}
