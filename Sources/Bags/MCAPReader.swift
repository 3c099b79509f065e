/// Reads MCAP files (https://mcap.dev/spec) written by rosbag2, the `mcap` and `rosbags` libraries or
/// GyroCompass: every record type is recognised; chunks may be uncompressed, zstd or lz4; CRCs are
/// checked where the writer stored them. With a summary section, chunk indexes select the chunks to
/// decompress (topic and time filtering without touching the rest); without one, a forward scan.
/// Damage is reported with the byte offset and record; with `salvage`, reading resumes at the next
/// intact record and the damage is listed in `damage`.
public final class MCAPReader: @unchecked Sendable {
    public struct Schema: Sendable, Equatable { public var id: UInt16, name: String, encoding: String, data: [UInt8] }
    public struct Channel: Sendable, Equatable {
        public var id: UInt16, schemaId: UInt16, topic: String, messageEncoding: String, metadata: [String: String]
    }
    public struct ChunkIndex: Sendable, Equatable {
        public var messageStartTime: UInt64, messageEndTime: UInt64, chunkStartOffset: UInt64, chunkLength: UInt64
        public var channels: Set<UInt16>, compression: String, compressedSize: UInt64, uncompressedSize: UInt64
    }
    public struct Statistics: Sendable, Equatable {
        public var messageCount: UInt64, schemaCount: UInt16, channelCount: UInt32, attachmentCount: UInt32
        public var metadataCount: UInt32, chunkCount: UInt32, messageStartTime: UInt64, messageEndTime: UInt64
        public var channelMessageCounts: [UInt16: UInt64]
    }

    static let magic: [UInt8] = [0x89, 0x4D, 0x43, 0x41, 0x50, 0x30, 0x0D, 0x0A]

    public let path: String
    let file: MappedFile
    public internal(set) var profile = ""
    public internal(set) var library = ""
    public internal(set) var schemas: [UInt16: Schema] = [:] { didSet { messageHeaders.removeAll() } }
    public internal(set) var channels: [UInt16: Channel] = [:] { didSet { messageHeaders.removeAll() } }
    /// What every message of a channel carries (topic, type, encoding), indexed by channel id: built
    /// once per channel instead of two dictionary lookups and two struct copies per message. Emptied
    /// whenever a schema or channel record changes them.
    var messageHeaders: [MessageHeader?] = []
    /// Messages delivered per channel (indexed by id) by the read under way, for the statistics check.
    var deliveredByChannel: [UInt64] = []
    public internal(set) var chunkIndexes: [ChunkIndex] = []
    public internal(set) var statistics: Statistics?
    /// Damage met while reading in salvage mode.
    public internal(set) var damage: [BagError] = []
    /// Damage found when the file was opened (footer, summary): part of every read's.
    var openingDamage: [BagError] = []
    /// Where the data section ends (footer and summary known), for its CRC; checked on the first read,
    /// not at opening, so listing a bag's topics does not read the whole file.
    private var dataSectionBounds: (summaryStart: Int, footerStart: Int)?
    /// The data section's CRC mismatch (nil: intact, or no CRC stored), checked once.
    private lazy var dataSectionDamage: BagError? = dataSectionBounds.flatMap {
        checkDataSection(summaryStart: $0.summaryStart, footerStart: $0.footerStart)
    }
    /// True when the file ends with a valid footer and magic.
    public internal(set) var hasFooter = false

    /// Opens and checks the file, and reads its summary section if it has one.
    public init(path: String) throws(BagError) {
        self.path = path
        file = try MappedFile(path: path)
        let b = file.bytes
        guard b.count >= 8, (0..<8).allSatisfy({ b[$0] == Self.magic[$0] }) else {
            throw .notABag(path: path, reason: "no MCAP magic at the start")
        }
        var c = ByteCursor(b, from: 8)
        guard let op = c.u8(), op == 0x01, let len = c.u64(), len <= UInt64(c.remaining) else {
            throw .truncated(path: path, offset: 8, record: "Header")
        }
        var h = ByteCursor(b, from: c.offset, to: c.offset + Int(len))
        profile = h.string() ?? ""
        library = h.string() ?? ""
        readSummary()
    }

    /// File size in bytes.
    public var size: Int { file.bytes.count }

