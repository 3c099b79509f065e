/// The forward reading of records: a range of records, a message, a chunk (decompressed and read in
/// log-time order), and resynchronising after damage.
extension MCAPReader {
    /// Reads records in [start, end). At top level it stops at DataEnd or Footer.
    func scan(
        from start: Int, to end: Int, _ options: BagReadOptions, _ body: (BagMessage) throws -> Void, topLevel: Bool
    ) throws {
        let b = file.bytes
        var pos = start
        while pos < end {
            var c = ByteCursor(b, from: pos, to: end)
            guard let op = c.u8(), let len = c.u64() else {
                if topLevel && pos + 8 == b.count { return }  // only the closing magic is left
                try report(.truncated(path: path, offset: pos, record: "record header"), options)
                return
            }
            guard len <= UInt64(c.remaining) else {
                try report(.truncated(path: path, offset: pos, record: Self.recordName(op)), options)
                guard let next = resync(after: pos, end: end) else { return }
                pos = next
                continue
            }
            let bodyStart = c.offset
            let recordEnd = bodyStart + Int(len)
            switch op {
            case 0x01: break
            case 0x02, 0x0F:
                if topLevel { return }
            case 0x03:
                guard let s = Self.parseSchema(ByteCursor(b, from: bodyStart, to: recordEnd)) else {
                    try report(
                        .corruptRecord(
                            path: path, offset: pos, record: "Schema", reason: "fields do not fit the record"), options)
                    break
                }
                if s.id != 0 { schemas[s.id] = s }
            case 0x04:
                guard let ch = Self.parseChannel(ByteCursor(b, from: bodyStart, to: recordEnd)) else {
                    try report(
                        .corruptRecord(
                            path: path, offset: pos, record: "Channel", reason: "fields do not fit the record"), options
                    )
                    break
                }
                channels[ch.id] = ch
            case 0x05:
                try message(at: pos, body: ByteCursor(b, from: bodyStart, to: recordEnd), options, body)
            case 0x06:
                try chunk(at: pos, body: ByteCursor(b, from: bodyStart, to: recordEnd), options, body)
            default:
                if op == 0 || op > 0x0F {
                    try report(
                        .corruptRecord(
                            path: path, offset: pos, record: "record",
                            reason: "unknown opcode 0x\(String(op, radix: 16))"), options)
                    guard let next = resync(after: pos, end: end) else { return }
                    pos = next
                    continue
                }
            }
            pos = recordEnd
        }
    }

    func message(at pos: Int, body c: ByteCursor, _ options: BagReadOptions, _ deliver: (BagMessage) throws -> Void)
        throws
    {
        var c = c
        guard let channelId = c.u16(), let _ = c.u32(), let logTime = c.u64(), let publishTime = c.u64() else {
            try report(
                .corruptRecord(path: path, offset: pos, record: "Message", reason: "shorter than its fixed fields"),
                options)
            return
        }
        guard let header = messageHeader(channelId) else {
            try report(.unknownChannel(path: path, offset: pos, channel: channelId), options)
            return
        }
        if let topics = options.topics, !topics.contains(header.topic) { return }
        if let s = options.startTime, logTime < s { return }
        if let e = options.endTime, logTime >= e { return }
        let data = c.slice(c.remaining)!
        let slot = Int(channelId)
        if slot >= deliveredByChannel.count {
            deliveredByChannel += Array(repeating: 0, count: slot + 1 - deliveredByChannel.count)
        }
        deliveredByChannel[slot] += 1
        try deliver(
            BagMessage(
                topic: header.topic, type: header.type, encoding: header.encoding, logTime: logTime,
                publishTime: publishTime, data: Array(data)))
    }

    /// The channel's message header, from the cache or built from its channel and schema records.
    func messageHeader(_ channelId: UInt16) -> MessageHeader? {
        let slot = Int(channelId)
        if slot < messageHeaders.count, let known = messageHeaders[slot] { return known }
        guard let ch = channels[channelId] else { return nil }
        let header = MessageHeader(
            topic: ch.topic, type: schemas[ch.schemaId]?.name ?? "", encoding: ch.messageEncoding)
        if slot >= messageHeaders.count {
            messageHeaders += Array(repeating: nil, count: slot + 1 - messageHeaders.count)
        }
        messageHeaders[slot] = header
        return header
    }

