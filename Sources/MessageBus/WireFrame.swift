#if canImport(Glibc)
    import Glibc
#endif
import WireFormat

/// One message on the bus, in the wire contract's single-frame form:
/// topic (UTF-8) NUL type NUL encoding NUL payload. A subscriber filters on "topic NUL" for an exact
/// topic; one frame per message keeps ZMQ_CONFLATE usable.
public struct WireFrame: Sendable, Equatable {
    public var topic: String
    /// e.g. "sensor_msgs/msg/Imu".
    public var type: String
    /// "cdr" (ROS 2 CDR with its encapsulation header) or "json".
    public var encoding: String
    /// The message bytes. A received frame shares the storage of the bus message it came in (no
    /// copy per frame); changing it copies.
    public var payload: ArraySlice<UInt8>

    public init(topic: String, type: String, encoding: String, payload: [UInt8]) {
        self.topic = topic
        self.type = type
        self.encoding = encoding
        self.payload = payload[...]
    }

    public init(topic: String, type: String, encoding: String, payload: ArraySlice<UInt8>) {
        self.topic = topic
        self.type = type
        self.encoding = encoding
        self.payload = payload
    }

    /// Internal: several frames in one bus message (bulk replay between stages). Never sent to the
    /// endpoints of `publish` sinks, which carry single frames.
    public static let batchType = "gyrocompass/batch"
    /// Internal: the sender has finished; travels down the graph.
    public static let endOfStreamType = "gyrocompass/end_of_stream"
    /// Largest frame accepted, bytes (a lying or runaway sender must not make us allocate without
    /// bound). 16 MiB.
    public static let maximumBytes = 16 << 20

    /// The last frame a stage sends. `failed`: the stage (or one upstream of it) stopped on an error,
    /// so what came before is not the whole stream (the payload says "failed").
    public static func endOfStream(from stage: String, failed: Bool = false) -> WireFrame {
        WireFrame(topic: stage, type: endOfStreamType, encoding: "none", payload: failed ? Array("failed".utf8) : [])
    }

    /// A placeholder (no topic, type or payload), e.g. to move a frame out of an array.
    public static let empty = WireFrame(topic: "", type: "", encoding: "", payload: [])

    public var isEndOfStream: Bool { type == Self.endOfStreamType }
    /// An end of stream sent after a failure: the stream before it is incomplete.
    public var endsInFailure: Bool { isEndOfStream && !payload.isEmpty }

    /// Bytes of this frame encoded alone.
    @inline(__always)
    var encodedCount: Int { topic.utf8.count + type.utf8.count + encoding.utf8.count + 3 + payload.count }

    /// This frame alone as a bus message.
    public func encoded() -> [UInt8] { Self.encodedMessage([self][...]) }

    /// This frame alone, written straight into a message for sending (no intermediate array).
    public func encodedBusMessage() throws(BusError) -> BusMessage {
        let message = try BusMessage(size: encodedCount)
        guard var at = message.bytes.baseAddress else { return message }
        at = Self.append(topic, at)
        at = Self.append(type, at)
        at = Self.append(encoding, at)
        payload.withUnsafeBytes { p in
            if let base = p.baseAddress { at.copyMemory(from: base, byteCount: p.count) }
        }
        return message
    }

    /// Why a frame was refused.
    public enum DecodeError: Error, Equatable, Sendable, CustomStringConvertible {
        case missingSeparator(field: String)
        case invalidUTF8(field: String)
        case oversized(bytes: Int, limit: Int)
        case malformedBatch(offset: Int)
        public var description: String {
            switch self {
            case .missingSeparator(let f): return "malformed frame: no NUL after the \(f)"
            case .invalidUTF8(let f): return "malformed frame: the \(f) is not UTF-8"
            case .oversized(let b, let l): return "frame of \(b) bytes exceeds the \(l)-byte limit"
            case .malformedBatch(let o): return "malformed batch at byte \(o)"
            }
        }
    }

    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> WireFrame {
        guard bytes.count <= maximumBytes else { throw .oversized(bytes: bytes.count, limit: maximumBytes) }
        return try frame(in: bytes[...])
    }

