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
            return zstd(input, size: size)
        case "lz4":
            return lz4(input, size: size)
        default:
            return .failure("unsupported")
        }
    }

    /// Output buffers start at what the input can plausibly expand to and grow only as output is
    /// produced, so memory follows the data, not the size a header claims (a chunk that declares
    /// 1 GiB and holds a few bytes costs a few bytes).
    static func initialCapacity(input: Int, size: Int) -> Int { min(size, max(16 * input, 1 << 16)) }

    /// Doubles `out` (at most to `size`); false when it is already `size` long.
    static func grow(_ out: inout [UInt8], to size: Int) -> Bool {
        guard out.count < size else { return false }
        out.append(contentsOf: repeatElement(0, count: min(max(out.count, 1 << 16), size - out.count)))
        return true
    }

    static func zstd(_ input: UnsafeRawBufferPointer, size: Int) -> Result<[UInt8], DecompressionFailure> {
        let framed = ZSTD_getFrameContentSize(input.baseAddress, input.count)
        if framed != ZSTD_CONTENTSIZE_UNKNOWN, framed != ZSTD_CONTENTSIZE_ERROR, framed != UInt64(size) {
            return .failure("zstd frame holds \(framed) bytes, \(size) declared")
        }
        guard let stream = ZSTD_createDStream() else { return .failure("zstd: cannot create a stream") }
        defer { ZSTD_freeDStream(stream) }
        _ = ZSTD_initDStream(stream)
        var out = [UInt8](repeating: 0, count: initialCapacity(input: input.count, size: size))
        var produced = 0
        var source = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
        while true {
            if produced == out.count, !grow(&out, to: size) {
                // Full at the declared size: only the end of the frame may remain.
                var probe = [UInt8](repeating: 0, count: 1)
                let rest = probe.withUnsafeMutableBytes { p -> Int in
                    var sink = ZSTD_outBuffer(dst: p.baseAddress, size: 1, pos: 0)
                    let rc = ZSTD_decompressStream(stream, &sink, &source)
                    return sink.pos > 0 ? -1 : Int(bitPattern: UInt(rc))
                }
                guard rest == 0 else { return .failure("zstd produces more than the \(size) bytes declared") }
                break
            }
            let before = (source.pos, produced)
            let rc = out.withUnsafeMutableBytes { p -> Int in
                var sink = ZSTD_outBuffer(dst: p.baseAddress! + produced, size: p.count - produced, pos: 0)
                let rc = ZSTD_decompressStream(stream, &sink, &source)
                produced += sink.pos
                return rc
            }
            if ZSTD_isError(rc) != 0 { return .failure("zstd: \(String(cString: ZSTD_getErrorName(rc)))") }
            if rc == 0 { break }  // frame complete
            if (source.pos, produced) == before { return .failure("zstd: frame truncated") }
        }
        guard produced == size else { return .failure("zstd produced \(produced) bytes, \(size) declared") }
        return .success(out)
    }

    static func lz4(_ input: UnsafeRawBufferPointer, size: Int) -> Result<[UInt8], DecompressionFailure> {
        var ctx: OpaquePointer?
        let created = LZ4F_createDecompressionContext(&ctx, UInt32(LZ4F_VERSION))
        guard LZ4F_isError(created) == 0, let ctx else { return .failure("lz4: cannot create a context") }
        defer { LZ4F_freeDecompressionContext(ctx) }
        var out = [UInt8](repeating: 0, count: initialCapacity(input: input.count, size: size))
        var produced = 0, consumed = 0
        while true {
            if produced == out.count { _ = grow(&out, to: size) }
            var dstSize = out.count - produced
            var srcSize = input.count - consumed
            let hint = out.withUnsafeMutableBytes {
                LZ4F_decompress(ctx, $0.baseAddress! + produced, &dstSize, input.baseAddress! + consumed, &srcSize, nil)
            }
            if LZ4F_isError(hint) != 0 { return .failure("lz4: \(String(cString: LZ4F_getErrorName(hint)))") }
            produced += dstSize
            consumed += srcSize
            if hint == 0 { break }  // frame complete
            if srcSize == 0 && dstSize == 0 {
                return .failure(
                    produced == size ? "lz4 produces more than the \(size) bytes declared" : "lz4: frame ends early")
            }
            if consumed >= input.count && hint != 0 && produced < out.count { return .failure("lz4: frame truncated") }
        }
        guard produced == size else { return .failure("lz4 produced \(produced) bytes, \(size) declared") }
        return .success(out)
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
