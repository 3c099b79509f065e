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

        static let table = SettingTable<Settings>([
            .string("path", \.path, required: true, "the HTML file to write"),
            .string("title", \.title, "the page's title, e.g. the bag"),
            .string(
                "truth", \.truth,
                "reference orientation to score against, BROAD-style t,qw,qx,qy,qz[,movement] CSV (or .csv.gz)"),
        ])
    }

    static let type = StageType(
        name: "report", role: .sink, summary: "a self-contained HTML report with plots of what the filter did",
        settings: Settings.table
    ) { settings, _ in try ReportSink(settings) }

    let settings: Settings
    var t: [Double] = [], heading: [Double] = [], accuracy: [Double] = [], strength: [Double] = [], dip: [Double] = []
    var flags: [UInt16] = []
    var raw = EvenSample(), calibrated = EvenSample()
    var expected: (strength: Double, dip: Double)?
    var biasT: [Double] = [], bias: [Vector3] = []
    var fits: [(t: Double, rms: Double)] = []
    var acceptedFits = AcceptedFits()
    var calibration: CalibrationStatusMessage?
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

    init(_ settings: Settings) throws {
        self.settings = settings
        reference = settings.truth.isEmpty ? nil : try TruthComparison(path: settings.truth)
    }

    var inputHandling: InputHandling { .decoded }

    func consume(_ frame: consuming WireFrame) throws {
        switch frame.topic {
        case PipelineTopics.heading:
            let h = try decoded(frame, as: HeadingMessage.self)
            t.append(h.header.stamp.seconds)
            heading.append(h.magneticHeading)
            accuracy.append(h.headingAccuracy)
            flags.append(h.flags)
            let field = h.fieldStrengthAndDip
            strength.append(field.strengthMicrotesla)
            dip.append(field.dipDegrees)
            if h.magneticField.isFinite { calibrated.add(h.magneticField * 1e6) }
        case PipelineTopics.imuFused where reference != nil:
            let m = try decoded(frame, as: ImuMessage.self)
            fusedT.append(Double(m.header.stamp.sec - 1_700_000_000) + Double(m.header.stamp.nanosec) * 1e-9)
            fused.append(m.orientation)
        case PipelineTopics.magnetometer:
            let m = try decoded(frame, as: MagneticFieldMessage.self)
            if m.magneticField.isFinite { raw.add(m.magneticField * 1e6) }
        case PipelineTopics.calibrationStatus:
            let c = try decoded(frame, as: CalibrationStatusMessage.self)
            calibration = c
            if c.gyroBias.isFinite {
                biasT.append(c.header.stamp.seconds)
                bias.append(c.gyroBias)
            }
            if acceptedFits.isNewFit(c) { fits.append((c.header.stamp.seconds, c.rmsResidual)) }
        case PipelineTopics.interferenceStatus:
            let i = try decoded(frame, as: InterferenceStatusMessage.self)
            if i.expectedStrength.isFinite { expected = (i.expectedStrength, i.expectedDip) }
        default:
            break
        }
    }

    /// Spans of time during which `flag` was set, seconds from the first heading.
    func spans(_ flag: UInt16) -> [(Double, Double)] {
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
        notes.append("report of \(t.count) headings to \(settings.path)")
        return
    }
}
