/// Everything that can go wrong reading or writing a bag; each case names the file and, where there
/// is one, the byte offset and the record.
public enum BagError: Error, Equatable, Sendable, CustomStringConvertible {
    case cannotOpen(path: String, reason: String)
    case notABag(path: String, reason: String)
    case truncated(path: String, offset: Int, record: String)
    case corruptRecord(path: String, offset: Int, record: String, reason: String)
    case crcMismatch(path: String, offset: Int, record: String, expected: UInt32, actual: UInt32)
    case unsupportedCompression(path: String, offset: Int, compression: String)
    case decompressionFailed(path: String, offset: Int, reason: String)
    case tooLarge(path: String, offset: Int, record: String, claimed: UInt64, limit: UInt64)
    case unknownChannel(path: String, offset: Int, channel: UInt16)
    /// The summary section is not where the footer says (bytes removed or added before it).
    case summaryNotFound(path: String, offset: Int, reason: String)
    /// Fewer messages were read than the file's statistics count (a chunk removed, say).
    case missingMessages(path: String, topic: String, expected: UInt64, read: UInt64)
    case sqlite(path: String, reason: String)
    case metadata(path: String, reason: String)
    case writeFailed(path: String, reason: String)

    /// True for damage inside a bag that salvage can read past (as opposed to a bag that cannot be
    /// opened at all).
    public var isDamage: Bool {
        switch self {
        case .truncated, .corruptRecord, .crcMismatch, .decompressionFailed, .tooLarge, .unknownChannel,
            .summaryNotFound, .missingMessages:
            return true
        default: return false
        }
    }

    public var description: String {
        switch self {
        case .cannotOpen(let p, let r): return "\(p): cannot open: \(r)"
        case .notABag(let p, let r): return "\(p): not a bag: \(r)"
        case .truncated(let p, let o, let r): return "\(p): truncated at byte \(o) in \(r)"
        case .corruptRecord(let p, let o, let r, let why): return "\(p): corrupt \(r) at byte \(o): \(why)"
        case .crcMismatch(let p, let o, let r, let e, let a):
            return
                "\(p): CRC mismatch in \(r) at byte \(o) (stored 0x\(String(e, radix: 16)), computed "
                + "0x\(String(a, radix: 16)))"
        case .unsupportedCompression(let p, let o, let c):
            return "\(p): unsupported chunk compression '\(c)' at byte \(o)"
        case .decompressionFailed(let p, let o, let r): return "\(p): chunk at byte \(o) does not decompress: \(r)"
        case .tooLarge(let p, let o, let r, let c, let l):
            return "\(p): \(r) at byte \(o) claims \(c) bytes, above the limit of \(l)"
        case .unknownChannel(let p, let o, let c): return "\(p): message at byte \(o) names unknown channel \(c)"
        case .summaryNotFound(let p, let o, let r):
            return
                "\(p): the footer places the summary section at byte \(o), but \(r) (data before it was removed or "
                + "added?)"
        case .missingMessages(let p, let t, let e, let r):
            return
                "\(p): \(t): the recording counts \(e) message(s), \(r) were read: \(e - min(e, r)) missing (removed "
                + "or unreadable)"
        case .sqlite(let p, let r): return "\(p): sqlite: \(r)"
        case .metadata(let p, let r): return "\(p): metadata: \(r)"
        case .writeFailed(let p, let r): return "\(p): write failed: \(r)"
        }
    }
}

/// A message read from a bag: its topic, type and serialized payload.
public struct BagMessage: Sendable, Equatable {
    public var topic: String
    /// ROS type name, e.g. "sensor_msgs/msg/Imu".
    public var type: String
    /// Serialization, e.g. "cdr".
    public var encoding: String
    /// Log time, nanoseconds since the epoch.
    public var logTime: UInt64
    public var publishTime: UInt64
    public var data: [UInt8]

    public init(topic: String, type: String, encoding: String, logTime: UInt64, publishTime: UInt64, data: [UInt8]) {
        self.topic = topic
        self.type = type
        self.encoding = encoding
        self.logTime = logTime
        self.publishTime = publishTime
        self.data = data
    }
}

/// Options for reading.
public struct BagReadOptions: Sendable, Equatable {
    /// Only these topics (nil: all).
    public var topics: Set<String>? = nil
    /// Only messages with log time in [start, end), nanoseconds.
    public var startTime: UInt64? = nil
    public var endTime: UInt64? = nil
    /// Keep going past damage, reporting it, instead of stopping at the first error.
    public var salvage = false
    /// Largest decompressed chunk accepted, bytes: a lying length field must not allocate without
    /// bound. Default 1 GiB.
    public var maximumChunkBytes: UInt64 = 1 << 30
    public init() {}
}

/// What a topic holds.
public struct BagTopic: Sendable, Equatable {
    public var name: String
    public var type: String
    public var encoding: String
    public var messageCount: Int
}

extension Int {
    /// Sum that stops at `Int.max`: message counts can come from a damaged file's statistics.
    public func addingSaturated(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
