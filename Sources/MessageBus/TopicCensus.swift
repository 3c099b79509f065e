/// Numbering per topic. Beside the publisher's own counter (which orders every frame against every
/// other, what putting back exactly what was missed needs), each numbered batch carries its census:
/// per topic it holds, that topic's own number for its first frame there and how many it holds. A
/// reader follows each topic's numbers, so a frame lost for good is counted against its topic.
///
/// On the wire, right after the publisher's numbers (plain or compressed batch, outside the LZ4
/// block): the census' byte count (u32), then per topic, in order of first appearance: the topic's
/// byte count (u16), its UTF-8, its number (u64) and its count (u32), all little-endian.
public struct TopicCount: Sendable, Equatable {
    public var topic: String
    /// The topic's own number of its first frame in the batch, and how many of its frames it holds.
    public var first: UInt64
    public var count: Int

    public init(topic: String, first: UInt64, count: Int) {
        self.topic = topic
        self.first = first
        self.count = count
    }
}

/// A publisher's counters, one per topic it has sent.
public struct TopicNumbering: Sendable {
    private var topics: [String] = []
    private var next: [UInt64] = []

    public init() {}

    private mutating func index(of topic: String) -> Int {
        if let i = topics.firstIndex(of: topic) { return i }
        topics.append(topic)
        next.append(0)
        return topics.count - 1
    }

    /// The census of `frames` (topics in order of first appearance), advancing the counters.
    public mutating func census(of frames: ArraySlice<WireFrame>) -> [TopicCount] {
        var census: [TopicCount] = []
        frames.withUnsafeBufferPointer { all in  // borrowed: no retain per frame
            for i in all.indices {
                if let k = census.firstIndex(where: { $0.topic == all[i].topic }) {
                    census[k].count += 1
                } else {
                    census.append(TopicCount(topic: all[i].topic, first: 0, count: 1))
                }
            }
        }
        return renumbered(census)
    }

    /// `census` (of a message this publisher passes on: same topics and counts) in its own numbers.
    public mutating func renumbered(_ census: [TopicCount]) -> [TopicCount] {
        census.map { entry in
            let i = index(of: entry.topic)
            defer { next[i] += UInt64(entry.count) }
            return TopicCount(topic: entry.topic, first: next[i], count: entry.count)
        }
    }
}

/// A reader's view of one input's topics: per topic, the next number expected and what gaps skipped.
public struct TopicSequences: Sendable, Equatable {
    public private(set) var expected: [String: UInt64] = [:]
    /// Per topic, frames skipped over by gaps.
    public private(set) var missing: [String: UInt64] = [:]

    public init() {}

    /// Accounts for an admitted message's census. A topic seen for the first time starts where it
    /// is (a reader joining late misses nothing); a lower number than expected (a restarted live
    /// publisher, or frames partly read already) sets where the topic is now.
    public mutating func admit(_ census: [TopicCount]) {
        for entry in census {
            if let next = expected[entry.topic], entry.first > next {
                missing[entry.topic, default: 0] += entry.first - next
            }
            expected[entry.topic] = entry.first &+ UInt64(entry.count)
        }
    }

    /// Topics that skipped numbers, by name.
    public var missingByTopic: [(topic: String, frames: UInt64)] {
        missing.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}

extension WireFrame {
    /// Bytes a census takes on the wire (with its own byte count).
    static func censusBytes(_ census: [TopicCount]) -> Int {
        census.reduce(4) { $0 + 2 + $1.topic.utf8.count + 12 }
    }

    /// Writes `census` at `at`; returns the position after it.
    static func writeCensus(_ census: [TopicCount], _ at: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        at.storeBytes(of: UInt32(censusBytes(census) - 4).littleEndian, as: UInt32.self)
        var p = at + 4
        for entry in census {
            var topic = entry.topic
            topic.withUTF8 { utf8 in
                p.storeBytes(of: UInt16(utf8.count).littleEndian, as: UInt16.self)
                if let base = utf8.baseAddress { (p + 2).copyMemory(from: base, byteCount: utf8.count) }
                p += 2 + utf8.count
            }
            p.storeBytes(of: entry.first.littleEndian, as: UInt64.self)
            p.storeBytes(of: UInt32(entry.count).littleEndian, toByteOffset: 8, as: UInt32.self)
            p += 12
        }
        return p
    }

    /// Where a numbered message's census starts (after the publisher's numbers), and its byte count
    /// without the count field; nil for any other message, or one whose census is cut off.
    static func censusRange(_ bytes: UnsafeRawBufferPointer) -> Range<Int>? {
        guard let at = sequenceFieldOffset(bytes) else { return nil }
        let start = at + sequenceFieldBytes
        guard bytes.count >= start + 4 else { return nil }
        let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: start, as: UInt32.self)))
        guard length <= bytes.count - start - 4 else { return nil }
        return (start + 4)..<(start + 4 + length)
    }

    /// Walks a census, handing `entry` each topic's name bytes and the offset of its number; false
    /// when an entry is cut off or the counts sum to more than `frames`.
    static func walkCensus(
        _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, frames: Int,
        _ entry: (UnsafeRawBufferPointer, Int) -> Void
    ) -> Bool {
        var i = range.lowerBound
        var total = 0
        while i < range.upperBound {
            guard i + 2 <= range.upperBound else { return false }
            let n = Int(UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt16.self)))
            guard i + 2 + n + 12 <= range.upperBound else { return false }
            total += Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: i + 2 + n + 8, as: UInt32.self)))
            guard total <= frames else { return false }
            entry(UnsafeRawBufferPointer(rebasing: bytes[(i + 2)..<(i + 2 + n)]), i + 2 + n)
            i += 2 + n + 12
        }
        return total == frames
    }

    /// The census of a numbered message (plain or compressed); nil for any other message, or a census
    /// that is cut off or whose counts do not add up to the message's frames.
    public static func census(of bytes: UnsafeRawBufferPointer) -> [TopicCount]? {
        guard let numbers = sequence(of: bytes), let range = censusRange(bytes) else { return nil }
        var census: [TopicCount] = []
        let whole = walkCensus(bytes, range, frames: numbers.count) { name, at in
            census.append(
                TopicCount(
                    topic: String(decoding: name, as: UTF8.self),
                    first: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)),
                    count: Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: at + 8, as: UInt32.self)))))
        }
        return whole ? census : nil
    }

    public static func census(of bytes: [UInt8]) -> [TopicCount]? { bytes.withUnsafeBytes { census(of: $0) } }

    /// Writes `renumbered` (the message's own census in another publisher's numbers: same topics, same
    /// counts, in order) over the numbers of a numbered message's census. The caller owns the bytes alone.
    static func writeCensusNumbers(_ bytes: UnsafeMutableRawBufferPointer, _ renumbered: [TopicCount]) {
        let raw = UnsafeRawBufferPointer(bytes)
        guard let range = censusRange(raw) else { return }
        var k = 0
        _ = walkCensus(raw, range, frames: renumbered.reduce(0) { $0 + $1.count }) { _, at in
            guard k < renumbered.count else { return }
            bytes.storeBytes(of: renumbered[k].first.littleEndian, toByteOffset: at, as: UInt64.self)
            k += 1
        }
    }
}
