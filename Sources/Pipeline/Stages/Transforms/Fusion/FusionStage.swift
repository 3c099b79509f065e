import Foundation
import CompassCore
import WireFormat
import MessageBus

/// The fusion filter as a stage: imu/data_raw + imu/mag in, heading (gyrocompass_msgs/Heading, with
/// true north when a position is known) and imu/data (sensor_msgs/Imu with the orientation) out.
///
/// It owns the one verdict on each magnetometer reading (its filter's `MagneticDisturbanceGate`,
/// published on interference/status), the magnetic reference that verdict compares with (the World
/// Magnetic Model at the site, else the accepted calibration's radius and the dip seen since, else
/// learned), the gyro bias (a state of the filter) and the site. The calibration it reads from
/// calibration/status: a new calibration renews the reference and widens the heading uncertainty.
final class FusionStage: StageLogic, InPlaceTransform, @unchecked Sendable {
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
    var held: [HeldSample] = []
    var frameIds: [String] = []

    /// The verdicts told on interference/status.
    var tally: InterferenceTally

    /// The site the magnetic reference was taken at; nil = none yet.
    var referenceSite: MagneticModelLookup.Position?

    /// Set by `FusionEngine`: each estimate (its heading message, not encoded, and the filter's output)
    /// goes here instead of onto the bus.
    var estimateSink: ((HeadingMessage, FusionOutput) -> Void)?

    /// The calibration last read from calibration/status.
    var calibration: CalibrationStatusMessage?

    /// The calibration the magnetic reference was last renewed for (nil while uncalibrated).
    var renewedFor: CalibrationStatusMessage?
    var lastHeader = RosHeader(stamp: RosTime(sec: 0, nanosec: 0), frameId: "")
    let log: @Sendable (String) -> Void

    init(_ settings: Settings, log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.settings = settings
        self.log = log
        switch settings.filter {
        case .kalman:
            filter = KalmanFilter(settings: settings.kalman)
        case .complementary:
            var c = ComplementaryFilterSettings(
                CommonFilterOptions(
                    sensorLatencySeconds: settings.sensorLatencySeconds,
                    referenceOffsetDegrees: settings.referenceOffsetDegrees))
            c.magneticGate = settings.gate
            filter = ComplementaryFilter(settings: c)
        }
        position = settings.position
        // The smoother is the filter then: it keeps every sample and gives the estimates at the end.
        if settings.smooth { filter = KalmanSmoother(settings: settings.kalman) }
        tally = InterferenceTally(statusSeconds: settings.statusSeconds)
    }

    /// The gate whose reference interference/status reports; while the smoother hands out its
    /// estimates, the forward filter's gate as the recording left it (the smoother is busy then).
    var gate: MagneticDisturbanceGate { finalGate ?? filter.magneticGate }