    func chunk(at pos: Int, body c: ByteCursor, _ options: BagReadOptions, _ deliver: (BagMessage) throws -> Void)
        throws
    {
        var c = c
        guard let startTime = c.u64(), let endTime = c.u64(), let uncompressedSize = c.u64(), let crc = c.u32(),
            let compression = c.string(), let recordsLength = c.u64(), recordsLength <= UInt64(c.remaining),
            let records = c.slice(Int(recordsLength))
        else {
            try report(
                .corruptRecord(path: path, offset: pos, record: "Chunk", reason: "header fields do not fit the record"),
                options)
            return
        }
        if let s = options.startTime, endTime < s { return }
        if let e = options.endTime, startTime >= e { return }
        guard ["", "zstd", "lz4"].contains(compression) else {
            try report(.unsupportedCompression(path: path, offset: pos, compression: compression), options)
            return
        }
        guard uncompressedSize <= options.maximumChunkBytes else {
            try report(
                .tooLarge(
                    path: path, offset: pos, record: "Chunk", claimed: uncompressedSize,
                    limit: options.maximumChunkBytes), options)
            return
        }
        let plain: [UInt8]
        switch ChunkCompression.decompress(records, compression: compression, size: Int(uncompressedSize)) {
        case .success(let p): plain = p
        case .failure(let why):
            try report(.decompressionFailed(path: path, offset: pos, reason: why.reason), options)
            return
        }
        if crc != 0 {
            let actual = CRC32.checksum(plain)
            guard actual == crc else {
                try report(
                    .crcMismatch(path: path, offset: pos, record: "Chunk", expected: crc, actual: actual), options)
                return
            }
        }
        try plain.withUnsafeBytes { inner in
            var p = 0
            while p < inner.count {
                var r = ByteCursor(inner, from: p)
                guard let op = r.u8(), let len = r.u64(), len <= UInt64(r.remaining) else {
                    try report(
                        .corruptRecord(
                            path: path, offset: pos, record: "Chunk",
                            reason: "inner record at \(p) overruns the "
                                + "chunk"),
                        options)
                    return
                }
                let body = ByteCursor(inner, from: r.offset, to: r.offset + Int(len))
                switch op {
                case 0x03: if let s = Self.parseSchema(body), s.id != 0 { schemas[s.id] = s }
                case 0x04: if let ch = Self.parseChannel(body) { channels[ch.id] = ch }
                case 0x05: try message(at: pos, body: body, options, deliver)
                default: break
                }
                p = r.offset + Int(len)
            }
        }
    }

    /// After damage: the offset of the next plausible record (a chunk whose header parses with a known
    /// compression, or a message on a known channel), or nil.
    func resync(after pos: Int, end: Int) -> Int? {
        let b = file.bytes
        var p = pos + 1
        while p + 9 < end {
            let op = b[p]
            if op == 0x06 || op == 0x05 {
                var c = ByteCursor(b, from: p + 1, to: end)
                if let len = c.u64(), len <= UInt64(c.remaining), len >= 22 {
                    var body = ByteCursor(b, from: c.offset, to: c.offset + Int(len))
                    if op == 0x06 {
                        if let _ = body.u64(), let _ = body.u64(), let _ = body.u64(), let _ = body.u32(),
                            let comp = body.string(), ["", "zstd", "lz4"].contains(comp), let rl = body.u64(),
                            rl == UInt64(body.remaining)
                        {
                            return p
                        }
                    } else if let ch = body.u16(), channels[ch] != nil, len < 1 << 26 {
                        return p
                    }
                }
            }
            p += 1
        }
        return nil
    }
}

/// The strings every message of one channel carries.
struct MessageHeader {
    let topic: String
    let type: String
    let encoding: String
}
