import CompassCore
import WireFormat
import MessageBus

/// The fusion filter as a stage: imu/data_raw + imu/mag in, heading (gyrocompass_msgs/Heading, with
/// true north when a position is known) and imu/data (sensor_msgs/Imu with the orientation) out.
final class FusionStage: StageLogic, InPlaceTransform, @unchecked Sendable {
    struct Settings {
        /// Which filter fuses: kalman | complementary.
        var filter = FilterKind.kalman
        /// The IMU's output latency to predict over, seconds.
        var sensorLatencySeconds = 0.0
        /// Subtracted from the heading ("this direction is zero"), degrees.
        var referenceOffsetDegrees = 0.0
        /// frame_id of the outputs; "" = that of the IMU messages.
        var frameId = ""
        /// Fixed position for the declination; nil = from fix messages, if any.
        var position: MagneticModelLookup.Position?
        /// Model date; nil = the date of each sample.
        var decimalYear: Double?
        /// Smooth offline (Kalman only): outputs come at the end of the stream, each estimate using
        /// the whole recording (`KalmanSmoother`).
        var smooth = false
        /// The Kalman filter's model (its defaults, the common options, the stage's parameters).
        var kalman = KalmanFilterSettings()

        static let specs: [SettingSpec] =
            [
                SettingSpec(
                    "filter", .string, "kalman", "the fusion filter", choices: FilterKind.allCases.map(\.rawValue)),
                SettingSpec(
                    "sensor_latency", .number, "0", "IMU output latency to predict over, seconds", range: 0...1),
                SettingSpec(
                    "reference_offset_deg", .number, "0", "subtracted from the heading ('this direction is zero')",
                    range: -360...360),
                SettingSpec("frame_id", .string, "", "frame_id of the outputs; '' = that of the IMU messages"),
                SettingSpec(
                    "smooth", .bool, "false",
                    "smooth offline (kalman only): every estimate uses the whole recording, past and future; "
                        + "outputs come when the source has ended (for bag replays)"),
            ]
            + SettingSpec.position(
                latitudeHelp: "WGS-84 latitude for the declination (true heading); '' = from fix messages if any",
                dateHelp:
                    "decimal year for the model; '' = the date of each sample; outside 2025 to 2030 the heading is "
                    + "flagged model_out_of_range"
            ) + KalmanParameters.specs

        init(_ s: StageSettings) {
            filter = FilterKind(rawValue: s.string("filter")) ?? .kalman
            sensorLatencySeconds = s.number("sensor_latency")
            referenceOffsetDegrees = s.number("reference_offset_deg")
            frameId = s.string("frame_id")
            position = MagneticModelLookup.Position(s)
            decimalYear = s.optionalNumber("date")
            smooth = s.bool("smooth")
            kalman = KalmanParameters.apply(
                s,
                to: KalmanFilterSettings(
                    CommonFilterOptions(
                        sensorLatencySeconds: sensorLatencySeconds, referenceOffsetDegrees: referenceOffsetDegrees)))
        }

        static func check(_ s: StageSettings) -> SettingProblem? {
            if s.bool("smooth"), s.string("filter") != FilterKind.kalman.rawValue {
                return SettingProblem(
                    "smooth", "smoothing runs the Kalman filter's model backwards: needs filter kalman")
            }
            return KalmanParameters.check(s) ?? MagneticModelLookup.Position.check(s)
        }
    }

    static let type = StageType(
        name: "fusion", role: .transform,
        summary: "the orientation filter: heading with its accuracy, true north and the fused orientation",
        settings: Settings.specs, outputTopics: [PipelineTopics.heading, PipelineTopics.imuFused],
        passesOn: .only([PipelineTopics.fix, PipelineTopics.calibrationStatus, PipelineTopics.interferenceStatus]),
        check: Settings.check
    ) { s, _ in FusionStage(Settings(s)) }

