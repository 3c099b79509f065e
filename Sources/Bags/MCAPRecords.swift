/// Record parsers (nil when the fields do not fit).
extension MCAPReader {

    static func parseSchema(_ c: ByteCursor) -> Schema? {
        var c = c
        guard let id = c.u16(), let name = c.string(), let enc = c.string(), let n = c.u32(), let data = c.slice(Int(n))
        else { return nil }
        return Schema(id: id, name: name, encoding: enc, data: Array(data))
    }

    static func parseChannel(_ c: ByteCursor) -> Channel? {
        var c = c
        guard let id = c.u16(), let schema = c.u16(), let topic = c.string(), let enc = c.string(),
            let meta = c.stringMap()
        else { return nil }
        return Channel(id: id, schemaId: schema, topic: topic, messageEncoding: enc, metadata: meta)
    }

    static func parseChunkIndex(_ c: ByteCursor) -> ChunkIndex? {
        var c = c
        guard let st = c.u64(), let et = c.u64(), let off = c.u64(), let len = c.u64(), let mapLength = c.u32(),
            Int(mapLength) <= c.remaining, Int(mapLength) % 10 == 0
        else { return nil }
        var ids = Set<UInt16>()
        for _ in 0..<(Int(mapLength) / 10) {
            guard let id = c.u16(), let _ = c.u64() else { return nil }
            ids.insert(id)
        }
        guard let _ = c.u64(), let comp = c.string(), let cs = c.u64(), let us = c.u64() else { return nil }
        return ChunkIndex(
            messageStartTime: st, messageEndTime: et, chunkStartOffset: off, chunkLength: len, channels: ids,
            compression: comp, compressedSize: cs, uncompressedSize: us)
    }

    static func parseStatistics(_ c: ByteCursor) -> Statistics? {
        var c = c
        guard let mc = c.u64(), let sc = c.u16(), let cc = c.u32(), let ac = c.u32(), let mdc = c.u32(),
            let chc = c.u32(),
            let st = c.u64(), let et = c.u64(), let mapLength = c.u32(), Int(mapLength) <= c.remaining,
            Int(mapLength) % 10 == 0
        else { return nil }
        var counts: [UInt16: UInt64] = [:]
        for _ in 0..<(Int(mapLength) / 10) {
            guard let id = c.u16(), let n = c.u64() else { return nil }
            counts[id] = n
        }
        return Statistics(
            messageCount: mc, schemaCount: sc, channelCount: cc, attachmentCount: ac, metadataCount: mdc,
            chunkCount: chc, messageStartTime: st, messageEndTime: et, channelMessageCounts: counts)
    }

    static func recordName(_ op: UInt8) -> String {
        switch op {
        case 0x01: return "Header"
        case 0x02: return "Footer"
        case 0x03: return "Schema"
        case 0x04: return "Channel"
        case 0x05: return "Message"
        case 0x06: return "Chunk"
        case 0x07: return "MessageIndex"
        case 0x08: return "ChunkIndex"
        case 0x09: return "Attachment"
        case 0x0A: return "AttachmentIndex"
        case 0x0B: return "Statistics"
        case 0x0C: return "Metadata"
        case 0x0D: return "MetadataIndex"
        case 0x0E: return "SummaryOffset"
        case 0x0F: return "DataEnd"
        default: return "record 0x\(String(op, radix: 16))"
        }
    }
}
