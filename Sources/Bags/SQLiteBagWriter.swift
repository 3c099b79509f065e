import CSQLite

/// Writes rosbag2's sqlite3 storage (`.db3`) in the layout rosbag2 (Iron and later) creates, schema
/// version 4: `schema`, `metadata`, `topics`, `message_definitions` (so readers can decode types they
/// do not know, like gyrocompass_msgs) and `messages`, inserted in transactions of `batchSize`.
public final class SQLiteBagWriter {
    public let path: String
    let db: OpaquePointer
    var insert: OpaquePointer?
    var topicIds: [String: Int64] = [:]
    var definedTypes: Set<String> = []
    var pending = 0
    /// Messages per transaction. Default 1000.
    public var batchSize = 1000
    var finished = false

    /// SQLITE_TRANSIENT is a cast macro Swift cannot import: the value -1 as a destructor.
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    public init(path: String) throws(BagError) {
        self.path = path
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let handle
        else {
            let reason = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let handle { sqlite3_close(handle) }
            throw .writeFailed(path: path, reason: reason)
        }
        db = handle
        do throws(BagError) {
            try exec(
                """
                CREATE TABLE schema(schema_version INTEGER PRIMARY KEY, ros_distro TEXT NOT NULL);
                CREATE TABLE metadata(id INTEGER PRIMARY KEY, metadata_version INTEGER NOT NULL,
                    metadata TEXT NOT NULL);
                CREATE TABLE topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,
                    serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL,
                    type_description_hash TEXT NOT NULL);
                CREATE TABLE message_definitions(id INTEGER PRIMARY KEY, topic_type TEXT NOT NULL,
                    encoding TEXT NOT NULL, encoded_message_definition TEXT NOT NULL,
                    type_description_hash TEXT NOT NULL);
                CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL, timestamp INTEGER NOT NULL,
                    data BLOB NOT NULL);
                CREATE INDEX timestamp_idx ON messages (timestamp ASC);
                INSERT INTO schema(schema_version, ros_distro) VALUES (4, 'gyrocompass');
                BEGIN;
                """)
            guard
                sqlite3_prepare_v2(
                    db, "INSERT INTO messages (topic_id, timestamp, data) VALUES (?, ?, ?)", -1, &insert, nil)
                    == SQLITE_OK
            else {
                throw BagError.writeFailed(path: path, reason: String(cString: sqlite3_errmsg(db)))
            }
        } catch {
            sqlite3_close(handle)
            throw error
        }
    }

    deinit { if !finished { try? finish() } }

    func exec(_ sql: String) throws(BagError) {
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(db, sql, nil, nil, &message) == SQLITE_OK else {
            let reason = message.map { String(cString: $0) } ?? "sqlite3_exec failed"
            sqlite3_free(message)
            throw .writeFailed(path: path, reason: reason)
        }
    }

    /// Registers a topic (once) and its type's ros2msg definition (once per type; "" if unknown).
    public func addTopic(_ topic: String, type: String, definition: String = "", encoding: String = "cdr")
        throws(BagError)
    {
        guard topicIds[topic] == nil else { return }
        if !definedTypes.contains(type) {
            var def: OpaquePointer?
            guard
                sqlite3_prepare_v2(
                    db,
                    "INSERT INTO message_definitions (topic_type, encoding, encoded_message_definition, "
                        + "type_description_hash) VALUES (?, 'ros2msg', ?, '')",
                    -1, &def, nil) == SQLITE_OK
            else {
                throw .writeFailed(path: path, reason: String(cString: sqlite3_errmsg(db)))
            }
            defer { sqlite3_finalize(def) }
            sqlite3_bind_text(def, 1, type, -1, Self.transient)
            sqlite3_bind_text(def, 2, definition, -1, Self.transient)
            guard sqlite3_step(def) == SQLITE_DONE else {
                throw .writeFailed(path: path, reason: String(cString: sqlite3_errmsg(db)))
            }
            definedTypes.insert(type)
        }
        let id = Int64(topicIds.count + 1)
        var stmt: OpaquePointer?
        guard
            sqlite3_prepare_v2(
                db,
                "INSERT INTO topics (id, name, type, serialization_format, offered_qos_profiles, "
                    + "type_description_hash) VALUES (?, ?, ?, ?, '', '')",
                -1, &stmt, nil) == SQLITE_OK
        else {
            throw .writeFailed(path: path, reason: String(cString: sqlite3_errmsg(db)))
        }
        defer { sqlite3_finalize(stmt) }
        sqlite3_bind_int64(stmt, 1, id)
        sqlite3_bind_text(stmt, 2, topic, -1, Self.transient)
        sqlite3_bind_text(stmt, 3, type, -1, Self.transient)
        sqlite3_bind_text(stmt, 4, encoding, -1, Self.transient)
        guard sqlite3_step(stmt) == SQLITE_DONE else {
            throw .writeFailed(path: path, reason: String(cString: sqlite3_errmsg(db)))
        }
        topicIds[topic] = id
    }

    public func write(topic: String, timestamp: UInt64, data: [UInt8]) throws(BagError) {
        guard let id = topicIds[topic] else {
            throw .writeFailed(path: path, reason: "topic '\(topic)' was not added before writing")
        }
        sqlite3_reset(insert)
        sqlite3_bind_int64(insert, 1, id)
        sqlite3_bind_int64(insert, 2, Int64(clamping: timestamp))
        _ = data.withUnsafeBytes { sqlite3_bind_blob(insert, 3, $0.baseAddress, Int32($0.count), Self.transient) }
        guard sqlite3_step(insert) == SQLITE_DONE else {
            throw .writeFailed(path: path, reason: String(cString: sqlite3_errmsg(db)))
        }
        pending += 1
        if pending >= batchSize { try flush() }
    }

    /// Commits the open transaction.
    public func flush() throws(BagError) {
        try exec("COMMIT; BEGIN;")
        pending = 0
    }

    public func finish() throws(BagError) {
        guard !finished else { return }
        finished = true
        sqlite3_finalize(insert)
        defer { sqlite3_close(db) }
        try exec("COMMIT;")
    }
}