    var finalGate: MagneticDisturbanceGate?

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
            if f.status >= 0 && !f.isPlausiblePosition { implausibleFixes += 1 }
            if settings.position == nil, f.status >= 0, f.isPlausiblePosition {
                position = .init(
                    latitudeDegrees: f.latitude, longitudeDegrees: f.longitude,
                    heightKilometres: f.altitude.isFinite ? f.altitude / 1000 : 0)
                takeReference(at: f.header.stamp.seconds)
            }
            output.append(frame)  // the direction stage uses the fixes too
        case PipelineTopics.calibrationStatus:
            if let c = try? CalibrationStatusMessage(cdrBytes: frame.payload) { noteCalibration(c) }
            output.append(frame)  // status travels on to the sinks
        case PipelineTopics.truth:
            break  // the simulator's truth, for a summary that reads the source: nothing to fuse
        case PipelineTopics.motorCurrent, PipelineTopics.motorCompensation:
            output.append(frame)  // the calibration stage used it; a record sink and the report keep it
        case PipelineTopics.gnssVelocity:
            let m = try decoded(frame, as: TwistWithCovarianceStampedMessage.self)
            aid(
                velocity: GnssVelocitySample(
                    timestamp: m.header.stamp.seconds, velocityENU: m.linear, horizontalVariance: m.horizontalVariance))
            output.append(frame)
        case PipelineTopics.gnssHeading:
            let m = try decoded(frame, as: ImuMessage.self)
            aid(heading: m)
            output.append(frame)
        default:
            if let name = PipelineTopics.otherMagnetometerName(frame.topic) {
                let m = try magneticSample(frame)
                fuseOther(name, MagnetometerSample(timestamp: m.header.stamp.seconds, fieldMicrotesla: m.field * 1e6))
            } else if let name = PipelineTopics.otherCalibrationName(frame.topic) {
                if let c = try? CalibrationStatusMessage(cdrBytes: frame.payload) { noteCalibration(c, of: name) }
                output.append(frame)
            } else if PipelineTopics.perMagnetometerBase(of: frame.topic) == PipelineTopics.motorCompensation {
                output.append(frame)
            } else {
                throw UnexpectedFrame(
                    reason: "fusion reads \(PipelineTopics.imuRaw) and \(PipelineTopics.magnetometer) only")
            }
        }
    }

    /// Magnetometers besides the primary (imu/mag/NAME), by name.
    var others: [String: OtherMagnetometerState] = [:]

    /// Their names in the order they first appeared.
    var otherNames: [String] = []
    var primaryOutvoted = false

    /// GNSS messages the filter could not take (the complementary filter, the smoother).
    var gnssPassedOver = 0

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

    /// A pair from `FusionEngine`, outside the bus (its estimates go to `estimateSink`).
    func fuse(_ header: RosHeader, paired pair: (imu: ImuSample, magnetometer: MagnetometerSample?)) throws {
        pendingHeaders.append(header)
        var unused: [WireFrame] = []
        try fuse(pair, into: &unused)
    }

    /// Reads samples in place and publishes only its own outputs; fixes and status take the general path.
    var inputHandling: InputHandling { .inPlace(.ownFramesOnly) }

    func inPlaceSample(_ frame: WireFrame.View) -> InPlaceSample? { decodeInPlace(frame) }

    func apply(_ sample: InPlaceSample, to frame: WireFrame.View, extra: inout [WireFrame]) throws {
        switch sample {
        case .imu(let h, let w, let a, _): try fuseImu(h, w, a, into: &extra)
        case .magnetometer(let h, let field, _): try fuseMagnetometer(h, field, into: &extra)
        case .current, .unchanged: break
        }
    }

    /// Fixes whose position is off the earth, passed over (never a declination from them).
    var implausibleFixes = 0

    /// Judges the readings while no calibration stage speaks for them (no calibration/status came):
    /// readings that carry iron nobody removes make the heading unusable, and the filter is told so.
    var calibrationCheck: CalibrationCheck? = CalibrationCheck()
    var calibrationFinding: CalibrationCheck.Finding?
    var correctedDisagreement = (sin: 0.0, cos: 1.0, count: 0)
    var headingDeclaredUnusable = false

    func fuse(_ pair: (imu: ImuSample, magnetometer: MagnetometerSample?)?, into output: inout [WireFrame]) throws {
        guard let pair else { return }
        check(pair)
        var header =
            head < pendingHeaders.count
            ? pendingHeaders[head] : RosHeader(stamp: RosTime(seconds: pair.imu.timestamp), frameId: "imu_link")
        head += 1
        if head > 1024 {
            pendingHeaders.removeFirst(head)
            head = 0
        }
        if !settings.frameId.isEmpty { header.frameId = settings.frameId }
        if referenceSite == nil, position != nil { takeReference(at: header.stamp.seconds) }
        let north = trueNorth(at: header.stamp.seconds)
        if settings.smooth {
            _ = filter.update(imu: pair.imu, magnetometer: pair.magnetometer)
            if frameIds.last != header.frameId { frameIds.append(header.frameId) }
            held.append(
                HeldSample(
                    stamp: header.stamp, frameIndex: Int32(frameIds.count - 1), declination: north.declination,
                    northFlags: north.flags))
            return
        }
        guard let o = filter.update(imu: pair.imu, magnetometer: pair.magnetometer) else { return }
        if calibrationFinding != nil { compareWithCorrected(o, field: pair.magnetometer?.fieldMicrotesla) }
        publish(o, header: header, imu: pair.imu, field: pair.magnetometer?.fieldMicrotesla, north: north, &output)
        if !others.isEmpty { tellOthers(header, into: &output) }
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
        if let estimateSink {
            estimateSink(h, o)
        } else {
            output.append(cdrFrame(h, topic: PipelineTopics.heading))
            output.append(cdrFrame(FusionMessages.imu(o, header: header, sample: imu), topic: PipelineTopics.imuFused))
        }
        lastHeader = header
        if field != nil {
            // The primary's own verdict: with several magnetometers the output's flags are the heading's.
            let primary =
                settings.smooth || others.isEmpty
                ? nil : multiMagnetometerFilter?.primaryMagnetometerFlags.map { o.flags.union($0) }
            tally.count(primary ?? o.flags, at: header.stamp.seconds)
            if estimateSink == nil, let status = tally.status(header, gate: gate) {
                output.append(cdrFrame(status, topic: PipelineTopics.interferenceStatus))
            }
        }
    }

    func finish() throws -> [WireFrame] {
        var out: [WireFrame] = []
        try finish { out += $0 }
        return out
    }
}
