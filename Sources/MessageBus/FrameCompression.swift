import CLZ4

#if canImport(Glibc)
    import Glibc
#endif

/// How a publisher packs its numbered batches. Between stages most of a batch is zeros and repeated
/// names (unset covariances, the same topic and type on every entry): LZ4 shrinks a bulk batch about
/// five times for a few microseconds, which pays wherever bytes cost more than that: under CURVE
/// (every byte encrypted and decrypted) and on a real network. Over plain tcp loopback it measured
/// neither faster nor slower; over ipc nothing is gained, so `auto` leaves ipc plain.
public enum FrameCompression: String, Sendable, CaseIterable {
    /// Entries as they are.
    case none
    /// The batch entries as one LZ4 block (liblz4).
    case lz4
}

/// A compressed numbered batch: the header `\0gyrocompass/batch\0sequenced+lz4\0`, the first
/// frame's number (u64 little-endian), the frame count (u32) and the census, as in a plain numbered
/// batch; then the byte count of the entries uncompressed (u32) and the entries as one LZ4 block. The
/// numbers stay outside the block, so a reader admits (or drops) a message before it inflates it.
extension WireFrame {
    public static let compressedEncoding = "sequenced+lz4"
    static let compressedHeader: StaticString = "\0gyrocompass/batch\0sequenced+lz4\0"
    /// LZ4's speed/ratio knob: 4 compresses a bulk batch in two thirds of the time of 1 for 6 % more
    /// bytes (measured on simulator batches, 17 KiB each: 5.1 against 5.5 times smaller).
    static let lz4Acceleration: Int32 = 4

    /// Whether `bytes` is a compressed numbered batch (its numbers and census count field at least).
    /// Whatever its length: one too short for its numbers is a damaged compressed batch (`inflated`
    /// says so), never a plain batch (found by the wire frame fuzzer).
    public static func isCompressed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        starts(bytes, with: compressedHeader, more: 0)
    }

    /// The plain numbered batch `sequenced` (see `encode(_:into:numbers:)`), compressed, with
    /// `numbers` (its own, or this publisher's when it passes the batch on). `scratch` is reused
    /// between calls (the worst-case LZ4 output).
    public static func compressed(sequenced: UnsafeRawBufferPointer, numbers: BatchNumbers, scratch: inout [UInt8])
        throws(BusError) -> BusMessage
    {
        guard !isCompressed(sequenced), let count = sequence(of: sequenced)?.count, let start = afterCensus(sequenced)
        else { preconditionFailure("not a plain numbered batch") }
        let entries = UnsafeRawBufferPointer(rebasing: sequenced[start...])
        let bound = Int(LZ4_compressBound(Int32(entries.count)))
        if scratch.count < bound { scratch = [UInt8](repeating: 0, count: bound) }
        let packed = scratch.withUnsafeMutableBytes { out in
            guard let source = entries.baseAddress else { return Int32(0) }
            return LZ4_compress_fast(
                source.assumingMemoryBound(to: CChar.self), out.baseAddress!.assumingMemoryBound(to: CChar.self),
                Int32(entries.count), Int32(out.count), lz4Acceleration)
        }
        // LZ4 cannot fail with a worst-case buffer; an empty batch packs to nothing.
        let message = try BusMessage(
            size: sequencedPrefixBytes(numbers.census, header: compressedHeader) + 4 + Int(packed))
        let at = writeSequencedHeader(
            message.bytes.baseAddress!, first: numbers.first, count: count, census: numbers.census,
            header: compressedHeader)
        at.storeBytes(of: UInt32(entries.count).littleEndian, as: UInt32.self)
        scratch.withUnsafeBytes { (at + 4).copyMemory(from: $0.baseAddress!, byteCount: Int(packed)) }
        return message
    }

    /// A compressed numbered batch as the plain numbered batch it was made from; nil for any other
    /// message (to be read as it is). Throws when the block does not inflate to exactly the size the
    /// header states, or states more than `maximumBytes`.
    public static func inflated(_ bytes: UnsafeRawBufferPointer) throws(DecodeError) -> BusMessage? {
        guard isCompressed(bytes) else { return nil }
        guard let (first, count) = sequence(of: bytes) else {
            throw .malformedBatch(offset: compressedHeader.utf8CodeUnitCount)
        }
        guard let sizeField = afterCensus(bytes), bytes.count >= sizeField + 4, let census = census(of: bytes) else {
            throw .malformedBatch(offset: compressedHeader.utf8CodeUnitCount)
        }
        let size = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: sizeField, as: UInt32.self)))
        guard size <= maximumBytes else { throw .oversized(bytes: size, limit: maximumBytes) }
        guard let message = try? BusMessage(size: sequencedPrefixBytes(census) + size) else {
            throw .oversized(bytes: size, limit: maximumBytes)
        }
        let entries = writeSequencedHeader(message.bytes.baseAddress!, first: first, count: count, census: census)
        let block = UnsafeRawBufferPointer(rebasing: bytes[(sizeField + 4)...])
        let written =
            size == 0 && block.isEmpty
            ? 0
            : LZ4_decompress_safe(
                block.baseAddress?.assumingMemoryBound(to: CChar.self),
                entries.assumingMemoryBound(to: CChar.self), Int32(block.count), Int32(size))
        guard written == size else { throw .malformedBatch(offset: sizeField + 4) }
        return message
    }
}
