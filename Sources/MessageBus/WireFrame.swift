#if canImport(Glibc)
import Glibc
#endif

/// One message on the bus, in the wire contract's single-frame form:
/// topic (UTF-8) NUL type NUL encoding NUL payload. A subscriber filters on "topic NUL" for an exact
/// topic; one frame per message keeps ZMQ_CONFLATE usable.
public struct WireFrame: Sendable, Equatable {
    public var topic: String
    /// e.g. "sensor_msgs/msg/Imu".
    public var type: String
    /// "cdr" (ROS 2 CDR with its encapsulation header) or "json".
    public var encoding: String
    public var payload: [UInt8]

    public init(topic: String, type: String, encoding: String, payload: [UInt8]) {
        self.topic = topic; self.type = type; self.encoding = encoding; self.payload = payload
    }

    /// Internal: several frames in one bus message (bulk replay between stages). Never sent to the
    /// endpoints of `publish` sinks, which carry single frames.
    public static let batchType = "gyrocompass/batch"
    /// Internal: the sender has finished; travels down the graph.
    public static let endOfStreamType = "gyrocompass/end_of_stream"
    /// Largest frame accepted, bytes (a lying or runaway sender must not make us allocate without
    /// bound). 16 MiB.
    public static let maximumBytes = 16 << 20

    public static func endOfStream(from stage: String) -> WireFrame {
        WireFrame(topic: stage, type: endOfStreamType, encoding: "none", payload: [])
    }

    public var isEndOfStream: Bool { type == Self.endOfStreamType }

    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(topic.utf8.count + type.utf8.count + encoding.utf8.count + 3 + payload.count)
        out.append(contentsOf: topic.utf8); out.append(0)
        out.append(contentsOf: type.utf8); out.append(0)
        out.append(contentsOf: encoding.utf8); out.append(0)
        out.append(contentsOf: payload)
        return out
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
        let result = bytes.withUnsafeBytes { raw in Result { () throws(DecodeError) in try decode(raw) } }
        return try result.get()
    }

    /// Type names seen on every message, kept as static strings: a name longer than 15 bytes would
    /// otherwise be a heap allocation per frame.
    static let knownTypes: [(bytes: [UInt8], name: String)] = [
        "sensor_msgs/msg/Imu", "sensor_msgs/msg/MagneticField", "sensor_msgs/msg/NavSatFix",
        "gyrocompass_msgs/msg/Heading", "gyrocompass_msgs/msg/CalibrationStatus", "gyrocompass_msgs/msg/InterferenceStatus",
        batchType, endOfStreamType,
    ].map { (Array($0.utf8), $0) }
    /// Common topics and encodings: already-validated strings, no UTF-8 validation per frame.
    static let knownTopics: [(bytes: [UInt8], name: String)] = ["imu/data_raw", "imu/mag", "heading", "imu/data", ""].map { (Array($0.utf8), $0) }
    static let knownEncodings: [(bytes: [UInt8], name: String)] = ["cdr", "json", "frames", "none"].map { (Array($0.utf8), $0) }

    static func known(_ field: UnsafeRawBufferPointer, in table: [(bytes: [UInt8], name: String)]) -> String? {
        if field.isEmpty { return table.first { $0.bytes.isEmpty }?.name }
        guard let base = field.baseAddress else { return nil }
        for t in table where t.bytes.count == field.count {
            if t.bytes.withUnsafeBytes({ memcmp($0.baseAddress!, base, field.count) == 0 }) { return t.name }
        }
        return nil
    }

    /// Decodes one frame from raw bytes (copying the payload once).
    static func decode(_ raw: UnsafeRawBufferPointer) throws(DecodeError) -> WireFrame {
        var fields: [String] = []
        fields.reserveCapacity(3)
        var start = 0
        for (index, name) in ["topic", "type", "encoding"].enumerated() {
            var end = start
            while end < raw.count && raw[end] != 0 { end += 1 }
            guard end < raw.count else { throw .missingSeparator(field: name) }
            let field = UnsafeRawBufferPointer(rebasing: raw[start..<end])
            if let known = Self.known(field, in: index == 0 ? Self.knownTopics : index == 1 ? Self.knownTypes : Self.knownEncodings) {
                fields.append(known)
            } else {
                guard let s = String(validating: field, as: UTF8.self) else { throw .invalidUTF8(field: name) }
                fields.append(s)
            }
            start = end + 1
        }
        return WireFrame(topic: fields[0], type: fields[1], encoding: fields[2], payload: Array(raw[start...]))
    }

    /// Packs frames as one batch frame: payload = repeated (u32 little-endian length, encoded frame).
    public static func batch(_ frames: [WireFrame]) -> WireFrame {
        var payload: [UInt8] = []
        payload.reserveCapacity(frames.reduce(0) { $0 + $1.payload.count + $1.topic.utf8.count + $1.type.utf8.count + $1.encoding.utf8.count + 7 })
        for f in frames {
            let length = f.topic.utf8.count + f.type.utf8.count + f.encoding.utf8.count + 3 + f.payload.count
            withUnsafeBytes(of: UInt32(length).littleEndian) { payload.append(contentsOf: $0) }
            payload.append(contentsOf: f.topic.utf8); payload.append(0)
            payload.append(contentsOf: f.type.utf8); payload.append(0)
            payload.append(contentsOf: f.encoding.utf8); payload.append(0)
            payload.append(contentsOf: f.payload)
        }
        return WireFrame(topic: "", type: batchType, encoding: "frames", payload: payload)
    }

    /// For forwarding without unpacking: the number of data frames in an encoded bus message (a batch
    /// counts its frames by their length prefixes), or nil for anything else (a lone frame, which may
    /// be an end of stream, or a malformed message), which must then be decoded.
    public static func dataFrameCount(_ bytes: [UInt8]) -> Int? {
        let prefix = Array("\0\(batchType)\0frames\0".utf8)
        guard bytes.count >= prefix.count, bytes.starts(with: prefix) else { return nil }
        var i = prefix.count, n = 0
        while i < bytes.count {
            guard i + 4 <= bytes.count else { return nil }
            let length = Int(UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24)
            guard length <= bytes.count - i - 4 else { return nil }
            // A batch never carries an end of stream: it travels alone.
            i += 4 + length
            n += 1
        }
        return n
    }

    /// The frames of a batch (or this frame alone).
    public func unbatched() throws(DecodeError) -> [WireFrame] {
        guard type == Self.batchType else { return [self] }
        let result = payload.withUnsafeBytes { raw in Result { () throws(DecodeError) -> [WireFrame] in
            var out: [WireFrame] = []
            var i = 0
            while i < raw.count {
                guard i + 4 <= raw.count else { throw .malformedBatch(offset: i) }
                let n = Int(UInt32(raw[i]) | UInt32(raw[i + 1]) << 8 | UInt32(raw[i + 2]) << 16 | UInt32(raw[i + 3]) << 24)
                guard n <= raw.count - i - 4 else { throw .malformedBatch(offset: i) }
                out.append(try Self.decode(UnsafeRawBufferPointer(rebasing: raw[(i + 4)..<(i + 4 + n)])))
                i += 4 + n
            }
            return out
        } }
        return try result.get()
    }
}
