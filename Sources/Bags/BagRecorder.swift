#if canImport(Glibc)
    import Glibc
#endif
import YAML

/// Records messages into a bag: a rosbag2 directory (metadata.yaml plus one .mcap or .db3 file) when
/// the path has no .mcap/.db3 ending, otherwise that bare file. `finish()` completes the storage file
/// and writes metadata.yaml; until then everything flushed is readable.
public final class BagRecorder {
    public let path: String
    public let storage: BagReader.Storage
    let storagePath: String
    let directory: String?
    var mcap: MCAPWriter?
    var sqlite: SQLiteBagWriter?
    var topics: [(name: String, type: String, count: Int)] = []
    var topicIndex: [String: Int] = [:]
    var first = UInt64.max, last = UInt64.min
    var finished = false

    /// - Parameters:
    ///   - storage: for a directory, mcap (default) or sqlite3; ignored for a bare file.
    ///   - compression: MCAP chunk compression: zstd (default), lz4 or "" (none).
    /// A new recording at `path`. An existing recording is never overwritten, unless `replacing` (a
    /// restarted recorder writing its killed predecessor's single file again).
    public init(
        path: String, storage: BagReader.Storage = .mcap, compression: String = "zstd", replacing: Bool = false
    ) throws(BagError) {
        self.path = path
        if path.hasSuffix(".mcap") || path.hasSuffix(".db3") {
            if !replacing, access(path, F_OK) == 0 {
                throw .writeFailed(path: path, reason: "already exists; recordings are never overwritten")
            }
            self.storage = path.hasSuffix(".db3") ? .sqlite3 : .mcap
            storagePath = path
            directory = nil
        } else {
            var st = stat()
            if stat(path, &st) == 0 {
                throw .writeFailed(path: path, reason: "already exists; rosbag2 directories are never overwritten")
            }
            guard mkdir(path, 0o755) == 0 else {
                throw .writeFailed(path: path, reason: String(cString: strerror(errno)))
            }
            self.storage = storage
            let base = path.split(separator: "/").last.map(String.init) ?? "bag"
            storagePath = path + "/" + base + "_0." + (storage == .mcap ? "mcap" : "db3")
            directory = path
        }
        switch self.storage {
        case .mcap: mcap = try MCAPWriter(path: storagePath, compression: compression)
        case .sqlite3: sqlite = try SQLiteBagWriter(path: storagePath)
        }
    }

    deinit { if !finished { try? finish() } }

    /// Records one serialized message; `definition` is the ros2msg text for its type.
    public func write(topic: String, type: String, definition: String, logTime: UInt64, data: [UInt8]) throws(BagError)
    {
        if topicIndex[topic] == nil {
            topicIndex[topic] = topics.count
            topics.append((topic, type, 0))
            try mcap?.addTopic(topic, type: type, definition: definition)
            try sqlite?.addTopic(topic, type: type, definition: definition)
        }
        try mcap?.write(topic: topic, logTime: logTime, data: data)
        try sqlite?.write(topic: topic, timestamp: logTime, data: data)
        topics[topicIndex[topic]!].count += 1
        first = min(first, logTime)
        last = max(last, logTime)
    }

    /// Pushes buffered messages to disk (a crash after this loses nothing written before it).
    public func flush() throws(BagError) {
        try mcap?.flush()
        try sqlite?.flush()
    }

    public func finish() throws(BagError) {
        guard !finished else { return }
        finished = true
        try mcap?.finish()
        try sqlite?.finish()
        guard let directory else { return }
        let count = topics.reduce(0) { $0 + $1.count }
        let start = count > 0 ? Int64(first) : 0
        let duration = count > 0 ? Int64(last - first) : 0
        let file = storagePath.split(separator: "/").last.map(String.init)!
        let info: YAMLValue = .mapping([
            (
                "rosbag2_bagfile_information",
                .mapping([
                    ("version", .integer(5)),
                    ("storage_identifier", .string(storage.rawValue)),
                    ("duration", .mapping([("nanoseconds", .integer(duration))])),
                    ("starting_time", .mapping([("nanoseconds_since_epoch", .integer(start))])),
                    ("message_count", .integer(Int64(count))),
                    (
                        "topics_with_message_count",
                        .sequence(
                            topics.map { t in
                                .mapping([
                                    (
                                        "topic_metadata",
                                        .mapping([
                                            ("name", .string(t.name)), ("type", .string(t.type)),
                                            ("serialization_format", .string("cdr")),
                                            ("offered_qos_profiles", .string("")),
                                        ])
                                    ),
                                    ("message_count", .integer(Int64(t.count))),
                                ])
                            })
                    ),
                    ("compression_format", .string("")),
                    ("compression_mode", .string("")),
                    ("relative_file_paths", .sequence([.string(file)])),
                    (
                        "files",
                        .sequence([
                            .mapping([
                                ("path", .string(file)),
                                ("starting_time", .mapping([("nanoseconds_since_epoch", .integer(start))])),
                                ("duration", .mapping([("nanoseconds", .integer(duration))])),
                                ("message_count", .integer(Int64(count))),
                            ])
                        ])
                    ),
                ])
            )
        ])
        let text: String
        do { text = try YAMLEmitter.emit(info) } catch {
            throw .writeFailed(path: directory + "/metadata.yaml", reason: error.description)
        }
        // Written to a temporary name and renamed, so a crash never leaves a half-written metadata.yaml.
        let target = directory + "/metadata.yaml", temporary = target + ".tmp"
        guard let f = fopen(temporary, "wb") else {
            throw .writeFailed(path: temporary, reason: String(cString: strerror(errno)))
        }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
        guard written == bytes.count, fflush(f) == 0, fsync(fileno(f)) == 0, fclose(f) == 0 else {
            throw .writeFailed(path: temporary, reason: String(cString: strerror(errno)))
        }
        guard rename(temporary, target) == 0 else {
            throw .writeFailed(path: target, reason: String(cString: strerror(errno)))
        }
    }
}