    let settings: Settings
    var filter: any OrientationFilter
    /// Declination source: the fixed position, or the latest fix message.
    var position: MagneticModelLookup.Position?
    var model = MagneticModelLookup()
    var aligner = SampleAligner()
    /// Header of every IMU sample not fused yet (exact stamps, frame id), in order.
    var pendingHeaders: [RosHeader] = []
    var head = 0
    /// With `smooth`: the forward pass, and what each accepted sample's outputs need besides the estimate.
    var smoother: KalmanSmoother?
    var held: [HeldSample] = []
    var frameIds: [String] = []

    init(_ settings: Settings) {
        self.settings = settings
        let options = CommonFilterOptions(
            sensorLatencySeconds: settings.sensorLatencySeconds, referenceOffsetDegrees: settings.referenceOffsetDegrees
        )
        filter = settings.filter == .kalman ? KalmanFilter(settings: settings.kalman) : settings.filter.make(options)
        position = settings.position
        if settings.smooth { smoother = KalmanSmoother(settings: settings.kalman) }
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
            if settings.position == nil, f.status >= 0, f.latitude.isFinite, f.longitude.isFinite {
                position = .init(
                    latitudeDegrees: f.latitude, longitudeDegrees: f.longitude,
                    heightKilometres: f.altitude.isFinite ? f.altitude / 1000 : 0)
            }
            output.append(frame)  // the direction stage uses the fixes too
        case PipelineTopics.calibrationStatus, PipelineTopics.interferenceStatus:
            output.append(frame)  // status travels on to the sinks
        default:
            throw UnexpectedFrame(
                reason: "fusion reads \(PipelineTopics.imuRaw) and \(PipelineTopics.magnetometer) only")
        }
    }

    func fuseImu(
        _ header: RosHeader, _ angularVelocity: Vector3, _ linearAcceleration: Vector3, into output: inout [WireFrame]
    ) throws {
        pendingHeaders.append(header)
        let sample = ImuSample(
            timestamp: header.stamp.seconds, angularVelocity: angularVelocity, specificForce: linearAcceleration)
        try fuse(aligner.imu(sample), into: &output)
    }

    /// `field` in tesla.
    func fuseMagnetometer(_ header: RosHeader, _ field: Vector3, into output: inout [WireFrame]) throws {
        try fuse(
            aligner.magnetometer(MagnetometerSample(timestamp: header.stamp.seconds, fieldMicrotesla: field * 1e6)),
            into: &output)
    }

    /// Reads samples in place and publishes only its own outputs; fixes and status take the general path.
    var inputHandling: InputHandling { .inPlace(.ownFramesOnly) }

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
        var header =
            head < pendingHeaders.count
            ? pendingHeaders[head] : RosHeader(stamp: RosTime(seconds: pair.imu.timestamp), frameId: "imu_link")
        head += 1
        if head > 1024 {
            pendingHeaders.removeFirst(head)
            head = 0
        }
        if !settings.frameId.isEmpty { header.frameId = settings.frameId }
        let north = trueNorth(at: header.stamp.seconds)
        if smoother != nil {
            smoother!.add(imu: pair.imu, magnetometer: pair.magnetometer)
            if frameIds.last != header.frameId { frameIds.append(header.frameId) }
            held.append(
                HeldSample(
                    stamp: header.stamp, frameIndex: Int32(frameIds.count - 1), declination: north.declination,
                    northFlags: north.flags))
            return
        }
        guard let o = filter.update(imu: pair.imu, magnetometer: pair.magnetometer) else { return }
        publish(o, header: header, imu: pair.imu, field: pair.magnetometer?.fieldMicrotesla, north: north, &output)
    }

    func publish(
        _ o: FusionOutput, header: RosHeader, imu: ImuSample, field: Vector3?,
        north: (declination: Double, flags: UInt16), _ output: inout [WireFrame]
    ) {
        var h = FusionMessages.heading(o, header: header, field: field)
        h.declination = north.declination
        h.trueHeading =
            h.magneticHeading.isFinite && north.declination.isFinite
            ? normalizedDegrees(h.magneticHeading + north.declination) : .nan
        h.flags |= north.flags
        output.append(cdrFrame(h, topic: PipelineTopics.heading))
        output.append(cdrFrame(FusionMessages.imu(o, header: header, sample: imu), topic: PipelineTopics.imuFused))
    }

    /// The parts of a bound in one line: "+-7.4 (95 %): filter 1.0, disturbance seen 0.4, unknown 3.5 of
    /// 3.6 (1-sigma degrees; 47.5 rad turned, fit 5.2 x its noise)".
    static func describe(_ p: HeadingAccuracyParts) -> String {
        "+-\(format(p.boundDegrees, 1)) (95 %): filter \(format(p.filterSigmaDegrees, 1)), disturbance seen "
            + "\(format(p.disturbanceSeenDegrees, 1)), unknown \(format(p.disturbanceUnknownSigmaDegrees, 1)) of "
            + "\(format(p.disturbancePriorSigmaDegrees, 1)) (1-sigma degrees; \(format(p.turnedRadians, 1)) rad "
            + "turned, fit \(format(p.fitInconsistency, 1)) x its noise)"
    }

    func finish() throws -> [WireFrame] {
        var out: [WireFrame] = []
        try finish { out += $0 }
        return out
    }

    func finish(emit: ([WireFrame]) throws -> Void) throws {
        var out: [WireFrame] = []
        try fuse(aligner.finish(), into: &out)
        if smoother != nil {
            // The backward pass, then every sample's outputs in order, a batch at a time.
            let samples = held
            held = []
            try smoother!.finish { i, o, imu, magnetometer in
                let h = samples[i]
                let header = RosHeader(stamp: h.stamp, frameId: frameIds[Int(h.frameIndex)])
                publish(
                    o, header: header, imu: imu, field: magnetometer?.fieldMicrotesla,
                    north: (h.declination, h.northFlags), &out)
                if out.count >= Publisher.maximumBatchFrames {
                    try emit(out)
                    out.removeAll(keepingCapacity: true)
                }
            }
        }
        notes.append(
            "heading accuracy at the end "
                + Self.describe(smoother?.headingAccuracyParts ?? filter.headingAccuracyParts))
        let k = smoother?.skipped ?? filter.skipped
        if k.total > 0 || k.stateResets > 0 || k.timelineRestarts > 0 {
            notes.append("filter skipped \(k.total) sample(s): \(k.reasons)")
        }
        try emit(out)
    }
}

