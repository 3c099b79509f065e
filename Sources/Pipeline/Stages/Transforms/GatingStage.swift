import CompassCore
import WireFormat
import MessageBus

/// Interference gating: runs its own complementary filter and magnetic gate over the stream, so every
/// magnetometer sample is flagged for strength, dip and consistency with the gyro (the disturbance
/// that keeps strength and dip still turns the compass against the gyro). Counts and durations go out
/// on interference/status; with `drop`, flagged samples do not reach fusion.
final class GatingStage: StageLogic, InPlaceTransform, @unchecked Sendable {
    struct Settings {
        /// Expected field strength (microtesla) and dip (degrees); nil = from the position below, else
        /// the calibration radius, else learned.
        var expectedStrengthMicrotesla: Double?
        var expectedDipDegrees = 0.0
        /// Position for the World Magnetic Model's expected field, and the model date (nil = today).
        var position: MagneticModelLookup.Position?
        var decimalYear: Double?
        /// Relative strength tolerance; dip tolerance, degrees.
        var strengthTolerance = 0.1, dipToleranceDegrees = 5.0
        /// Drop flagged magnetometer samples instead of passing them on.
        var drop = false
        /// Publish interference/status this often (stream seconds), and on every change.
        var statusSeconds = 1.0

        static let specs: [SettingSpec] =
            [
                SettingSpec(
                    "expected_strength_ut", .number, "0",
                    "expected field strength, microtesla; 0 = from the World Magnetic Model position below, "
                        + "else the calibration radius, else learned", range: 0...1000),
                SettingSpec(
                    "expected_dip_deg", .number, "0", "expected dip, degrees; used with expected_strength_ut",
                    range: -90...90),
            ]
            + SettingSpec.position(
                latitudeHelp: "WGS-84 latitude, degrees, for the World Magnetic Model's expected field",
                dateHelp: "decimal year for the model (2025 to 2030); '' = today")
            + [
                SettingSpec("strength_tolerance", .number, "0.1", "relative strength tolerance", range: 0.001...10),
                SettingSpec("dip_tolerance_deg", .number, "5", "dip tolerance, degrees", range: 0.01...180),
                SettingSpec("drop", .bool, "false", "drop flagged magnetometer samples instead of passing them on"),
                SettingSpec(
                    "status_seconds", .number, "1", "publish interference/status this often (and on every change)",
                    range: 0.001...86_400),
            ]

        init(_ s: StageSettings) {
            if s.number("expected_strength_ut") > 0 {
                expectedStrengthMicrotesla = s.number("expected_strength_ut")
                expectedDipDegrees = s.number("expected_dip_deg")
            }
            position = MagneticModelLookup.Position(s)
            decimalYear = s.optionalNumber("date")
            strengthTolerance = s.number("strength_tolerance")
            dipToleranceDegrees = s.number("dip_tolerance_deg")
            drop = s.bool("drop")
            statusSeconds = s.number("status_seconds")
        }
    }

    static let type = StageType(
        name: "gating", role: .transform,
        summary: "flags (or drops) magnetometer samples disturbed in strength, dip or consistency with the gyro",
        settings: Settings.specs, outputTopics: [PipelineTopics.interferenceStatus], check: GatingStage.checkModel
    ) { s, _ in try GatingStage(Settings(s)) }

    let settings: Settings
    var filter: ComplementaryFilter
    var aligner = SampleAligner()
    /// True when the expected field came from the settings (a calibration radius does not replace it).
    let explicitReference: Bool
    var assessed: UInt32 = 0, flagged: UInt32 = 0, periods: UInt32 = 0
    var disturbedSeconds = 0.0, disturbedSince: Double?
    var lastFlags: FusionFlags = []
    var throttle: StatusThrottle<Bool>
    var header = RosHeader(stamp: RosTime(sec: 0, nanosec: 0), frameId: "")

