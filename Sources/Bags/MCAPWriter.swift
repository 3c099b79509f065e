#if canImport(Glibc)
    import Glibc
#endif

/// Writes MCAP files in the ROS 2 profile: chunked (zstd by default, lz4 or none), with message
/// indexes, a summary section (schemas, channels, statistics, chunk indexes, summary offsets), and
/// CRCs everywhere the format has them. `finish()` writes the summary and footer; until then, every
/// chunk already flushed is intact and readable by a forward scan (so a crash loses at most the open
/// chunk, and `flush()` bounds that).
public final class MCAPWriter {
    public let path: String
    public let compression: String
    /// Uncompressed bytes that close a chunk. Default 1 MiB.
    public var chunkTargetBytes = 1 << 20

    private let file: UnsafeMutablePointer<FILE>
    private var position = 0
    private var dataCRC: UInt32 = 0
    private var schemas: [(id: UInt16, name: String, encoding: String, data: [UInt8])] = []
    private var schemaIds: [String: UInt16] = [:]
    private var channels:
        [(id: UInt16, schemaId: UInt16, topic: String, encoding: String, metadata: [String: String])] = []
    private var channelIds: [String: UInt16] = [:]
    private var chunk: [UInt8] = []
    private var chunkStart = UInt64.max, chunkEnd = UInt64.min
    private var chunkMessageIndex: [UInt16: [(UInt64, UInt64)]] = [:]
    private var chunkIndexRecords: [[UInt8]] = []
    private var messageCount: UInt64 = 0
    private var channelCounts: [UInt16: UInt64] = [:]
    private var firstTime = UInt64.max, lastTime = UInt64.min
    private var sequence: [UInt16: UInt32] = [:]
    private var finished = false

    /// - Parameters:
    ///   - compression: "zstd" (default), "lz4" or "" (none).
    public init(path: String, compression: String = "zstd", library: String = "gyrocompass") throws(BagError) {
        guard ["", "zstd", "lz4"].contains(compression) else {
            throw .unsupportedCompression(path: path, offset: 0, compression: compression)
        }
        guard let f = fopen(path, "wb") else {
            throw .writeFailed(path: path, reason: String(cString: strerror(errno)))
        }
        self.path = path
        self.compression = compression
        file = f
        try emit(MCAPReader.magic, crc: true)
        var header = RecordBuilder()
        header.string("ros2")
        header.string(library)
        try emit(header.record(0x01), crc: true)
    }

    deinit { if !finished { try? finish() } }

    /// Registers (once) a topic with its ROS type and definition; returns the channel id.
    @discardableResult
    public func addTopic(_ topic: String, type: String, definition: String, encoding: String = "cdr") throws(BagError)
        -> UInt16
    {
        if let id = channelIds[topic] { return id }
        let schemaId: UInt16
        if let s = schemaIds[type] {
            schemaId = s
        } else {
            schemaId = UInt16(schemas.count + 1)
            schemas.append((schemaId, type, "ros2msg", Array(definition.utf8)))
            schemaIds[type] = schemaId
            try emit(schemaRecord(schemas.last!), crc: true)
        }
        let id = UInt16(channels.count + 1)
        channels.append((id, schemaId, topic, encoding, ["offered_qos_profiles": ""]))
        channelIds[topic] = id
        try emit(channelRecord(channels.last!), crc: true)
        return id
    }

    /// Appends one message (log and publish time in nanoseconds) to the open chunk.
    public func write(topic: String, logTime: UInt64, publishTime: UInt64? = nil, data: [UInt8]) throws(BagError) {
        guard let channel = channelIds[topic] else {
            throw .writeFailed(path: path, reason: "topic '\(topic)' was not added before writing")
        }
        var m = RecordBuilder()
        let seq = sequence[channel, default: 0]
        sequence[channel] = seq &+ 1
        m.u16(channel)
        m.u32(seq)
        m.u64(logTime)
        m.u64(publishTime ?? logTime)
        m.bytes(data)
        chunkMessageIndex[channel, default: []].append((logTime, UInt64(chunk.count)))
        chunk.append(contentsOf: m.record(0x05))
        chunkStart = min(chunkStart, logTime)
        chunkEnd = max(chunkEnd, logTime)
        firstTime = min(firstTime, logTime)
        lastTime = max(lastTime, logTime)
        messageCount += 1
        channelCounts[channel, default: 0] += 1
        if chunk.count >= chunkTargetBytes { try flush() }
    }

