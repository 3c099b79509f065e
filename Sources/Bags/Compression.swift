import CZstd
import CLZ4

/// Chunk compression through Debian's libzstd and liblz4 (LZ4 frame format, as MCAP specifies).
/// Why a chunk did not decompress.
struct DecompressionFailure: Error, ExpressibleByStringInterpolation {
    let reason: String
    init(reason: String) { self.reason = reason }
    init(stringLiteral value: String) { reason = value }
    init(stringInterpolation: DefaultStringInterpolation) { reason = String(stringInterpolation: stringInterpolation) }
}

enum ChunkCompression {
    /// Decompresses `input` that must expand to exactly `size` bytes.
    static func decompress(_ input: UnsafeRawBufferPointer, compression: String, size: Int) -> Result<
        [UInt8], DecompressionFailure
    > {
        switch compression {
        case "":
            guard input.count == size else {
                return .failure("stored size \(input.count) differs from the declared \(size)")
            }
            return .success(Array(input))
        case "zstd":
            var out = [UInt8](repeating: 0, count: size)
            let n = out.withUnsafeMutableBytes { ZSTD_decompress($0.baseAddress, size, input.baseAddress, input.count) }
            if ZSTD_isError(n) != 0 { return .failure("zstd: \(String(cString: ZSTD_getErrorName(n)))") }
            guard n == size else { return .failure("zstd produced \(n) bytes, \(size) declared") }
            return .success(out)
        case "lz4":
            var ctx: OpaquePointer?
            let created = LZ4F_createDecompressionContext(&ctx, UInt32(LZ4F_VERSION))
            guard LZ4F_isError(created) == 0, let ctx else { return .failure("lz4: cannot create a context") }
            defer { LZ4F_freeDecompressionContext(ctx) }
            var out = [UInt8](repeating: 0, count: size)
            var produced = 0, consumed = 0
            while true {
                var dstSize = size - produced
                var srcSize = input.count - consumed
                let hint = out.withUnsafeMutableBytes {
                    LZ4F_decompress(
                        ctx, $0.baseAddress! + produced, &dstSize, input.baseAddress! + consumed, &srcSize, nil)
                }
                if LZ4F_isError(hint) != 0 { return .failure("lz4: \(String(cString: LZ4F_getErrorName(hint)))") }
                produced += dstSize
                consumed += srcSize
                if hint == 0 { break }  // frame complete
                if srcSize == 0 && dstSize == 0 { return .failure("lz4: frame ends early") }
                if consumed >= input.count && hint != 0 { return .failure("lz4: frame truncated") }
            }
            guard produced == size else { return .failure("lz4 produced \(produced) bytes, \(size) declared") }
            return .success(out)
        default:
            return .failure("unsupported")
        }
    }

    static func compress(_ input: [UInt8], compression: String, level: Int32 = 3) -> [UInt8] {
        switch compression {
        case "zstd":
            let bound = ZSTD_compressBound(input.count)
            var out = [UInt8](repeating: 0, count: bound)
            let n = input.withUnsafeBytes { src in
                out.withUnsafeMutableBytes { ZSTD_compress($0.baseAddress, bound, src.baseAddress, src.count, level) }
            }
            precondition(ZSTD_isError(n) == 0, "zstd compression cannot fail with a bound-sized buffer")
            out.removeSubrange(n...)
            return out
        case "lz4":
            let bound = LZ4F_compressFrameBound(input.count, nil)
            var out = [UInt8](repeating: 0, count: bound)
            let n = input.withUnsafeBytes { src in
                out.withUnsafeMutableBytes {
                    LZ4F_compressFrame($0.baseAddress, bound, src.baseAddress, src.count, nil)
                }
            }
            precondition(LZ4F_isError(n) == 0, "lz4 frame compression cannot fail with a bound-sized buffer")
            out.removeSubrange(n...)
            return out
        default:
            return input
        }
    }
}