    init(_ settings: Settings) throws {
        self.settings = settings
        var filterSettings = ComplementaryFilterSettings()
        filterSettings.magneticGate.strengthTolerance = settings.strengthTolerance
        filterSettings.magneticGate.dipToleranceDegrees = settings.dipToleranceDegrees
        if let strength = settings.expectedStrengthMicrotesla {
            filterSettings.magneticGate.referenceFieldMicrotesla = strength
            filterSettings.magneticGate.referenceDipDegrees = settings.expectedDipDegrees
            explicitReference = true
        } else if let position = settings.position {
            guard let year = settings.decimalYear ?? MagneticModelLookup.today else {
                throw StageFailure("the system clock gives no date for the model")
            }
            var lookup = MagneticModelLookup()
            let elements = try lookup.elements(at: position, decimalYear: year).get()
            filterSettings.magneticGate.referenceFieldMicrotesla = elements.totalNanotesla / 1000
            filterSettings.magneticGate.referenceDipDegrees = elements.inclinationDegrees
            explicitReference = true
        } else {
            explicitReference = false
        }
        filter = ComplementaryFilter(settings: filterSettings)
        throttle = StatusThrottle(intervalSeconds: settings.statusSeconds)
    }

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        switch frame.topic {
        case PipelineTopics.imuRaw:
            let m = try imuSample(frame)
            output.append(frame)
            observe(m.header, m.angularVelocity, m.linearAcceleration)
        case PipelineTopics.magnetometer:
            let m = try magneticSample(frame)
            if assess(m.header, m.field) || !settings.drop { output.append(frame) }
            status(m.header, into: &output)
        case PipelineTopics.calibrationStatus:
            // A calibration's radius is the expected strength unless one was given.
            if !explicitReference, let c = try? CalibrationStatusMessage(cdrBytes: frame.payload),
                c.state == OnlineCalibrator.State.calibrated.rawValue, c.fieldStrength.isFinite,
                let dip = filter.magneticGate.referenceDipDegrees
            {
                filter.setMagneticReference(strengthMicrotesla: c.fieldStrength, dipDegrees: dip)
            }
            output.append(frame)
        default:
            output.append(frame)
        }
    }

    func observe(_ h: RosHeader, _ angularVelocity: Vector3, _ linearAcceleration: Vector3) {
        header = h
        let sample = ImuSample(
            timestamp: h.stamp.seconds, angularVelocity: angularVelocity, specificForce: linearAcceleration)
        if let pair = aligner.imu(sample) {
            _ = filter.update(imu: pair.imu, magnetometer: pair.magnetometer)
        }
    }

    /// Flags one magnetometer sample (tesla); true when it is clean (or not assessed yet).
    func assess(_ h: RosHeader, _ field: Vector3) -> Bool {
        var clean = true
        if let pair = aligner.magnetometer(
            MagnetometerSample(timestamp: h.stamp.seconds, fieldMicrotesla: field * 1e6)),
            let o = filter.update(imu: pair.imu, magnetometer: pair.magnetometer), !o.flags.contains(.initialising)
        {
            assessed += 1
            let reasons = o.flags.intersection([
                .magneticStrengthDisturbed, .magneticDipDisturbed, .magneticGyroInconsistent, .magnetometerRejected,
            ])
            clean = reasons.isEmpty
            track(clean: clean, time: h.stamp.seconds, flags: reasons)
        }
        return clean
    }

    /// In place (observing only) unless flagged samples are dropped; a calibration status, which may
    /// change the reference, takes the general path.
    var inputHandling: InputHandling { settings.drop ? .decoded : .inPlace(.sameMessage) }

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
            status(h, into: &extra)
        case .unchanged: break
        }
    }

    func track(clean: Bool, time: Double, flags: FusionFlags) {
        lastFlags = flags
        if clean {
            if let since = disturbedSince {
                disturbedSeconds += time - since
                disturbedSince = nil
            }
        } else {
            flagged += 1
            if disturbedSince == nil {
                disturbedSince = time
                periods += 1
            }
        }
    }

    func status(_ header: RosHeader, into output: inout [WireFrame], force: Bool = false) {
        let t = header.stamp.seconds
        let disturbed = disturbedSince != nil
        guard throttle.due(disturbed, at: t, force: force) else { return }
        let running = disturbedSince.map { t - $0 } ?? 0
        let m = InterferenceStatusMessage(
            header: header, disturbed: disturbed, flags: lastFlags.rawValue, samplesAssessed: assessed,
            samplesFlagged: flagged, disturbedPeriods: periods, disturbedSeconds: disturbedSeconds + running,
            expectedStrength: filter.magneticGate.referenceFieldMicrotesla ?? .nan,
            expectedDip: filter.magneticGate.referenceDipDegrees ?? .nan)
        output.append(cdrFrame(m, topic: PipelineTopics.interferenceStatus))
    }

    func finish() throws -> [WireFrame] {
        var out: [WireFrame] = []
        status(header, into: &out, force: true)
        notes.append(
            "\(flagged) of \(assessed) magnetometer samples flagged in \(periods) disturbed "
                + "period(s)\(settings.drop ? " and dropped" : "")"
        )
        return out
    }
}

extension GatingStage {
    /// The expected field must come out of the model when a position is given (checked at load).
    @Sendable static func checkModel(_ s: StageSettings) -> SettingProblem? {
        if let problem = MagneticModelLookup.Position.check(s) { return problem }
        guard let position = MagneticModelLookup.Position(s),
            let year = s.optionalNumber("date") ?? MagneticModelLookup.today
        else { return nil }
        var lookup = MagneticModelLookup()
        if case .failure(let why) = lookup.elements(at: position, decimalYear: year) {
            return SettingProblem(
                s.optionalNumber("date") == nil ? "latitude" : "date", "the World Magnetic Model refuses it: \(why)")
        }
        return nil
    }
}
