import Foundation
import CompassCore
import WireFormat
import MessageBus

/// One self-contained HTML file (inline SVG, nothing fetched) that shows what the filter did: a
/// summary table, heading with its accuracy band, flags as shaded spans, field strength and dip,
/// the magnetometer points before and after calibration in three projections, and the gyro bias.
/// Reads fusion's outputs and, for the raw magnetometer points, the source's imu/mag.
final class ReportSink: StageLogic, SinkLogic, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// The HTML file to write.
        var path = ""
        /// A title for the page (e.g. the bag's name).
        var title = "GyroCompass replay"
        /// A reference orientation (BROAD-style t,qw,qx,qy,qz[,movement] CSV, plain or .gz); "" = none.
        var truth = ""
        /// A second run to overlay (t,qw,qx,qy,qz CSV: `replay --csv` of another filter or pipeline, or
        /// another tool's output); "" = none.
        var compare = ""
        /// Its name on the page ("" = the file's name).
        var compareLabel = ""

        static let table = SettingTable<Settings>([
            .string("path", \.path, required: true, writesFile: true, "the HTML file to write"),
            .string("title", \.title, "the page's title, e.g. the bag"),
            .string(
                "truth", \.truth,
                "reference orientation to score against, BROAD-style t,qw,qx,qy,qz[,movement] CSV (or .csv.gz)"),
            .string(
                "compare", \.compare,
                "a second run to overlay and score beside this one: t,qw,qx,qy,qz CSV (replay --csv of another filter "
                    + "or pipeline, or another tool's)"),
            .string("compare_label", \.compareLabel, "the second run's name on the page ('' = its file name)"),
        ])
    }

    static let type = StageType(
        name: "report", role: .sink, summary: "a self-contained HTML report with plots of what the filter did",
        settings: Settings.table
    ) { settings, _ in try ReportSink(settings) }

    let settings: Settings
    var t: [Double] = [], heading: [Double] = [], accuracy: [Double] = [], strength: [Double] = [], dip: [Double] = []
    var flags: [UInt32] = []
    var raw = EvenSample(), calibrated = EvenSample()
    var expected: (strength: Double, dip: Double)?
    /// The gyro bias the filter removed: raw minus fused angular velocity at the same stamp, rad/s.
    var biasT: [Double] = [], bias: [Vector3] = []
    /// Raw and fused gyro readings by stamp (nanoseconds) waiting for their partner: the two streams
    /// reach the sink on different inputs, the raw one far ahead. Bounded: a stamp one side never
    /// produces (a sample the filter skipped) is dropped with the oldest.
    var unpairedRaw: [Int64: Vector3] = [:], unpairedFused: [Int64: Vector3] = [:]
    var pairs = 0
    /// Every calibration accepted, as its status said.
    var fits: [CalibrationStatusMessage] = []
    var acceptedFits = AcceptedFits()
    var calibration: CalibrationStatusMessage?
    /// The motors' field per ampere the calibration applies (calibration/motor, microtesla per ampere),
    /// and each motor current drawn while it was in force (amperes).
    var motorCoefficients: Vector3?
    var motorCurrents: [Int64: Double] = [:]
    /// The latest verdict counts of each magnetometer ("mag": the primary's interference/status; the
    /// others' interference/status/NAME).
    var magnetometerStatuses: [String: InterferenceStatusMessage] = [:]
    /// Points spread evenly over the whole run, at most `limit`: every `stride`-th is kept, and when
    /// the kept ones reach twice the limit every other is dropped and the stride doubles.
    struct EvenSample {
        static let limit = 1500
        private(set) var points: [Vector3] = []
        private var stride = 1, seen = 0

        mutating func add(_ v: Vector3) {
            defer { seen += 1 }
            guard seen % stride == 0 else { return }
            points.append(v)
            if points.count >= 2 * Self.limit {
                points = points.enumerated().filter { $0.offset % 2 == 0 }.map(\.element)
                stride *= 2
            }
        }
    }

    /// The reference, read at start so a bad file fails before the replay.
    let reference: TruthComparison?
    /// The fused orientation per IMU sample (seconds from 1700000000, as the reference).
    var fusedT: [Double] = [], fused: [Quaternion] = []

    /// The second run, read at start as the reference is.
    let compared: TruthComparison?
    var comparedLabel: String {
        settings.compareLabel.isEmpty
            ? String(settings.compare.split(separator: "/").last ?? Substring(settings.compare)) : settings.compareLabel
    }

    init(_ settings: Settings) throws {
        self.settings = settings
        reference = settings.truth.isEmpty ? nil : try TruthComparison(path: settings.truth)
        compared =
            settings.compare.isEmpty ? nil : try TruthComparison(path: settings.compare, what: "the run to compare")
    }

    var inputHandling: InputHandling { .decoded }

    func consume(_ frame: consuming WireFrame) throws {
        switch frame.topic {
        case PipelineTopics.heading:
            let h = try decoded(frame, as: HeadingMessage.self)
            t.append(h.header.stamp.seconds)
            heading.append(h.magneticHeading)
            accuracy.append(h.headingAccuracy)
            flags.append(h.fusionFlags.rawValue)
            let field = h.fieldStrengthAndDip
            strength.append(field.strengthMicrotesla)
            dip.append(field.dipDegrees)
            if h.magneticField.isFinite { calibrated.add(h.magneticField * 1e6) }
        case PipelineTopics.imuRaw:
            let m = try decoded(frame, as: ImuMessage.self)
            pair(stamp: m.header.stamp, raw: m.angularVelocity, fused: nil)
        case PipelineTopics.imuFused:
            let m = try decoded(frame, as: ImuMessage.self)
            if reference != nil || compared != nil {
                fusedT.append(Double(m.header.stamp.sec - 1_700_000_000) + Double(m.header.stamp.nanosec) * 1e-9)
                fused.append(m.orientation)
            }
            pair(stamp: m.header.stamp, raw: nil, fused: m.angularVelocity)
        case PipelineTopics.magnetometer:
            let m = try decoded(frame, as: MagneticFieldMessage.self)
            if m.magneticField.isFinite { raw.add(m.magneticField * 1e6) }
        case PipelineTopics.calibrationStatus:
            let c = try decoded(frame, as: CalibrationStatusMessage.self)
            calibration = c
            if acceptedFits.isNewFit(c) { fits.append(c) }
        case PipelineTopics.motorCompensation:
            motorCoefficients = try decoded(frame, as: Vector3StampedMessage.self).vector
        case PipelineTopics.motorCurrent where frame.type == BatteryStateMessage.typeName:
            // A graph may bring it twice (from the source and through fusion): counted once by its stamp.
            let m = try decoded(frame, as: BatteryStateMessage.self)
            if m.drawnAmperes.isFinite, motorCoefficients != nil {
                motorCurrents[Self.nanoseconds(m.header.stamp)] = m.drawnAmperes
            }
        case PipelineTopics.interferenceStatus:
            let i = try decoded(frame, as: InterferenceStatusMessage.self)
            if i.expectedStrength.isFinite { expected = (i.expectedStrength, i.expectedDip) }
            magnetometerStatuses[PipelineTopics.primaryMagnetometerName] = i
        default:
            // Each extra magnetometer's verdicts (interference/status/NAME), for the summary.
            if let name = PipelineTopics.otherInterferenceName(frame.topic) {
                magnetometerStatuses[name] = try decoded(frame, as: InterferenceStatusMessage.self)
            }
        }
    }

    /// Pairs a raw and a fused rate of the same stamp; every tenth pair (plenty for a slowly varying
    /// bias) goes into the plot as raw minus fused.
    func pair(stamp: RosTime, raw: Vector3?, fused: Vector3?) {
        let key = Self.nanoseconds(stamp)
        var r = raw, f = fused
        if raw != nil { f = unpairedFused.removeValue(forKey: key) } else { r = unpairedRaw.removeValue(forKey: key) }
        guard let r, let f else {
            if let raw { unpairedRaw[key] = raw } else if let fused { unpairedFused[key] = fused }
            if unpairedRaw.count + unpairedFused.count > 200_000 {
                unpairedRaw.removeAll(keepingCapacity: true)
                unpairedFused.removeAll(keepingCapacity: true)
            }
            return
        }
        pairs += 1
        if pairs % 10 == 1 {
            biasT.append(stamp.seconds)
            bias.append(r - f)
        }
    }

    static func nanoseconds(_ stamp: RosTime) -> Int64 {
        Int64(stamp.sec) &* 1_000_000_000 &+ Int64(stamp.nanosec)
    }

    /// Spans of time during which `flag` was set, seconds from the first heading.
    func spans(_ flag: UInt32) -> [(Double, Double)] {
        guard let t0 = t.first else { return [] }
        var out: [(Double, Double)] = [], start: Double?
        for i in t.indices {
            let on = flags[i] & flag != 0
            if on, start == nil { start = t[i] - t0 }
            if !on, let s = start {
                out.append((s, t[i] - t0))
                start = nil
            }
        }
        if let s = start, let last = t.last { out.append((s, last - t0)) }
        return out
    }

    func close() throws {
        guard let first = t.first, let last = t.last else {
            notes.append("no headings: \(settings.path) not written")
            return
        }
        let rel = t.map { $0 - first }, span = max(last - first, 1e-3)
        let page = ReportPage(sink: self, relative: rel, span: span)
        let w = try BufferedFileWriter(path: settings.path)
        try w.write(page.html())
        try w.close()
        // A truth from another recording would score a good run as broken: said, and the exit code says it.
        if let problem = page.truthMismatch {
            notes.append("warning: \(settings.truth): \(problem)")
            losses += 1
        }
        notes.append("report of \(t.count) headings to \(settings.path)")
        return
    }
}