    /// Reads the footer and, if present and intact, the summary section. A damaged summary is not
    /// fatal: reading falls back to a forward scan.
    func readSummary() {
        let b = file.bytes
        guard b.count >= 8 + 9 + 20 + 8 else { return }
        let tail = b.count - 8
        guard (0..<8).allSatisfy({ b[tail + $0] == Self.magic[$0] }) else { return }
        let footerStart = tail - (1 + 8 + 20)
        var c = ByteCursor(b, from: footerStart, to: tail)
        guard c.u8() == 0x02, c.u64() == 20, let summaryStart = c.u64(), let _ = c.u64(), let summaryCRC = c.u32()
        else { return }
        hasFooter = true
        // Compared before any conversion: a damaged offset may not even fit an Int (found by the fuzzer).
        guard summaryStart < UInt64(footerStart) else {
            openingDamage.append(
                .summaryNotFound(
                    path: path, offset: Int(clamping: summaryStart),
                    reason: "that is past the footer at byte \(footerStart)"))
            return
        }
        dataSectionBounds = (Int(summaryStart), footerStart)
        guard summaryStart > 0 else { return }
        // A summary section is a chain of summary records ending exactly at the footer.
        var probe = Int(summaryStart)
        while probe < footerStart {
            var r = ByteCursor(b, from: probe, to: footerStart)
            guard let op = r.u8(), Self.summaryOpcodes.contains(op), let len = r.u64(), len <= UInt64(r.remaining)
            else {
                openingDamage.append(
                    .summaryNotFound(
                        path: path, offset: Int(summaryStart), reason: "no chain of summary records starts there"))
                return
            }
            probe = r.offset + Int(len)
        }
        if summaryCRC != 0 {
            // The summary CRC covers the summary section through the footer's summary_offset_start.
            let covered = UnsafeRawBufferPointer(rebasing: b[Int(summaryStart)..<(footerStart + 1 + 8 + 8 + 8)])
            guard CRC32.checksum(covered) == summaryCRC else {
                openingDamage.append(
                    .crcMismatch(
                        path: path, offset: Int(summaryStart), record: "summary section", expected: summaryCRC,
                        actual: CRC32.checksum(covered)))
                return
            }
        }
        var pos = Int(summaryStart)
        var summarySchemas: [UInt16: Schema] = [:], summaryChannels: [UInt16: Channel] = [:], indexes: [ChunkIndex] = []
        while pos + 9 <= footerStart {
            var r = ByteCursor(b, from: pos, to: footerStart)
            guard let op = r.u8(), let len = r.u64(), len <= UInt64(r.remaining) else { return }
            let body = ByteCursor(b, from: r.offset, to: r.offset + Int(len))
            switch op {
            case 0x03: if let s = Self.parseSchema(body) { summarySchemas[s.id] = s }
            case 0x04: if let ch = Self.parseChannel(body) { summaryChannels[ch.id] = ch }
            case 0x08: if let i = Self.parseChunkIndex(body) { indexes.append(i) }
            case 0x0B: statistics = Self.parseStatistics(body)
            default: break
            }
            pos = r.offset + Int(len)
        }
        schemas.merge(summarySchemas) { a, _ in a }
        channels.merge(summaryChannels) { a, _ in a }
        chunkIndexes = indexes.sorted { $0.chunkStartOffset < $1.chunkStartOffset }
    }

    /// Records a summary section may hold (schema, channel, chunk index, attachment index, statistics,
    /// metadata index, summary offset).
    static let summaryOpcodes: Set<UInt8> = [0x03, 0x04, 0x08, 0x0A, 0x0B, 0x0D, 0x0E]

    /// The DataEnd record's CRC of the data section, where the writer stored one.
    func checkDataSection(summaryStart: Int, footerStart: Int) -> BagError? {
        let b = file.bytes
        // DataEnd (opcode 0x0F, length 4, crc) ends where the summary (or, without one, the footer) starts.
        let end = summaryStart > 0 && summaryStart <= footerStart ? summaryStart : footerStart
        let dataEnd = end - 13
        guard dataEnd > 8, b[dataEnd] == 0x0F else { return nil }
        var c = ByteCursor(b, from: dataEnd + 1, to: end)
        guard c.u64() == 4, let stored = c.u32(), stored != 0 else { return nil }
        let actual = CRC32.checksum(UnsafeRawBufferPointer(rebasing: b[0..<dataEnd]))
        guard actual != stored else { return nil }
        return .crcMismatch(
            path: path, offset: dataEnd, record: "data section (DataEnd)", expected: stored, actual: actual)
    }

    /// Calls `body` for every message that passes `options`, in file order. Damage found when the file
    /// was opened is reported first; after a read of every message on its channels, fewer messages than
    /// the statistics count is damage too.
    public func forEachMessage(_ options: BagReadOptions = .init(), _ body: (BagMessage) throws -> Void) throws {
        damage.removeAll()
        deliveredByChannel.removeAll()
        for d in openingDamage + [dataSectionDamage].compactMap({ $0 }) { try report(d, options) }
        if !chunkIndexes.isEmpty && schemasAndChannelsKnown {
            try readIndexed(options, body)
        } else {
            try scan(from: 8, to: file.bytes.count, options, body, topLevel: true)
            // Every finished MCAP file ends with a footer and the magic. Without them the recording
            // was cut short (a copy stopped at a chunk boundary, a recorder killed): what followed is
            // unknown, so the read is damaged even when every record present is intact.
            if !hasFooter, !damage.contains(where: { if case .truncated = $0 { true } else { false } }) {
                try report(
                    .truncated(
                        path: path, offset: file.bytes.count,
                        record: "the footer: the file ends without one, so the recording was cut short or never "
                            + "finished"),
                    options)
            }
        }
        guard options.startTime == nil, options.endTime == nil, let stats = statistics else { return }
        var read: [String: UInt64] = [:]
        for (id, count) in deliveredByChannel.enumerated() where count > 0 {
            read[channels[UInt16(id)]?.topic ?? "", default: 0] += count
        }
        for (id, expected) in stats.channelMessageCounts.sorted(by: { $0.key < $1.key }) {
            guard let ch = channels[id], options.topics?.contains(ch.topic) ?? true else { continue }
            let got = read[ch.topic] ?? 0
            if got < expected {
                try report(.missingMessages(path: path, topic: ch.topic, expected: expected, read: got), options)
            }
        }
    }

