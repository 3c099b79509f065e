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
        var fields: [String] = []
        var start = 0
        for name in ["topic", "type", "encoding"] {
            guard let end = bytes[start...].firstIndex(of: 0) else { throw .missingSeparator(field: name) }
            guard let s = String(validating: bytes[start..<end], as: UTF8.self) else { throw .invalidUTF8(field: name) }
            fields.append(s)
            start = end + 1
        }
        return WireFrame(topic: fields[0], type: fields[1], encoding: fields[2], payload: Array(bytes[start...]))
    }

    /// Packs frames as one batch frame: payload = repeated (u32 little-endian length, encoded frame).
    public static func batch(_ frames: [WireFrame]) -> WireFrame {
        var payload: [UInt8] = []
        for f in frames {
            let e = f.encoded()
            withUnsafeBytes(of: UInt32(e.count).littleEndian) { payload.append(contentsOf: $0) }
            payload.append(contentsOf: e)
        }
        return WireFrame(topic: "", type: batchType, encoding: "frames", payload: payload)
    }

    /// The frames of a batch (or this frame alone).
    public func unbatched() throws(DecodeError) -> [WireFrame] {
        guard type == Self.batchType else { return [self] }
        var out: [WireFrame] = []
        var i = 0
        while i < payload.count {
            guard i + 4 <= payload.count else { throw .malformedBatch(offset: i) }
            let n = Int(UInt32(payload[i]) | UInt32(payload[i + 1]) << 8 | UInt32(payload[i + 2]) << 16 | UInt32(payload[i + 3]) << 24)
            guard n <= payload.count - i - 4 else { throw .malformedBatch(offset: i) }
            out.append(try Self.decode(Array(payload[(i + 4)..<(i + 4 + n)])))
            i += 4 + n
        }
        return out
    }
}
