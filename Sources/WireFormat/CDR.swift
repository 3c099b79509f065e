/// Why a CDR payload could not be decoded. Every case names where.
public enum CDRError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The payload ended before the field at `offset` (payload byte offset, header included).
    case truncated(field: String, offset: Int)
    /// The 4-byte encapsulation header names a representation we do not read.
    case unsupportedEncapsulation(UInt16)
    /// A string is not valid UTF-8 or lacks its terminating NUL.
    case invalidString(field: String, offset: Int)
    /// A length field claims more than the payload holds.
    case lengthTooLarge(field: String, length: Int, offset: Int)

    public var description: String {
        switch self {
        case .truncated(let f, let o): return "CDR payload truncated in \(f) at byte \(o)"
        case .unsupportedEncapsulation(let e): return "unsupported CDR encapsulation 0x\(String(e, radix: 16))"
        case .invalidString(let f, let o): return "invalid string in \(f) at byte \(o)"
        case .lengthTooLarge(let f, let l, let o):
            return "\(f) claims \(l) bytes at byte \(o), more than the payload holds"
        }
    }
}

/// Reads ROS 2 CDR (XCDR1 plain CDR, as rosbag2 and MCAP store it): a 4-byte encapsulation header
/// (0x00 0x01 little endian, 0x00 0x00 big endian, then two option bytes), then the body, with each
/// primitive aligned to its size relative to the start of the body.
import CompassCore

public struct CDRReader {
    @usableFromInline let bytes: UnsafeRawBufferPointer
    @usableFromInline var offset: Int
    @usableFromInline let littleEndian: Bool
    static let bodyStart = 4

    /// Wraps a payload; throws for an unknown encapsulation or a payload shorter than its header.
    public init(_ bytes: UnsafeRawBufferPointer) throws(CDRError) {
        guard bytes.count >= 4 else { throw .truncated(field: "encapsulation header", offset: 0) }
        let kind = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        switch kind {
        case 0x0001, 0x0003: littleEndian = true  // CDR_LE, PL_CDR_LE
        case 0x0000, 0x0002: littleEndian = false  // CDR_BE, PL_CDR_BE
        default: throw .unsupportedEncapsulation(kind)
        }
        self.bytes = bytes
        offset = Self.bodyStart
    }

    /// Bytes not read yet.
    public var remaining: Int { bytes.count - offset }

    /// Aligns to `n` (a power of two) relative to the body start.
    @inlinable @inline(__always)
    mutating func align(_ n: Int) {
        offset += (4 - offset) & (n - 1)
    }

    @inlinable @inline(__always)
    mutating func raw<T: FixedWidthInteger>(_ type: T.Type, _ field: String) throws(CDRError) -> T {
        align(MemoryLayout<T>.size)
        guard offset + MemoryLayout<T>.size <= bytes.count else { throw .truncated(field: field, offset: offset) }
        let v = bytes.loadUnaligned(fromByteOffset: offset, as: T.self)
        offset += MemoryLayout<T>.size
        return littleEndian ? T(littleEndian: v) : T(bigEndian: v)
    }

    public mutating func uint8(_ field: String) throws(CDRError) -> UInt8 { try raw(UInt8.self, field) }
    public mutating func int8(_ field: String) throws(CDRError) -> Int8 { Int8(bitPattern: try raw(UInt8.self, field)) }
    public mutating func uint16(_ field: String) throws(CDRError) -> UInt16 { try raw(UInt16.self, field) }
    @inlinable @inline(__always)
    public mutating func int32(_ field: String) throws(CDRError) -> Int32 {
        Int32(bitPattern: try raw(UInt32.self, field))
    }
    @inlinable @inline(__always)
    public mutating func uint32(_ field: String) throws(CDRError) -> UInt32 { try raw(UInt32.self, field) }
    @inlinable @inline(__always)
    public mutating func float64(_ field: String) throws(CDRError) -> Double {
        Double(bitPattern: try raw(UInt64.self, field))
    }
    public mutating func float32(_ field: String) throws(CDRError) -> Float {
        Float(bitPattern: try raw(UInt32.self, field))
    }

    /// A uint32 field appended in a later version of a message: nil when the payload ends before it
    /// (an older writer's, possibly with up to 3 bytes of end padding, as rosidl writers add).
    public mutating func appendedUInt32(_ field: String) throws(CDRError) -> UInt32? {
        var probe = self
        probe.align(4)
        return probe.remaining >= 4 ? try uint32(field) : nil
    }

