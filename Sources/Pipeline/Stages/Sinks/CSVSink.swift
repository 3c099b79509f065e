import CompassCore
import WireFormat
import MessageBus

/// Writes t,qw,qx,qy,qz for every imu/data message (the BROAD scorer's contract) and, if asked,
/// t,heading_deg,accuracy_deg,flags for every heading message.
final class CSVSink: StageLogic, SinkLogic, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// Output file for the orientations ("" = none).
        var path = ""
        /// Optional second file for headings and their accuracy ("" = none).
        var accuracyPath = ""

        static let table = SettingTable<Settings>([
            .string(
                "path", \.path, writesFile: true,
                "output file: t,qw,qx,qy,qz per imu/data message (BROAD scorer contract); '' = none"),
            .string(
                "accuracy_path", \.accuracyPath, writesFile: true,
                "optional second file: t,heading_deg,accuracy_deg,flags per heading message"),
        ])
    }

    static let type = StageType(
        name: "csv", role: .sink, summary: "orientation (and heading accuracy) CSV files for scoring",
        settings: Settings.table, continuesFromRetransmission: true,
        check: { settings, _ in
            settings.path.isEmpty && settings.accuracyPath.isEmpty
                ? SettingProblem("path", "a csv stage needs 'path', 'accuracy_path' or both") : nil
        }
    ) { settings, context in CSVSink(settings, resuming: context.output == .continues) }

    let settings: Settings
    /// Opened at the first frame, so a run that fails before it leaves existing files untouched.
    var quaternions: BufferedFileWriter?
    var accuracy: BufferedFileWriter?
    var opened = false
    var rows = 0
    /// The row being written, reused.
    var row = TextRow()
    /// The names of each flags value seen (a run meets a few dozen combinations).
    var flagNames: [UInt32: String] = [:]

    /// A restarted sink (`OutputAfterRestart.continues`) continues the files after their last complete row.
    let resuming: Bool
    /// Resumed files: their last rows, which rows read again must follow.
    var quaternionsResumed: ResumePoint?
    var accuracyResumed: ResumePoint?

    init(_ settings: Settings, resuming: Bool = false) {
        self.settings = settings
        self.resuming = resuming
    }

    func open() throws {
        opened = true
        quaternions = try open(settings.path, header: "t,qw,qx,qy,qz\n", resumed: &quaternionsResumed)
        accuracy = try open(
            settings.accuracyPath, header: "t,heading_deg,accuracy_deg,flags\n", resumed: &accuracyResumed)
    }

    func open(_ path: String, header: String, resumed: inout ResumePoint?) throws -> BufferedFileWriter? {
        guard !path.isEmpty else { return nil }
        let file =
            resuming ? try BufferedFileWriter(appendingCompleteLinesOf: path) : try BufferedFileWriter(path: path)
        if !resuming || file.keptBytes == 0 {
            try file.write(header)
        } else {
            notes.append("resumed \(path) after its last complete row (\(file.keptBytes) bytes kept)")
            resumed = ResumePoint(what: path, unit: "row", last: ResumePoint.stamp(ofRow: file.lastLine ?? ""))
        }
        return file
    }

    var inputHandling: InputHandling { .decoded }

    func consume(_ frame: consuming WireFrame) throws {
        if !opened { try open() }
        if frame.topic == PipelineTopics.imuFused, let quaternions {
            let m = try decoded(frame, as: ImuMessage.self)
            if quaternionsResumed?.isWritten(m.header.stamp) == true { return }
            let q = m.orientation
            // t,qw,qx,qy,qz: stampText(t), then each component as `\(x)` prints it.
            row.clear()
            row.append(stamp: m.header.stamp)
            for x in [q.w, q.x, q.y, q.z] {
                row.append(byte: UInt8(ascii: ","))
                row.append(x)
            }
            row.append(byte: UInt8(ascii: "\n"))
            try quaternions.write(row)
            rows += 1
        } else if frame.topic == PipelineTopics.heading, let accuracy {
            let h = try decoded(frame, as: HeadingMessage.self)
            if accuracyResumed?.isWritten(h.header.stamp) == true { return }
            // t,heading_deg,accuracy_deg,flags: format(x, 4) or empty where not finite, the flags' names.
            row.clear()
            row.append(stamp: h.header.stamp)
            for x in [h.magneticHeading, h.headingAccuracy] {
                row.append(byte: UInt8(ascii: ","))
                if x.isFinite { row.append(x, decimals: 4) }
            }
            row.append(byte: UInt8(ascii: ","))
            let flags = h.fusionFlags
            if let known = flagNames[flags.rawValue] {
                row.append(known)
            } else {
                let names = "\(flags)"
                flagNames[flags.rawValue] = names
                row.append(names)
            }
            row.append(byte: UInt8(ascii: "\n"))
            try accuracy.write(row)
        }
    }

    /// Each burst of input reaches the file: a killed sink loses only what it had not read yet, and
    /// its replacement continues after the last complete row.
    func inputDrained() throws {
        try quaternions?.flush()
        try accuracy?.flush()
    }

    func close() throws {
        guard opened else {
            let files = [settings.path, settings.accuracyPath].filter { !$0.isEmpty }
            notes.append("nothing arrived; \(files.joined(separator: " and ")) not written")
            return
        }
        guard inputsComplete else {
            // The run failed upstream: the rows are kept under the name that says they are partial.
            let kept = try [quaternions, accuracy].compactMap { try $0?.abandon() }
            notes.append(
                "INCOMPLETE: the stream failed upstream; \(rows) rows kept as \(kept.joined(separator: " and "))")
            losses += 1
            return
        }
        try quaternions?.close()
        try accuracy?.close()
        for resumed in [quaternionsResumed, accuracyResumed].compactMap({ $0 }) {
            notes.append(resumed.summary)
            if !resumed.provenWhole { losses += 1 }
        }
        notes.append(
            settings.path.isEmpty ? "headings to \(settings.accuracyPath)" : "\(rows) rows to \(settings.path)")
        return
    }
}
