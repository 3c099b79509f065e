import Testing
@testable import Bags

@Suite("Chunk compression")
struct CompressionTests {
    let data: [UInt8] = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 * 7 / 3) }

    @Test("zstd and lz4 round trip at the declared size, in buffers that grow from a small start")
    func roundTrip() throws {
        for compression in ["zstd", "lz4"] {
            let packed = ChunkCompression.compress(data, compression: compression)
            #expect(ChunkCompression.initialCapacity(input: packed.count, size: data.count) <= data.count)
            let result = packed.withUnsafeBytes {
                ChunkCompression.decompress($0, compression: compression, size: data.count)
            }
            #expect((try? result.get()) == data, "\(compression)")
        }
    }

    @Test("a declared size the data does not fill, or exceeds, is refused")
    func wrongDeclaredSize() {
        for compression in ["zstd", "lz4"] {
            let packed = ChunkCompression.compress(data, compression: compression)
            for size in [1 << 30, data.count + 1, data.count - 1, 10] {
                let result = packed.withUnsafeBytes {
                    ChunkCompression.decompress($0, compression: compression, size: size)
                }
                #expect(throws: DecompressionFailure.self, "\(compression) declared \(size)") { try result.get() }
            }
        }
    }

    @Test("a frame cut short is refused, not read as complete")
    func truncatedFrame() {
        for compression in ["zstd", "lz4"] {
            let packed = ChunkCompression.compress(data, compression: compression)
            let cut = Array(packed.prefix(packed.count * 2 / 3))
            let result = cut.withUnsafeBytes {
                ChunkCompression.decompress($0, compression: compression, size: data.count)
            }
            #expect(throws: DecompressionFailure.self, "\(compression)") { try result.get() }
        }
    }
}