    /// A CDR string: uint32 length including the terminating NUL, the bytes, the NUL.
    public mutating func string(_ field: String) throws(CDRError) -> String {
        let length = Int(try uint32(field))
        guard length <= remaining else { throw .lengthTooLarge(field: field, length: length, offset: offset - 4) }
        guard length > 0 else { return "" }  // some writers encode "" as length 0
        guard bytes[offset + length - 1] == 0 else { throw .invalidString(field: field, offset: offset) }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + length - 1)])
        // Frame ids are ASCII in practice: checked byte by byte, then taken without a second pass.
        var ascii = true
        for b in slice where b >= 0x80 {
            ascii = false
            break
        }
        let text =
            ascii
            ? String(decoding: slice.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
            : String(validating: slice, as: UTF8.self)
        guard let s = text else { throw .invalidString(field: field, offset: offset) }
        offset += length
        return s
    }

    /// `target.count / 8` float64 values in a row, copied as one block where the payload's byte order
    /// is the machine's (the values are the same as read one by one: the first needs alignment, the
    /// rest are aligned after it).
    mutating func float64Block(into target: UnsafeMutableRawBufferPointer, _ field: String) throws(CDRError) {
        #if _endian(little)
            if littleEndian {
                align(8)
                guard offset + target.count <= bytes.count else { throw .truncated(field: field, offset: offset) }
                target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + target.count]))
                offset += target.count
                return
            }
        #endif
        for i in 0..<target.count / 8 {
            target.storeBytes(of: try float64(field), toByteOffset: 8 * i, as: Double.self)
        }
    }

    /// A fixed-size array of float64.
    public mutating func float64Array(_ count: Int, _ field: String) throws(CDRError) -> [Double] {
        var out = [Double]()
        out.reserveCapacity(count)
        for _ in 0..<count { out.append(try float64(field)) }
        return out
    }
}

/// Writes little-endian ROS 2 CDR with the 4-byte encapsulation header (0x00 0x01 0x00 0x00), into a
/// pre-sized, zero-filled buffer (grown by doubling): values are stored in place, padding is the
/// zeros already there.
public struct CDRWriter {
    var storage: [UInt8]
    var count = 4

    public init(capacity: Int = 256) {
        storage = [UInt8](repeating: 0, count: Swift.max(capacity, 16))
        storage[1] = 0x01
    }

    /// The encoded message (a copy; `take()` hands over the buffer instead).
    public var bytes: [UInt8] { Array(storage[0..<count]) }

    /// The encoded message, without copying: the writer is empty afterwards.
    public mutating func take() -> [UInt8] {
        var out: [UInt8] = []
        swap(&out, &storage)
        out.removeLast(out.count - count)
        count = 0
        return out
    }

    @inline(__always)
    mutating func reserve(_ n: Int) {
        if count + n > storage.count {
            storage.append(contentsOf: repeatElement(0, count: Swift.max(storage.count, n)))
        }
    }

    /// Aligns to `n` (a power of two) relative to the body start; padding bytes are zero.
    @inline(__always)
    mutating func align(_ n: Int) {
        let pad = (4 - count) & (n - 1)
        reserve(pad)
        count += pad
    }

    @inline(__always)
    mutating func raw<T: FixedWidthInteger>(_ v: T) {
        align(MemoryLayout<T>.size)
        reserve(MemoryLayout<T>.size)
        let offset = count
        storage.withUnsafeMutableBytes { $0.storeBytes(of: v.littleEndian, toByteOffset: offset, as: T.self) }
        count += MemoryLayout<T>.size
    }

    @inline(__always) public mutating func uint8(_ v: UInt8) {
        reserve(1)
        storage[count] = v
        count += 1
    }
    @inline(__always) public mutating func int8(_ v: Int8) { uint8(UInt8(bitPattern: v)) }
    @inline(__always) public mutating func uint16(_ v: UInt16) { raw(v) }
    @inline(__always) public mutating func int32(_ v: Int32) { raw(UInt32(bitPattern: v)) }
    @inline(__always) public mutating func uint32(_ v: UInt32) { raw(v) }
    @inline(__always) public mutating func float64(_ v: Double) { raw(v.bitPattern) }
    @inline(__always) public mutating func float32(_ v: Float) { raw(v.bitPattern) }
    public mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { utf8 in
            uint32(UInt32(utf8.count + 1))
            reserve(utf8.count + 1)
            let at = count
            storage.withUnsafeMutableBytes { out in
                if utf8.count > 0 {
                    UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + utf8.count)]).copyMemory(
                        from: UnsafeRawBufferPointer(utf8))
                }
                out[at + utf8.count] = 0
            }
            count += utf8.count + 1
        }
    }
    public mutating func float64Array(_ values: [Double]) { for v in values { float64(v) } }

    /// Little-endian float64 values already laid out in memory, copied as one block (8-aligned).
    mutating func float64Block(_ values: UnsafeRawBufferPointer) {
        align(8)
        reserve(values.count)
        let at = count
        storage.withUnsafeMutableBytes {
            $0.baseAddress!.advanced(by: at).copyMemory(from: values.baseAddress!, byteCount: values.count)
        }
        count += values.count
    }
}

extension CDRReader {
    /// Skips `count` float64 values (aligned), with the same bounds checks as reading them.
    @inlinable
    public mutating func skipFloat64(_ count: Int, _ field: String) throws(CDRError) {
        align(8)
        guard offset + 8 * count <= bytes.count else { throw .truncated(field: field, offset: offset) }
        offset += 8 * count
    }
}

