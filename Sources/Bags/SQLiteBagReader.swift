import CSQLite

/// Reads rosbag2's sqlite3 storage (`.db3`): tables `topics(id, name, type, serialization_format, ...)`
/// and `messages(id, topic_id, timestamp, data)`, through Debian's libsqlite3, read-only.
public final class SQLiteBagReader: @unchecked Sendable {
    public let path: String
    let db: OpaquePointer
    public private(set) var topicsById: [Int64: (name: String, type: String, encoding: String)] = [:]
    /// Message definitions by type (rosbag2 schema 4 and later), empty for older bags.
    public private(set) var definitions: [String: (encoding: String, text: String)] = [:]

    public init(path: String) throws(BagError) {
        self.path = path
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let handle { sqlite3_close(handle) }
            throw .sqlite(path: path, reason: message)
        }
        db = handle
        let rows: [(Int64, String, String, String)]
        do {
            rows = try query("SELECT id, name, type, serialization_format FROM topics") { s in
                (sqlite3_column_int64(s, 0), Self.text(s, 1), Self.text(s, 2), Self.text(s, 3))
            }
        } catch {
            sqlite3_close(handle)
            throw error
        }
        for (id, name, type, enc) in rows { topicsById[id] = (name, type, enc) }
        let definitionTables = try? query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'message_definitions'"
        ) { _ in true }
        let definitionRows =
            definitionTables?.isEmpty == false
            ? try? query("SELECT topic_type, encoding, encoded_message_definition FROM message_definitions") { st in
                (Self.text(st, 0), Self.text(st, 1), Self.text(st, 2))
            } : nil
        if let defs = definitionRows {
            for (type, encoding, text) in defs { definitions[type] = (encoding, text) }
        }
    }

    deinit { sqlite3_close(db) }

    static func text(_ s: OpaquePointer, _ column: Int32) -> String {
        guard let p = sqlite3_column_text(s, column) else { return "" }
        return String(cString: p)
    }

    func query<T>(_ sql: String, _ row: (OpaquePointer) throws -> T) throws(BagError) -> [T] {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
            throw .sqlite(path: path, reason: String(cString: sqlite3_errmsg(db)))
        }
        defer { sqlite3_finalize(stmt) }
        var out: [T] = []
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw .sqlite(path: path, reason: String(cString: sqlite3_errmsg(db))) }
            do { out.append(try row(stmt)) } catch let e as BagError { throw e } catch {
                throw .sqlite(path: path, reason: "\(error)")
            }
        }
        return out
    }

    /// Damage met in salvage mode (rows that cannot be read as messages).
    public private(set) var damage: [BagError] = []

    /// Rows no message can be made of, whatever topics are asked for: a topic_id the topics table
    /// lacks, a negative timestamp (before 1970: a rosbag2 recorder never writes one, and ordering by
    /// it would reverse the recording). Thrown, or listed as damage under salvage, before any message.
    func checkRows(_ options: BagReadOptions) throws {
        // (rows counted and the first named, what is wrong with them)
        let checks = [
            (
                "SELECT COUNT(*), MIN(topic_id) FROM messages WHERE topic_id NOT IN (SELECT id FROM topics)",
                "name a topic_id the topics table does not have (the first: "
            ),
            (
                "SELECT COUNT(*), MIN(id) FROM messages WHERE timestamp < 0",
                "have a negative timestamp (the first: row id "
            ),
        ]
        for (sql, what) in checks {
            let (count, first) =
                try query(sql) { s in (sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1)) }.first ?? (0, 0)
            guard count > 0 else { continue }
            let problem = BagError.corruptRecord(
                path: path, offset: 0, record: "messages table",
                reason: "\(count) row(s) \(what)\(first)); they are skipped")
            guard options.salvage else { throw problem }
            damage.append(problem)
        }
    }

    /// Calls `body` for every message that passes `options`, in timestamp order.
    public func forEachMessage(_ options: BagReadOptions = .init(), _ body: (BagMessage) throws -> Void) throws {
        damage.removeAll()
        try checkRows(options)
        var conditions = ["timestamp >= 0"]
        var sql = "SELECT topic_id, timestamp, data FROM messages"
        if let topics = options.topics {
            let ids = topicsById.filter { topics.contains($0.value.name) }.map { String($0.key) }
            conditions.append("topic_id IN (\(ids.isEmpty ? "NULL" : ids.joined(separator: ",")))")
        }
        if let s = options.startTime { conditions.append("timestamp >= \(Int64(clamping: s))") }
        if let e = options.endTime { conditions.append("timestamp < \(Int64(clamping: e))") }
        sql += " WHERE " + conditions.joined(separator: " AND ")
        sql += " ORDER BY timestamp, id"
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
            throw BagError.sqlite(path: path, reason: String(cString: sqlite3_errmsg(db)))
        }
        defer { sqlite3_finalize(stmt) }
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else {
                let error = BagError.sqlite(path: path, reason: String(cString: sqlite3_errmsg(db)))
                if options.salvage { break }
                throw error
            }
            let topicId = sqlite3_column_int64(stmt, 0)
            let time = sqlite3_column_int64(stmt, 1)
            let n = Int(sqlite3_column_bytes(stmt, 2))
            var data = [UInt8](repeating: 0, count: n)
            if n > 0, let p = sqlite3_column_blob(stmt, 2) {
                data.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(start: p, count: n)) }
            }
            guard let topic = topicsById[topicId] else { continue }  // counted by checkRows
            let t = UInt64(clamping: time)
            try body(
                BagMessage(
                    topic: topic.name, type: topic.type, encoding: topic.encoding, logTime: t, publishTime: t,
                    data: data))
        }
    }

    public func topics() throws -> [BagTopic] {
        let counts = try query("SELECT topic_id, COUNT(*) FROM messages GROUP BY topic_id") { s in
            (sqlite3_column_int64(s, 0), Int(sqlite3_column_int64(s, 1)))
        }
        let byId = Dictionary(counts, uniquingKeysWith: +)
        return topicsById.sorted { $0.value.name < $1.value.name }.map { id, t in
            BagTopic(name: t.name, type: t.type, encoding: t.encoding, messageCount: byId[id] ?? 0)
        }
    }
}