    /// Names seen on every message, matched against the received bytes without allocating: a type
    /// name longer than 15 bytes would otherwise be a heap string per frame, and every other string
    /// would be validated as UTF-8 per frame. The strings are literals (immortal, never freed).
    static let knownTypes = KnownNames(PipelineMessageTypes.all + [batchType, endOfStreamType])
    static let knownTopics = KnownNames(PipelineTopics.all + [""])
    static let knownEncodings = KnownNames(["cdr", "json", "frames", sequencedEncoding, compressedEncoding, "none"])

    /// A small table of names: the names as given (string literals, which are immortal: handing one
    /// out costs no reference counting, unlike a String built at run time, whose count every stage
    /// thread would then update) and a copy of their bytes to compare against, made once.
    struct KnownNames: @unchecked Sendable {
        let names: [String]
        let bytes: [UnsafeRawBufferPointer]
        init(_ names: [String]) {
            self.names = names
            bytes = names.map { name in
                let utf8 = Array(name.utf8)
                let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, utf8.count), alignment: 1)
                utf8.withUnsafeBytes { copy.copyMemory(from: $0) }
                return UnsafeRawBufferPointer(rebasing: copy[0..<utf8.count])  // lives as long as the program
            }
        }

        @inline(__always)
        func match(_ field: UnsafeRawBufferPointer) -> String? {
            for (i, t) in bytes.enumerated() where t.count == field.count {
                if field.isEmpty { return names[i] }
                if t[0] == field[0] && memcmp(t.baseAddress!, field.baseAddress!, field.count) == 0 { return names[i] }
            }
            return nil
        }
    }

    /// One header field (topic, type or encoding) ending at a NUL at or after `start`.
    @inline(__always)
    static func field(_ raw: UnsafeRawBufferPointer, from start: Int, _ name: String, _ table: KnownNames)
        throws(DecodeError) -> (String, next: Int)
    {
        guard start < raw.count, let nul = memchr(raw.baseAddress! + start, 0, raw.count - start) else {
            throw .missingSeparator(field: name)
        }
        let end = UnsafeRawPointer(nul) - raw.baseAddress!
        let bytes = UnsafeRawBufferPointer(rebasing: raw[start..<end])
        if let known = table.match(bytes) { return (known, end + 1) }
        guard let s = String(validating: bytes, as: UTF8.self) else { throw .invalidUTF8(field: name) }
        return (s, end + 1)
    }

    /// The header fields of an encoded frame and where its payload starts.
    static func header(_ raw: UnsafeRawBufferPointer) throws(DecodeError) -> (
        topic: String, type: String, encoding: String, payloadStart: Int
    ) {
        let (topic, afterTopic) = try field(raw, from: 0, "topic", knownTopics)
        let (type, afterType) = try field(raw, from: afterTopic, "type", knownTypes)
        let (encoding, start) = try field(raw, from: afterType, "encoding", knownEncodings)
        return (topic, type, encoding, start)
    }

    /// Decodes one encoded frame; its payload shares the storage of `bytes`.
    static func frame(in bytes: ArraySlice<UInt8>) throws(DecodeError) -> WireFrame {
        let parsed = bytes.withUnsafeBytes { raw in Result { () throws(DecodeError) in try header(raw) } }
        let h = try parsed.get()
        return WireFrame(
            topic: h.topic, type: h.type, encoding: h.encoding, payload: bytes[(bytes.startIndex + h.payloadStart)...])
    }

    /// The frames of one bus message (a lone frame or a batch), decoded in place: the payloads share
    /// the received storage, nothing is copied.
    public static func frames(in bytes: [UInt8]) throws(DecodeError) -> [WireFrame] {
        guard bytes.count <= maximumBytes else { throw .oversized(bytes: bytes.count, limit: maximumBytes) }
        let inflating = bytes.withUnsafeBytes { raw in Result { () throws(DecodeError) in try inflated(raw) } }
        if let plain = try inflating.get() { return try frames(in: plain.array) }
        let first = try frame(in: bytes[...])
        guard first.type == batchType else { return [first] }
        var out: [WireFrame] = []
        guard first.encoding == sequencedEncoding else {
            try unpack(first.payload, into: &out)
            return out
        }
        let start = bytes.count - first.payload.count
        guard let sequence = sequence(of: bytes), let entries = bytes.withUnsafeBytes({ afterCensus($0) }) else {
            throw .malformedBatch(offset: start)
        }
        try unpack(bytes[entries...], into: &out)
        guard out.count == sequence.count else { throw .malformedBatch(offset: start) }
        return out
    }

    /// Appends the frames of a batch payload.
    static func unpack(_ batch: ArraySlice<UInt8>, into out: inout [WireFrame]) throws(DecodeError) {
        var failure: DecodeError?
        let broken = batch.withUnsafeBytes { raw in
            walkBatch(raw) { entry in
                do throws(DecodeError) {
                    let f = try frame(
                        in: batch[(batch.startIndex + entry.lowerBound)..<(batch.startIndex + entry.upperBound)])
                    // Batches do not nest: a frame claiming to be one would be expanded by the next
                    // reader that receives it alone (found by the wire frame fuzzer).
                    guard f.type != batchType else { throw DecodeError.malformedBatch(offset: entry.lowerBound - 4) }
                    out.append(f)
                    return true
                } catch {
                    failure = error
                    return false
                }
            }
        }
        if let failure { throw failure }
        if let broken { throw .malformedBatch(offset: broken) }
    }

    /// Walks a batch payload, repeated (u32 little-endian length, encoded frame), handing `entry` each
    /// frame's byte range until it returns false. Returns the offset of the first entry whose length
    /// is cut off or claims more than is left, nil otherwise (also when `entry` stopped the walk).
    static func walkBatch(_ batch: UnsafeRawBufferPointer, _ entry: (Range<Int>) -> Bool) -> Int? {
        var i = 0
        while i < batch.count {
            guard i + 4 <= batch.count else { return i }
            let n = Int(UInt32(littleEndian: batch.loadUnaligned(fromByteOffset: i, as: UInt32.self)))
            guard n <= batch.count - i - 4 else { return i }
            guard entry((i + 4)..<(i + 4 + n)) else { return nil }
            i += 4 + n
        }
        return nil
    }

    /// The bytes of one bus message carrying `frames`: the lone frame, or a batch of them (the batch
    /// header, then per frame its u32 little-endian length and the frame), written in one pass.
    public static func encodedMessage(_ frames: ArraySlice<WireFrame>) -> [UInt8] {
        let size = encodedSize(frames)
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            encode(frames, into: UnsafeMutableRawBufferPointer(buffer))
            initialized = size
        }
    }

    static let batchHeader: StaticString = "\0gyrocompass/batch\0frames\0"

    /// Bytes `encode(_:into:numbers:)` writes: with numbers, always a numbered batch.
    public static func encodedSize(_ frames: ArraySlice<WireFrame>, numbers: BatchNumbers? = nil) -> Int {
        let batched = numbers != nil || frames.count != 1
        var total =
            numbers.map { sequencedPrefixBytes($0.census) } ?? (batched ? batchHeader.utf8CodeUnitCount : 0)
        // Borrowed through a buffer pointer: iterating the slice would copy (retain) every frame.
        frames.withUnsafeBufferPointer { all in
            for i in all.indices { total += (batched ? 4 : 0) + all[i].encodedCount }
        }
        return total
    }

    /// Writes one bus message carrying `frames` into `buffer`, which holds exactly
    /// `encodedSize(frames, numbers: numbers)` bytes: a lone frame or a batch, or, given the numbers
    /// (the first frame's and the census), a numbered batch (see `sequence(of:)`, `census(of:)`).
    public static func encode(
        _ frames: ArraySlice<WireFrame>, into buffer: UnsafeMutableRawBufferPointer, numbers: BatchNumbers? = nil
    ) {
        precondition(buffer.count == encodedSize(frames, numbers: numbers))
        guard var at = buffer.baseAddress else { return }
        let batched = numbers != nil || frames.count != 1
        if let numbers {
            at = writeSequencedHeader(at, first: numbers.first, count: frames.count, census: numbers.census)
        } else if batched {
            at.copyMemory(from: batchHeader.utf8Start, byteCount: batchHeader.utf8CodeUnitCount)
            at += batchHeader.utf8CodeUnitCount
        }
        frames.withUnsafeBufferPointer { all in
            for i in all.indices {
                if batched {
                    at.storeBytes(of: UInt32(all[i].encodedCount).littleEndian, as: UInt32.self)
                    at += 4
                }
                at = append(all[i].topic, at)
                at = append(all[i].type, at)
                at = append(all[i].encoding, at)
                at = all[i].payload.withUnsafeBytes { p in
                    if let base = p.baseAddress { at.copyMemory(from: base, byteCount: p.count) }
                    return at + p.count
                }
            }
        }
    }

    /// Copies a string's UTF-8 and a NUL to `at`; returns the position after them.
    @inline(__always)
    static func append(_ s: String, _ at: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer {
        var s = s
        return s.withUTF8 { utf8 in
            if let base = utf8.baseAddress { at.copyMemory(from: base, byteCount: utf8.count) }
            at.storeBytes(of: 0, toByteOffset: utf8.count, as: UInt8.self)
            return at + utf8.count + 1
        }
    }

    /// For forwarding without unpacking: the number of data frames in an encoded bus message (a batch
    /// counts its frames by their length prefixes), or nil for anything else (a lone frame, which may
    /// be an end of stream, or a malformed message), which must then be decoded.
    public static func dataFrameCount(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard !isCompressed(bytes) else { return nil }
        let prefix: Int
        let claimed = sequence(of: bytes)?.count
        if claimed != nil {
            guard let entries = afterCensus(bytes) else { return nil }
            prefix = entries
        } else {
            prefix = batchHeader.utf8CodeUnitCount
            guard bytes.count >= prefix, memcmp(bytes.baseAddress!, batchHeader.utf8Start, prefix) == 0 else {
                return nil
            }
        }
        // A batch never carries an end of stream: it travels alone.
        var n = 0
        guard
            walkBatch(
                UnsafeRawBufferPointer(rebasing: bytes[prefix...]),
                { _ in
                    n += 1
                    return true
                }) == nil, claimed == nil || claimed == n
        else { return nil }
        return n
    }

    /// A data frame inside a received bus message, seen in place: valid while the message lives.
    public struct View {
        public let topic: String
        public let type: String
        public let encoding: String
        public let payload: UnsafeMutableRawBufferPointer
        /// The whole frame as it arrived (header and payload): what a lone frame's message holds.
        public let encoded: UnsafeMutableRawBufferPointer

        /// This frame alone, written into a message for sending (as `WireFrame.encodedBusMessage`),
        /// a new one or `reusing` one already sent: one copy of the bytes as they arrived, since a
        /// frame inside a batch is encoded exactly as it travels alone.
        public func encodedBusMessage(reusing: BusMessage? = nil) throws(BusError) -> BusMessage {
            let message: BusMessage
            if let reusing {
                try reusing.reuse(size: encoded.count)
                message = reusing
            } else {
                message = try BusMessage(size: encoded.count)
            }
            if let to = message.bytes.baseAddress, let from = encoded.baseAddress {
                to.copyMemory(from: from, byteCount: encoded.count)
            }
            return message
        }
    }

    /// The data frames of an encoded bus message (a lone frame or a batch), in place, appended to
    /// `views`. False, with `views` unspecified, for a malformed message or one carrying an end of
    /// stream: those take the general path (`frames(in:)`), which reports them.
    public static func views(in bytes: UnsafeMutableRawBufferPointer, into views: inout [View]) -> Bool {
        guard bytes.count <= maximumBytes, !isCompressed(UnsafeRawBufferPointer(bytes)) else { return false }
        func view(_ raw: UnsafeMutableRawBufferPointer) -> View? {
            guard let h = try? header(UnsafeRawBufferPointer(raw)), h.type != endOfStreamType else { return nil }
            return View(
                topic: h.topic, type: h.type, encoding: h.encoding,
                payload: UnsafeMutableRawBufferPointer(rebasing: raw[h.payloadStart...]), encoded: raw)
        }
        guard let first = view(bytes) else { return false }
        guard first.type == batchType else {
            views.append(first)
            return true
        }
        let claimed = sequence(of: UnsafeRawBufferPointer(bytes))?.count
        if first.encoding == sequencedEncoding && claimed == nil { return false }
        let entries = claimed == nil ? nil : afterCensus(UnsafeRawBufferPointer(bytes))
        if claimed != nil && entries == nil { return false }
        let batch = entries.map { UnsafeMutableRawBufferPointer(rebasing: bytes[$0...]) } ?? first.payload
        let before = views.count
        var whole = true
        let broken = walkBatch(UnsafeRawBufferPointer(batch)) { entry in
            guard let v = view(UnsafeMutableRawBufferPointer(rebasing: batch[entry])), v.type != batchType else {
                whole = false
                return false
            }
            views.append(v)
            return true
        }
        return whole && broken == nil && (claimed == nil || claimed == views.count - before)
    }
}