/// Decoding only what the fusion path needs from the two input types (the header and the vectors),
/// skipping orientation and covariances: most of an Imu message's bytes.
public enum CDRSamples {
    /// What `imu` reads.
    public typealias Imu = (
        header: RosHeader, angularVelocity: Vector3, linearAcceleration: Vector3, angularVelocityOffset: Int?
    )
    /// What `magneticField` reads.
    public typealias MagneticField = (header: RosHeader, field: Vector3, fieldOffset: Int?)

    /// sensor_msgs/msg/Imu: header, angular velocity (rad/s), linear acceleration (m/s^2) and, for a
    /// little-endian payload, the byte offset of the angular velocity, so a stage that changes only
    /// that (the gyro bias removal) patches the payload instead of decoding and re-encoding all of
    /// it (see `overwrite`).
    public static func imu(_ payload: UnsafeRawBufferPointer) throws(CDRError) -> Imu {
        var r = try CDRReader(payload)
        let header = try RosHeader(&r)
        try r.skipFloat64(4 + 9, "orientation")
        r.align(8)
        let offset = r.offset
        let w = Vector3(
            try r.float64("angular_velocity.x"), try r.float64("angular_velocity.y"),
            try r.float64("angular_velocity.z"))
        try r.skipFloat64(9, "angular_velocity_covariance")
        let a = Vector3(
            try r.float64("linear_acceleration.x"), try r.float64("linear_acceleration.y"),
            try r.float64("linear_acceleration.z"))
        try r.skipFloat64(9, "linear_acceleration_covariance")
        return (header, w, a, r.littleEndian ? offset : nil)
    }

    /// sensor_msgs/msg/MagneticField: header, field (tesla) and, for a little-endian payload, the
    /// byte offset of the field.
    public static func magneticField(_ payload: UnsafeRawBufferPointer) throws(CDRError) -> MagneticField {
        var r = try CDRReader(payload)
        let header = try RosHeader(&r)
        r.align(8)
        let offset = r.offset
        let f = Vector3(
            try r.float64("magnetic_field.x"), try r.float64("magnetic_field.y"), try r.float64("magnetic_field.z"))
        try r.skipFloat64(9, "magnetic_field_covariance")
        return (header, f, r.littleEndian ? offset : nil)
    }

    /// Overwrites three little-endian float64 at `offset` (an offset the functions above returned).
    public static func overwrite(_ v: Vector3, at offset: Int, in payload: inout ArraySlice<UInt8>) {
        payload.withUnsafeMutableBytes { overwrite(v, at: offset, in: $0) }
    }

    /// The same, in a payload seen in place.
    public static func overwrite(_ v: Vector3, at offset: Int, in payload: UnsafeMutableRawBufferPointer) {
        payload.storeBytes(of: v.x.bitPattern.littleEndian, toByteOffset: offset, as: UInt64.self)
        payload.storeBytes(of: v.y.bitPattern.littleEndian, toByteOffset: offset + 8, as: UInt64.self)
        payload.storeBytes(of: v.z.bitPattern.littleEndian, toByteOffset: offset + 16, as: UInt64.self)
    }

}

/// The header stamp of a message that starts with std_msgs/Header, read and written in place
/// without decoding the rest: int32 sec and uint32 nanosec right after the 4-byte encapsulation, in
/// the payload's byte order.
public enum CDRHeaderStamp {
    /// Bytes a payload needs to hold the encapsulation and the stamp.
    public static let minimumPayloadBytes = 12

    /// True for CDR_LE and PL_CDR_LE, the representations whose second byte has bit 0 set.
    @inline(__always)
    static func isLittleEndian(_ second: UInt8) -> Bool { second & 1 == 1 }

    /// The stamp, nil when the payload is too short to hold one.
    public static func read(_ raw: UnsafeRawBufferPointer) -> RosTime? {
        guard raw.count >= minimumPayloadBytes else { return nil }
        let sec = raw.loadUnaligned(fromByteOffset: 4, as: Int32.self)
        let nanosec = raw.loadUnaligned(fromByteOffset: 8, as: UInt32.self)
        return isLittleEndian(raw[1])
            ? RosTime(sec: Int32(littleEndian: sec), nanosec: UInt32(littleEndian: nanosec))
            : RosTime(sec: Int32(bigEndian: sec), nanosec: UInt32(bigEndian: nanosec))
    }

    /// The same, for a payload held in an array slice.
    public static func read(_ payload: ArraySlice<UInt8>) -> RosTime? {
        payload.withUnsafeBytes { read($0) }
    }

    /// Replaces the stamp (no change to a payload too short to hold one).
    public static func overwrite(_ stamp: RosTime, in payload: inout [UInt8]) {
        guard payload.count >= minimumPayloadBytes else { return }
        let little = isLittleEndian(payload[1])
        payload.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: little ? stamp.sec.littleEndian : stamp.sec.bigEndian, toByteOffset: 4, as: Int32.self)
            raw.storeBytes(
                of: little ? stamp.nanosec.littleEndian : stamp.nanosec.bigEndian, toByteOffset: 8, as: UInt32.self)
        }
    }
}
