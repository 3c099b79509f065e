#if canImport(Glibc)
    import Glibc
#endif

/// Sequence numbers between stages. Every publisher numbers the data frames it sends, 0, 1, 2, ...
/// in the order it sends them, whatever their topic; a bus message carries the number of its first
/// frame and how many follow, so a reader sees at once whether it has missed frames (a gap), is
/// being sent frames again (a restarted publisher), or is in step. One counter per publisher rather
/// than one per topic: it also orders the topics against each other, which a reader needs to put
/// back exactly what it missed (fusion reads IMU and magnetometer samples interleaved).
///
/// Each topic is numbered too (`TopicCensus`), so what is lost for good is counted per topic.
///
/// On the wire: a batch with the encoding "sequenced", whose payload starts with the first frame's
/// number (u64 little-endian) and the frame count (u32 little-endian), then the census, then the batch
/// entries. The endpoints of `publish` sinks carry the wire contract's single frames, without numbers.
extension WireFrame {
    public static let sequencedEncoding = "sequenced"
    static let sequencedHeader: StaticString = "\0gyrocompass/batch\0sequenced\0"
    /// First frame's number and the frame count.
    static let sequenceFieldBytes = 12

    /// Whether `bytes` starts with `header` and holds at least `more` bytes after it.
    static func starts(_ bytes: UnsafeRawBufferPointer, with header: StaticString, more: Int) -> Bool {
        let prefix = header.utf8CodeUnitCount
        return bytes.count >= prefix + more && memcmp(bytes.baseAddress!, header.utf8Start, prefix) == 0
    }

    /// Where the numbers of a numbered batch start (after its header, plain or compressed); nil for
    /// any other message.
    static func sequenceFieldOffset(_ bytes: UnsafeRawBufferPointer) -> Int? {
        if starts(bytes, with: sequencedHeader, more: sequenceFieldBytes) { return sequencedHeader.utf8CodeUnitCount }
        if starts(bytes, with: compressedHeader, more: sequenceFieldBytes) { return compressedHeader.utf8CodeUnitCount }
        return nil
    }

    /// The numbers a numbered bus message (plain or compressed) carries: its first frame's number and
    /// how many frames it holds (as the header says; readers that unpack it check the count). Nil for
    /// any other message.
    public static func sequence(of bytes: UnsafeRawBufferPointer) -> (first: UInt64, count: Int)? {
        guard let at = sequenceFieldOffset(bytes) else { return nil }
        let first = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self))
        let count = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 8, as: UInt32.self))
        return (first, Int(count))
    }

    public static func sequence(of bytes: [UInt8]) -> (first: UInt64, count: Int)? {
        bytes.withUnsafeBytes { sequence(of: $0) }
    }

    /// Renumbers a numbered message in place, its first frame and its topics (a stage passing on
    /// what it received numbers it as its own output). The caller owns the bytes alone.
    public static func renumber(_ bytes: UnsafeMutableRawBufferPointer, first: UInt64, topics: inout TopicNumbering) {
        guard let census = census(of: UnsafeRawBufferPointer(bytes)) else { return }
        renumber(bytes, numbers: BatchNumbers(first: first, census: topics.renumbered(census)))
    }

    /// The same with the numbers already worked out (a publisher that parsed the census to decide
    /// how to pass the message on): nothing is parsed twice.
    public static func renumber(_ bytes: UnsafeMutableRawBufferPointer, numbers: BatchNumbers) {
        guard let at = sequenceFieldOffset(UnsafeRawBufferPointer(bytes)) else { return }
        bytes.storeBytes(of: numbers.first.littleEndian, toByteOffset: at, as: UInt64.self)
        writeCensusNumbers(bytes, numbers.census)
    }

    /// Where the entries of a plain numbered batch start (after its numbers and census), or, for a
    /// compressed one, its uncompressed size field; nil for any other message or a cut census.
    /// A census whose entries are cut off or whose counts do not add up to the frames counts as none.
    static func afterCensus(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard let numbers = sequence(of: bytes), let range = censusRange(bytes),
            walkCensus(bytes, range, frames: numbers.count, { _, _ in })
        else { return nil }
        return range.upperBound
    }

    /// Bytes of the header, numbers and census of a numbered batch.
    static func sequencedPrefixBytes(_ census: [TopicCount], header: StaticString = sequencedHeader) -> Int {
        header.utf8CodeUnitCount + sequenceFieldBytes + censusBytes(census)
    }

    /// Writes `header` (plain or compressed numbered batch), the numbers and the census; returns the
    /// position after them.
    static func writeSequencedHeader(
        _ at: UnsafeMutableRawPointer, first: UInt64, count: Int, census: [TopicCount],
        header: StaticString = sequencedHeader
    ) -> UnsafeMutableRawPointer {
        let prefix = header.utf8CodeUnitCount
        at.copyMemory(from: header.utf8Start, byteCount: prefix)
        at.storeBytes(of: first.littleEndian, toByteOffset: prefix, as: UInt64.self)
        at.storeBytes(of: UInt32(count).littleEndian, toByteOffset: prefix + 8, as: UInt32.self)
        return writeCensus(census, at + prefix + sequenceFieldBytes)
    }
}

