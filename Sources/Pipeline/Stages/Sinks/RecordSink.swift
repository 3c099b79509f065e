#if canImport(Glibc)
    import Glibc
#endif
import WireFormat
import Bags
import MessageBus
import Foundation

/// Records topics into a bag, finished properly at the end of the stream or on SIGINT/SIGTERM. A
/// restarted recorder (`OutputAfterRestart.continues`) records into the next split beside the killed one's
/// (`run.mcap` -> `run_1.mcap`, `run/` -> `run_1/`): that one ends where it was killed, without its
/// summary, and stays readable with `--salvage`; it is flushed every second. On a live stream the
/// replacement first reads again what its input still holds and records, per topic, only what
/// follows the killed split's last message (`ResumePoint`).
final class RecordSink: StageLogic, SinkLogic, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// rosbag2 directory (or .mcap / .db3 file) to create.
        var path = ""
        /// Storage of a directory.
        var storage = BagReader.Storage.mcap
        /// MCAP chunk compression.
        var compression = Compression.zstd
        /// Topics to record.
        var topics = [PipelineTopics.heading, PipelineTopics.imuFused]

        enum Compression: String, CaseIterable {
            case zstd, lz4, none
        }

        static let table = SettingTable<Settings>([
            .string(
                "path", \.path, required: true, writesRecording: true,
                "rosbag2 directory (or .mcap / .db3 file) to create"),
            .choice("storage", \.storage, "storage of a directory"),
            .choice("compression", \.compression, "MCAP chunk compression"),
            .strings("topics", \.topics, namesTopics: true, "topics to record"),
        ])

        /// The compression as `BagRecorder` names it ("" = none).
        var compressionName: String { compression == .none ? "" : compression.rawValue }
    }

    static let type = StageType(
        name: "record", role: .sink, summary: "a rosbag2 recording (MCAP or sqlite3) of chosen topics",
        settings: Settings.table, continuesFromRetransmission: true
    ) { settings, context in
        try RecordSink(
            settings, resuming: context.output == .continues, rewriting: context.output == .rewrites)
    }

    let settings: Settings
    let topics: Set<String>
    /// Created at the first frame, so a run that fails before it leaves an existing bag untouched.
    var recorder: BagRecorder?
    var lastFlush = Clocks.monotonicSeconds()

    /// Where this process records: the configured path, or the next free split when resuming.
    let path: String
    /// Resuming: the split the killed recorder wrote, and per topic where it stopped (read at the
    /// first frame, once the retransmission has arrived, since reading a long split takes time).
    let killedSplit: String?
    var resumed: [String: ResumePoint]?

    /// Writing again what a killed recorder began (its single file is replaced).
    let rewriting: Bool

    init(_ settings: Settings, resuming: Bool = false, rewriting: Bool = false) throws {
        self.settings = settings
        self.rewriting = rewriting
        topics = Set(settings.topics)
        path = resuming ? Self.nextSplit(of: settings.path) : settings.path
        killedSplit = path == settings.path ? nil : Self.previousSplit(of: path, first: settings.path)
        super.init()
        if rewriting { try Self.removeKilledRecording(at: path) }
        if let killedSplit {
            notes.append(
                "restarted: recording into \(path); \(killedSplit) ends where the killed recorder stopped "
                    + "(read it with --salvage)")
        }
    }

    /// A rosbag2 directory the killed recorder had begun, which its replacement records again from
    /// the start: removed, but only when it holds nothing a recorder does not write.
    static func removeKilledRecording(at path: String) throws {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else { return }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        let foreign = entries.filter { e in
            e != "metadata.yaml"
                && ![".mcap", ".db3", ".db3-journal", ".db3-wal", ".db3-shm"].contains { e.hasSuffix($0) }
        }
        guard foreign.isEmpty else {
            throw StageFailure(
                "cannot record \(path) again after a restart: it holds files a recorder does not write "
                    + "(\(foreign.sorted().prefix(3).joined(separator: ", ")))")
        }
        for e in entries { unlink(path + "/" + e) }
        guard rmdir(path) == 0 else {
            throw StageFailure("cannot record \(path) again after a restart: \(String(cString: strerror(errno)))")
        }
    }

    /// `run.mcap` -> `run_1.mcap` (then `_2`, ...), `run` -> `run_1`: the first that does not exist.
    static func nextSplit(of path: String) -> String {
        func exists(_ p: String) -> Bool { access(p, F_OK) == 0 }
        guard exists(path) else { return path }
        let ext = [".mcap", ".db3"].first { path.hasSuffix($0) } ?? ""
        let stem = String(path.dropLast(ext.count))
        var n = 1
        while exists("\(stem)_\(n)\(ext)") { n += 1 }
        return "\(stem)_\(n)\(ext)"
    }

    /// The split before `path` (`run_2.mcap` -> `run_1.mcap`, `run_1.mcap` -> `first`).
    static func previousSplit(of path: String, first: String) -> String {
        let ext = [".mcap", ".db3"].first { path.hasSuffix($0) } ?? ""
        let stem = path.dropLast(ext.count)
        guard let underscore = stem.lastIndex(of: "_"), let n = Int(stem[stem.index(after: underscore)...]), n > 1
        else { return first }
        return "\(stem[..<underscore])_\(n - 1)\(ext)"
    }

    /// Per recorded topic, the last message of the killed split (read past its missing end).
    func resumePoints(in split: String) -> [String: ResumePoint] {
        var last: [String: UInt64] = [:]
        var options = BagReadOptions()
        options.salvage = true
        options.topics = Set(topics.map { "/" + $0 })
        do {
            try BagReader(path: split).forEachMessage(options) { m in last[m.topic] = max(last[m.topic] ?? 0, m.logTime)
            }
        } catch {
            notes.append("restarted: cannot read \(split) to find where it stopped (\(error))")
        }
        return Dictionary(
            uniqueKeysWithValues: topics.map { topic in
                let stamp = last["/" + topic].map {
                    RosTime(sec: Int32(truncatingIfNeeded: $0 / 1_000_000_000), nanosec: UInt32($0 % 1_000_000_000))
                }
                return (topic, ResumePoint(what: "\(split), topic \(topic)", unit: "message", last: stamp))
            })
    }

    var inputHandling: InputHandling { .decoded }

    func consume(_ frame: consuming WireFrame) throws {
        guard topics.contains(frame.topic) else { return }
        guard frame.encoding == "cdr", let definition = KnownInterfaces.definition(for: frame.type) else {
            throw UnexpectedFrame(reason: "cannot record \(frame.type) in \(frame.encoding)")
        }
        // Log time = header stamp.
        guard let stamp = CDRHeaderStamp.read(frame.payload) else {
            throw UnexpectedFrame(reason: "payload too short for a header")
        }
        let logTime = UInt64(UInt32(bitPattern: stamp.sec)) * 1_000_000_000 + UInt64(stamp.nanosec)
        if let killedSplit {
            if resumed == nil { resumed = resumePoints(in: killedSplit) }
            if resumed![frame.topic]!.isWritten(RosTime(sec: stamp.sec, nanosec: stamp.nanosec)) { return }
        }
        if recorder == nil {
            recorder = try BagRecorder(
                path: path, storage: settings.storage, compression: settings.compressionName, replacing: rewriting)
        }
        guard let recorder else { return }
        try recorder.write(
            topic: "/" + frame.topic, type: frame.type, definition: definition, logTime: logTime,
            data: Array(frame.payload))
        // Flush at least once a second so a crash elsewhere loses at most the last second.
        let now = Clocks.monotonicSeconds()
        if now - lastFlush > 1 {
            try recorder.flush()
            lastFlush = now
        }
    }

    func close() throws {
        for point in (resumed ?? [:]).sorted(by: { $0.key < $1.key }).map(\.value) {
            notes.append(point.summary)
            if !point.provenWhole { losses += 1 }
        }
        guard let recorder else {
            notes.append(
                "nothing to record on \(topics.sorted().joined(separator: ", ")); \(path) not written")
            return
        }
        try recorder.finish()
        notes.append("recorded to \(recorder.path)")
        return
    }
}