    /// Closes the open chunk (if any) and pushes it to the file.
    public func flush() throws(BagError) {
        defer { fflush(file) }
        guard !chunk.isEmpty else { return }
        let chunkOffset = UInt64(position)
        let compressed = ChunkCompression.compress(chunk, compression: compression)
        var c = RecordBuilder()
        c.u64(chunkStart)
        c.u64(chunkEnd)
        c.u64(UInt64(chunk.count))
        c.u32(CRC32.checksum(chunk))
        c.string(compression)
        c.u64(UInt64(compressed.count))
        c.bytes(compressed)
        let chunkRecord = c.record(0x06)
        try emit(chunkRecord, crc: true)
        // Message indexes for the chunk, one per channel, right after it.
        let indexStart = position
        var offsets: [(UInt16, UInt64)] = []
        for channel in chunkMessageIndex.keys.sorted() {
            offsets.append((channel, UInt64(position)))
            var mi = RecordBuilder()
            mi.u16(channel)
            let entries = chunkMessageIndex[channel]!
            mi.u32(UInt32(entries.count * 16))
            for (t, o) in entries {
                mi.u64(t)
                mi.u64(o)
            }
            try emit(mi.record(0x07), crc: true)
        }
        var ci = RecordBuilder()
        ci.u64(chunkStart)
        ci.u64(chunkEnd)
        ci.u64(chunkOffset)
        ci.u64(UInt64(chunkRecord.count))
        ci.u32(UInt32(offsets.count * 10))
        for (ch, off) in offsets {
            ci.u16(ch)
            ci.u64(off)
        }
        ci.u64(UInt64(position - indexStart))
        ci.string(compression)
        ci.u64(UInt64(compressed.count))
        ci.u64(UInt64(chunk.count))
        chunkIndexRecords.append(ci.record(0x08))
        chunk.removeAll(keepingCapacity: true)
        chunkMessageIndex.removeAll(keepingCapacity: true)
        chunkStart = .max
        chunkEnd = .min
    }

    /// Flushes, then writes DataEnd, the summary, summary offsets, footer and magic. Idempotent.
    public func finish() throws(BagError) {
        guard !finished else { return }
        finished = true
        defer { fclose(file) }
        try flush()
        var de = RecordBuilder()
        de.u32(dataCRC)
        try emit(de.record(0x0F), crc: false)

        let summaryStart = UInt64(position)
        var summary: [UInt8] = []
        var groups: [(UInt8, UInt64, UInt64)] = []
        func group(_ op: UInt8, _ records: [[UInt8]]) {
            guard !records.isEmpty else { return }
            let start = summaryStart + UInt64(summary.count)
            for r in records { summary.append(contentsOf: r) }
            groups.append((op, start, summaryStart + UInt64(summary.count) - start))
        }
        group(0x03, schemas.map(schemaRecord))
        group(0x04, channels.map(channelRecord))
        var st = RecordBuilder()
        st.u64(messageCount)
        st.u16(UInt16(schemas.count))
        st.u32(UInt32(channels.count))
        st.u32(0)
        st.u32(0)
        st.u32(UInt32(chunkIndexRecords.count))
        st.u64(messageCount > 0 ? firstTime : 0)
        st.u64(messageCount > 0 ? lastTime : 0)
        st.u32(UInt32(channelCounts.count * 10))
        for (ch, n) in channelCounts.sorted(by: { $0.key < $1.key }) {
            st.u16(ch)
            st.u64(n)
        }
        group(0x0B, [st.record(0x0B)])
        group(0x08, chunkIndexRecords)
        let summaryOffsetStart = summaryStart + UInt64(summary.count)
        for (op, start, length) in groups {
            var so = RecordBuilder()
            so.u8(op)
            so.u64(start)
            so.u64(length)
            summary.append(contentsOf: so.record(0x0E))
        }
        // The summary CRC covers the summary through the footer's summary_offset_start field.
        var footer = RecordBuilder()
        footer.u8(0x02)
        footer.u64(20)
        footer.u64(summaryStart)
        footer.u64(summaryOffsetStart)
        let crc = footer.bytes.withUnsafeBytes { CRC32.update(CRC32.checksum(summary), $0) }
        footer.u32(crc)
        let footerHead = footer.bytes
        try emit(summary, crc: false)
        try emit(footerHead, crc: false)
        try emit(MCAPReader.magic, crc: false)
    }

    private func schemaRecord(_ s: (id: UInt16, name: String, encoding: String, data: [UInt8])) -> [UInt8] {
        var r = RecordBuilder()
        r.u16(s.id)
        r.string(s.name)
        r.string(s.encoding)
        r.u32(UInt32(s.data.count))
        r.bytes(s.data)
        return r.record(0x03)
    }

    private func channelRecord(
        _ c: (id: UInt16, schemaId: UInt16, topic: String, encoding: String, metadata: [String: String])
    ) -> [UInt8] {
        var r = RecordBuilder()
        r.u16(c.id)
        r.u16(c.schemaId)
        r.string(c.topic)
        r.string(c.encoding)
        var map = RecordBuilder()
        for (k, v) in c.metadata.sorted(by: { $0.key < $1.key }) {
            map.string(k)
            map.string(v)
        }
        r.u32(UInt32(map.bytes.count))
        r.bytes(map.bytes)
        return r.record(0x04)
    }

    private func emit(_ bytes: [UInt8], crc: Bool) throws(BagError) {
        let n = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        guard n == bytes.count else { throw .writeFailed(path: path, reason: String(cString: strerror(errno))) }
        if crc { dataCRC = bytes.withUnsafeBytes { CRC32.update(dataCRC, $0) } }
        position += bytes.count
    }
}

/// Little-endian record assembly.
struct RecordBuilder {
    var bytes: [UInt8] = []
    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func string(_ s: String) {
        u32(UInt32(s.utf8.count))
        bytes.append(contentsOf: s.utf8)
    }
    mutating func bytes(_ b: [UInt8]) { bytes.append(contentsOf: b) }
    /// opcode, u64 length, content.
    func record(_ op: UInt8) -> [UInt8] {
        var r: [UInt8] = [op]
        r.reserveCapacity(9 + bytes.count)
        withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { r.append(contentsOf: $0) }
        r.append(contentsOf: bytes)
        return r
    }
}