/// What a numbered batch carries beside its frames: the publisher's number of its first frame, and
/// its census (each topic's own numbers).
public struct BatchNumbers: Sendable, Equatable {
    public var first: UInt64
    public var census: [TopicCount]

    public init(first: UInt64, census: [TopicCount]) {
        self.first = first
        self.census = census
    }
}

/// A reader's view of one input's sequence numbers: what is new, what it was sent again, what it
/// missed.
public struct InputSequence: Sendable, Equatable {
    /// What the publisher's numbering promises.
    public enum Numbering: Sendable, Equatable {
        /// The stream is the same every time from its start (a bag or a seeded simulator, through
        /// stages with one input each): a restarted publisher numbers it again from 0, so lower
        /// numbers than expected are frames this reader already has.
        case reproducible
        /// A live stream: lower numbers than expected mean the publisher started again with new
        /// data; the reader goes on from there.
        case live
    }

    /// What to do with a bus message.
    public enum Admission: Sendable, Equatable {
        /// Every frame is new.
        case all
        /// The first `n` frames were already read (a restarted publisher sends them again).
        case skippingFirst(Int)
        /// Every frame was already read.
        case none
    }

    public let numbering: Numbering
    /// The next number expected; nil until the first message (a reader joining a live stream).
    public private(set) var expected: UInt64?
    /// Frames skipped over by gaps, and the gaps.
    public private(set) var missing: UInt64 = 0
    public private(set) var gaps = 0
    /// Frames dropped because they had been read before.
    public private(set) var duplicates: UInt64 = 0
    /// Times a live publisher started its numbering again.
    public private(set) var restarts = 0
    /// Lower numbers than expected are frames read already (sent again after a retransmission), not
    /// a restarted publisher, until the stream has caught up.
    private var repeatsExpected = false

    /// A reader that starts with its input (expects frame 0), or, `joining`, one that takes up a
    /// stream already under way (its first message sets where it is).
    public init(_ numbering: Numbering, joining: Bool = false) {
        self.numbering = numbering
        expected = joining ? nil : 0
    }

    /// Frames up to `next` were read some other way (recomputed): expect `next` now.
    public mutating func expect(_ next: UInt64) { expected = next }

    /// The frames were just read from a retransmission, ahead of the live stream: messages the live
    /// stream still holds from before are repeats, until it reaches the expected number.
    public mutating func expectRepeats() { repeatsExpected = true }

    /// The numbers a message starting at `first` would skip over (a gap), nil when it skips none.
    public func gap(before first: UInt64) -> Range<UInt64>? {
        guard let next = expected, first > next else { return nil }
        return next..<first
    }

    /// Accounts for a message whose frames are numbered `first ..< first + count`.
    public mutating func admit(first: UInt64, count: Int) -> Admission {
        let end = first &+ UInt64(count)
        guard let next = expected else {
            expected = end
            return .all
        }
        if first >= next { repeatsExpected = false }
        if first == next {
            expected = end
            return .all
        }
        if first > next {
            missing += first - next
            gaps += 1
            expected = end
            return .all
        }
        guard numbering == .reproducible || repeatsExpected else {
            restarts += 1
            expected = end
            return .all
        }
        if end <= next {
            duplicates += UInt64(count)
            return .none
        }
        duplicates += next - first
        expected = end
        return .skippingFirst(Int(next - first))
    }
}