/// What a smoothed sample's outputs need besides its estimate and the sample the smoother keeps (the
/// frame id is an index: it rarely changes, and a string per sample would double the memory a long
/// recording needs).
struct HeldSample {
    var stamp: RosTime
    var frameIndex: Int32
    var declination: Double
    var northFlags: UInt16
}

/// The two outputs of a fusion update: gyrocompass_msgs/Heading and sensor_msgs/Imu with orientation.
public enum FusionMessages {
    public static func heading(_ o: FusionOutput, header: RosHeader, field: Vector3?) -> HeadingMessage {
        HeadingMessage(
            header: header, magneticHeading: o.headingDegrees ?? .nan, trueHeading: .nan,
            headingAccuracy: o.headingAccuracyDegrees ?? .nan, declination: .nan, orientation: o.orientation,
            magneticField: field.map { $0 * 1e-6 } ?? Vector3(.nan, .nan, .nan),
            source: HeadingMessage.Source.fusion.rawValue, flags: o.flags.rawValue)
    }

    /// Orientation covariance: only the heading (about z) is estimated; x and y stay 0 (unknown).
    public static func imu(_ o: FusionOutput, header: RosHeader, sample: ImuSample) -> ImuMessage {
        var zCovariance = Covariance9.zero
        zCovariance.m8 = o.headingVarianceDegrees2.map { $0 * radiansPerDegree * radiansPerDegree } ?? 0
        return ImuMessage(
            header: header, orientation: o.orientation, orientationCovariance: zCovariance,
            angularVelocity: sample.angularVelocity - o.gyroBias, angularVelocityCovariance: .zero,
            linearAcceleration: sample.specificForce, linearAccelerationCovariance: .zero)
    }
}
