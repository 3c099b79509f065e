/// Bounds-checked little-endian reading over a byte buffer; every failure is a nil, never a trap.
struct ByteCursor {
    let bytes: UnsafeRawBufferPointer
    var offset: Int
    let end: Int

    init(_ bytes: UnsafeRawBufferPointer, from start: Int = 0, to end: Int? = nil) {
        self.bytes = bytes
        offset = start
        self.end = min(end ?? bytes.count, bytes.count)
    }

    var remaining: Int { end - offset }

    mutating func integer<T: FixedWidthInteger>(_ type: T.Type) -> T? {
        let n = MemoryLayout<T>.size
        guard offset >= 0, n <= end - offset else { return nil }
        let v = bytes.loadUnaligned(fromByteOffset: offset, as: T.self)
        offset += n
        return T(littleEndian: v)
    }
    mutating func u8() -> UInt8? { integer(UInt8.self) }
    mutating func u16() -> UInt16? { integer(UInt16.self) }
    mutating func u32() -> UInt32? { integer(UInt32.self) }
    mutating func u64() -> UInt64? { integer(UInt64.self) }

    /// `count` bytes as a sub-buffer (no copy).
    mutating func slice(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, count <= end - offset else { return nil }
        let s = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
        offset += count
        return s
    }

    /// A u32-length-prefixed UTF-8 string.
    mutating func string() -> String? {
        guard let n = u32(), let s = slice(Int(n)) else { return nil }
        return String(validating: s, as: UTF8.self)
    }

    /// A u32-byte-length-prefixed map<string, string>.
    mutating func stringMap() -> [String: String]? {
        guard let n = u32(), Int(n) <= remaining else { return nil }
        let stop = offset + Int(n)
        var out: [String: String] = [:]
        while offset < stop {
            guard let k = string(), let v = string() else { return nil }
            out[k] = v
        }
        return offset == stop ? out : nil
    }
}