    var schemasAndChannelsKnown: Bool { !channels.isEmpty }

    /// Topics with their types and message counts (from statistics when present, else by counting).
    public func topics() throws -> [BagTopic] {
        var counts: [UInt16: Int] = [:]
        if let stats = statistics, !stats.channelMessageCounts.isEmpty {
            for (k, v) in stats.channelMessageCounts { counts[k] = Int(clamping: v) }
        } else {
            // No statistics (an unfinished file): count what can be read; damage does not stop a listing.
            var byTopic: [String: Int] = [:]
            var options = BagReadOptions()
            options.salvage = true
            let earlier = damage
            try forEachMessage(options) { byTopic[$0.topic, default: 0] += 1 }
            damage = earlier
            for (id, ch) in channels { counts[id] = byTopic[ch.topic] ?? 0 }
        }
        return channels.values.sorted { $0.topic < $1.topic }.map { ch in
            BagTopic(
                name: ch.topic, type: schemas[ch.schemaId]?.name ?? "", encoding: ch.messageEncoding,
                messageCount: counts[ch.id] ?? 0)
        }
    }

    // MARK: - Reading

    /// Messages in log-time order whatever order the file stores them in, as rosbag2 reads them
    /// (equal log times keep their order in the file). Chunks are read by their first log time; a
    /// chunk whose messages are in order and end before the next chunk begins (what recorders write)
    /// passes straight through, otherwise messages wait in a heap until no later chunk can hold an
    /// earlier one. Memory: the chunks whose time ranges overlap.
    func readIndexed(_ options: BagReadOptions, _ body: (BagMessage) throws -> Void) throws {
        let wanted: Set<UInt16>? = options.topics.map { topics in
            Set(channels.values.filter { topics.contains($0.topic) }.map(\.id))
        }
        // A chunk listed twice in the summary (a writer's or a copier's fault) is read once: the
        // index only says where the chunk is, and the chunk's own CRC vouches for its content.
        var seen = Set<UInt64>()
        var chunks: [ChunkIndex] = []
        for index in chunkIndexes {
            guard seen.insert(index.chunkStartOffset).inserted else { continue }
            if let wanted, index.channels.isDisjoint(with: wanted), !index.channels.isEmpty { continue }
            if let start = options.startTime, index.messageEndTime < start { continue }
            if let end = options.endTime, index.messageStartTime >= end { continue }
            chunks.append(index)
        }
        // Stable: chunks that start together keep the file's order.
        let order = chunks.indices.sorted {
            (chunks[$0].messageStartTime, $0) < (chunks[$1].messageStartTime, $1)
        }
        // Chunks whose times overlap are merged: each is a run in log-time order (sorted stably when
        // the writer did not), and the next message is the earliest head, ties to the chunk first in the file.
        var merge = MessageMerge()
        // Optional slots, so a message leaves by being moved out (`take`), never copied.
        var messages: [BagMessage?] = []
        var logTimes: [UInt64] = []
        for (position, i) in order.enumerated() {
            let index = chunks[i]
            guard index.chunkStartOffset < UInt64(file.bytes.count) else {
                try report(
                    .truncated(
                        path: path, offset: Int(clamping: index.chunkStartOffset),
                        record: "Chunk (from the chunk index)"),
                    options)
                continue
            }
            let offset = Int(index.chunkStartOffset)
            // chunk_length counts the whole record, opcode and length prefix included.
            let end =
                index.chunkLength > UInt64(file.bytes.count - offset)
                ? file.bytes.count : offset + Int(index.chunkLength)
            messages.removeAll(keepingCapacity: true)
            logTimes.removeAll(keepingCapacity: true)
            try scan(
                from: offset, to: end, options,
                {
                    logTimes.append($0.logTime)
                    messages.append($0)
                }, topLevel: false)
            let nextStart = position + 1 < order.count ? chunks[order[position + 1]].messageStartTime : UInt64.max
            let inOrder = zip(logTimes, logTimes.dropFirst()).allSatisfy { $0 <= $1 }
            if merge.isEmpty, inOrder, (logTimes.last ?? 0) < nextStart {
                for i in messages.indices { try body(messages[i].take()!) }
                continue
            }
            // The batch goes to the run whole (not copied); the next chunk starts a new one.
            var batch: [BagMessage?] = []
            batch.reserveCapacity(messages.count)
            swap(&batch, &messages)
            merge.add(MessageRun(chunkOffset: index.chunkStartOffset, inLogTimeOrder: batch, sorted: inOrder))
            try merge.deliver(before: nextStart, body)
        }
        try merge.deliver(before: nil, body)
    }

    func report(_ error: BagError, _ options: BagReadOptions) throws {
        guard options.salvage else { throw error }
        damage.append(error)
    }

}
