#if canImport(Glibc)
    import Glibc
#endif
import YAML

/// Any bag GyroCompass reads: a rosbag2 directory (metadata.yaml with `.mcap` or `.db3` files) or a
/// bare `.mcap` / `.db3` file.
public final class BagReader: @unchecked Sendable {
    public enum Storage: String, Sendable, CaseIterable { case mcap, sqlite3 }
    public let path: String
    public let storage: Storage
    /// The storage files, in playback order.
    public let files: [String]
    var mcapReaders: [MCAPReader] = []
    var sqliteReaders: [SQLiteBagReader] = []
    /// Messages per topic that metadata.yaml says the recording holds (empty without one).
    var recordedCounts: [String: UInt64] = [:]
    /// Fewer messages read than metadata.yaml counts, met in salvage mode.
    var countDamage: [BagError] = []

    public init(path: String) throws(BagError) {
        self.path = path
        var st = stat()
        guard stat(path, &st) == 0 else { throw .cannotOpen(path: path, reason: String(cString: strerror(errno))) }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            let (storage, files, counts) = try Self.readMetadata(directory: path)
            self.storage = storage
            self.files = files
            recordedCounts = counts
        } else if path.hasSuffix(".db3") {
            storage = .sqlite3
            files = [path]
        } else {
            storage = .mcap
            files = [path]
        }
        for f in files {
            switch storage {
            case .mcap: mcapReaders.append(try MCAPReader(path: f))
            case .sqlite3: sqliteReaders.append(try SQLiteBagReader(path: f))
            }
        }
    }

    /// The files of one recording split by rosbag2 (`NAME_0.mcap`, `NAME_1.mcap`, ...: one name, every
    /// number from 0), in the order of their numbers; a lone file as it is; nil for files of
    /// different recordings, which would otherwise be played as one.
    static func splitParts(_ files: [String]) -> [String]? {
        if files.count == 1 { return files }
        var parts: [Int: String] = [:]
        var stem: Substring?
        for f in files {
            let name = f[..<(f.lastIndex(of: ".") ?? f.endIndex)]
            guard let underscore = name.lastIndex(of: "_"), let n = Int(name[name.index(after: underscore)...]),
                n >= 0, stem == nil || stem == name[..<underscore]
            else { return nil }
            stem = name[..<underscore]
            parts[n] = f
        }
        guard parts.count == files.count, parts.keys.max() == files.count - 1 else { return nil }
        return (0..<files.count).map { parts[$0]! }
    }

    /// rosbag2's metadata.yaml: storage identifier and relative file paths. Without one, the
    /// directory's .mcap or .db3 files: one, or the numbered parts of one split recording.
    static func readMetadata(directory: String) throws(BagError) -> (Storage, [String], [String: UInt64]) {
        let metaPath = directory + "/metadata.yaml"
        guard let text = YAMLParser.readFile(metaPath) else {
            let entries = listDirectory(directory)
            let mcaps = entries.filter { $0.hasSuffix(".mcap") }, dbs = entries.filter { $0.hasSuffix(".db3") }
            guard mcaps.isEmpty || dbs.isEmpty else {
                throw .notABag(
                    path: directory,
                    reason: "no metadata.yaml, and both .mcap and .db3 files: name the file to read")
            }
            guard let (storage, files) = mcaps.isEmpty ? dbs.isEmpty ? nil : (Storage.sqlite3, dbs) : (.mcap, mcaps)
            else { throw .notABag(path: directory, reason: "no metadata.yaml and no .mcap or .db3 file") }
            guard let parts = splitParts(files) else {
                throw .notABag(
                    path: directory,
                    reason: "no metadata.yaml, and \(files.count) files that are not the numbered parts of one "
                        + "recording (\(files.sorted().prefix(4).joined(separator: ", "))"
                        + "\(files.count > 4 ? ", ..." : "")): name the file to read")
            }
            return (storage, parts.map { directory + "/" + $0 }, [:])
        }
        let root: YAMLNode?
        do { root = try YAMLParser.parse(text, file: metaPath) } catch {
            throw .metadata(path: metaPath, reason: error.description)
        }
        guard let info = root?["rosbag2_bagfile_information"] else {
            throw .metadata(path: metaPath, reason: "no rosbag2_bagfile_information mapping")
        }
        let id = info["storage_identifier"]?.scalar ?? ""
        let storage: Storage
        switch id {
        case "mcap": storage = .mcap
        case "sqlite3": storage = .sqlite3
        default:
            throw .metadata(
                path: metaPath,
                reason:
                    "unsupported storage_identifier '\(id)' at \(info["storage_identifier"]?.mark.description ?? "?")")
        }
        guard let rel = info["relative_file_paths"]?.sequence?.compactMap(\.scalar), !rel.isEmpty else {
            throw .metadata(path: metaPath, reason: "relative_file_paths is missing or empty")
        }
        if let twice = rel.first(where: { name in rel.filter { $0 == name }.count > 1 }) {
            throw .metadata(path: metaPath, reason: "relative_file_paths lists \(twice) more than once")
        }
        var counts: [String: UInt64] = [:]
        for entry in info["topics_with_message_count"]?.sequence ?? [] {
            guard let name = entry["topic_metadata"]?["name"]?.scalar,
                let count = entry["message_count"]?.scalar.flatMap({ UInt64($0) })
            else { continue }
            counts[name, default: 0] += count
        }
        return (storage, rel.map { directory + "/" + $0 }, counts)
    }

    /// Calls `body` for every message, file after file.
    /// With a metadata.yaml that counts the messages per topic, a whole read that finds fewer (rows
    /// deleted, a file replaced by a shorter one) is damage too.
    public func forEachMessage(_ options: BagReadOptions = .init(), _ body: (BagMessage) throws -> Void) throws {
        countDamage.removeAll()
        // Counting costs a look-up per message: only done when there is a count to compare with.
        let compare = !recordedCounts.isEmpty && options.startTime == nil && options.endTime == nil
        // A few topics, each message's topic sharing its channel's storage: a scan with == (which
        // compares the storage first) is cheaper than hashing the string.
        var counts: [(topic: String, read: UInt64)] = []
        let counting: (BagMessage) throws -> Void = { m in
            if let i = counts.firstIndex(where: { $0.topic == m.topic }) {
                counts[i].read += 1
            } else {
                counts.append((m.topic, 1))
            }
            try body(m)
        }
        for r in mcapReaders { try r.forEachMessage(options, compare ? counting : body) }
        for r in sqliteReaders { try r.forEachMessage(options, compare ? counting : body) }
        guard compare else { return }
        for (topic, expected) in recordedCounts.sorted(by: { $0.key < $1.key })
        where options.topics?.contains(topic) ?? true {
            let got = counts.first { $0.topic == topic }?.read ?? 0
            guard got < expected else { continue }
            let error = BagError.missingMessages(path: path, topic: topic, expected: expected, read: got)
            guard options.salvage else { throw error }
            countDamage.append(error)
        }
    }

    /// Chunk compressions used by the MCAP files (from their chunk indexes; "" = none).
    public var chunkCompressions: Set<String>? {
        let indexes = mcapReaders.flatMap(\.chunkIndexes)
        return indexes.isEmpty ? nil : Set(indexes.map(\.compression))
    }

    /// The message definition the bag carries for a topic: (type, encoding such as "ros2msg", text), or
    /// nil when the bag has none (older sqlite3 bags).
    public func schema(forTopic topic: String) -> (type: String, encoding: String, text: String)? {
        for r in mcapReaders {
            if let ch = r.channels.values.first(where: { $0.topic == topic }), let sc = r.schemas[ch.schemaId] {
                return (sc.name, sc.encoding, String(decoding: sc.data, as: UTF8.self))
            }
        }
        for r in sqliteReaders {
            if let t = r.topicsById.values.first(where: { $0.name == topic }), let d = r.definitions[t.type] {
                return (t.type, d.encoding, d.text)
            }
        }
        return nil
    }

    /// Damage met in salvage mode.
    public var damage: [BagError] { mcapReaders.flatMap(\.damage) + sqliteReaders.flatMap(\.damage) + countDamage }

    /// Topics over all files.
    public func topics() throws -> [BagTopic] {
        var merged: [String: BagTopic] = [:]
        let all = try mcapReaders.flatMap { try $0.topics() } + sqliteReaders.flatMap { try $0.topics() }
        for t in all {
            if var m = merged[t.name] {
                m.messageCount = m.messageCount.addingSaturated(t.messageCount)
                merged[t.name] = m
            } else {
                merged[t.name] = t
            }
        }
        return merged.values.sorted { $0.name < $1.name }
    }

    /// Total size of the storage files, bytes.
    public var sizeBytes: Int {
        mcapReaders.reduce(0) { $0 + $1.size }
            + sqliteReaders.reduce(0) { total, r in
                var st = stat()
                return total + (stat(r.path, &st) == 0 ? Int(st.st_size) : 0)
            }
    }
}

func listDirectory(_ path: String) -> [String] {
    guard let d = opendir(path) else { return [] }
    defer { closedir(d) }
    var names: [String] = []
    while let e = readdir(d) {
        let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}
