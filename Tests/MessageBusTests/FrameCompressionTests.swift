import Testing
import WireFormat
@testable import MessageBus

@Suite("Compressed numbered batches")
struct FrameCompressionTests {
    /// Frames like the bus carries: mostly zeros (unset covariances), the same names on every entry.
    static let frames = (0..<64).map { k in
        var payload = [UInt8](repeating: 0, count: 324)
        payload[1] = 1
        payload[8] = UInt8(k)
        payload[100 + k] = 0xAB
        return WireFrame(
            topic: k % 2 == 0 ? "imu/data_raw" : "imu/mag", type: "sensor_msgs/msg/Imu", encoding: "cdr",
            payload: payload)
    }

    static func compressed(first: UInt64) throws -> BusMessage {
        let plain = FrameSequenceTests.sequenced(frames[...], first: first)
        var scratch: [UInt8] = []
        return try plain.withUnsafeBytes {
            try WireFrame.compressed(
                sequenced: $0, numbers: BatchNumbers(first: first, census: WireFrame.census(of: $0)!),
                scratch: &scratch)
        }
    }

    @Test("a compressed batch is smaller, keeps its numbers outside the block and inflates to the plain batch")
    func roundTrip() throws {
        let plain = FrameSequenceTests.sequenced(Self.frames[...], first: 41)
        let message = try Self.compressed(first: 41)
        let bytes = UnsafeRawBufferPointer(message.bytes)
        #expect(bytes.count * 5 < plain.count, "\(bytes.count) of \(plain.count) bytes")
        #expect(WireFrame.isCompressed(bytes))
        #expect(WireFrame.sequence(of: bytes)! == (41, 64))
        #expect(try WireFrame.inflated(bytes)?.array == plain)
        #expect(try WireFrame.frames(in: message.array) == Self.frames)
        // Renumbered in place, like a plain one; the fast paths leave it to be inflated first.
        #expect(WireFrame.census(of: bytes) == WireFrame.census(of: plain))
        var topics = TopicNumbering()
        _ = topics.census(of: Self.frames[0..<1])
        WireFrame.renumber(message.bytes, first: 9_000, topics: &topics)
        #expect(WireFrame.sequence(of: UnsafeRawBufferPointer(message.bytes))! == (9_000, 64))
        let inflated = try #require(try WireFrame.inflated(UnsafeRawBufferPointer(message.bytes)))
        #expect(WireFrame.sequence(of: inflated.array)! == (9_000, 64))
        #expect(WireFrame.census(of: inflated.array)?.map(\.first) == [1, 0])
        #expect(WireFrame.dataFrameCount(UnsafeRawBufferPointer(message.bytes)) == nil)
        var views: [WireFrame.View] = []
        #expect(!WireFrame.views(in: message.bytes, into: &views))
        // Anything else is not inflated.
        #expect(try plain.withUnsafeBytes { try WireFrame.inflated($0) } == nil)
    }

    @Test("a damaged block, a cut one, or a size beyond the frame limit is malformed, never a crash")
    func damaged() throws {
        let good = try Self.compressed(first: 0).array
        let sizeAt = try #require(good.withUnsafeBytes { WireFrame.afterCensus($0) })
        let header = sizeAt + 4
        var flipped = good
        flipped[header + 5] ^= 0xFF
        var cut = good
        cut.removeLast(7)
        var lying = good
        // The stated inflated size, one byte more than the block holds.
        lying[sizeAt] = lying[sizeAt] &+ 1
        var huge = good
        huge.replaceSubrange(sizeAt..<header, with: [0xFF, 0xFF, 0xFF, 0x7F])
        for bytes in [cut, lying, huge] {
            #expect(throws: WireFrame.DecodeError.self) { try bytes.withUnsafeBytes { try WireFrame.inflated($0) } }
            #expect(throws: WireFrame.DecodeError.self) { try WireFrame.frames(in: bytes) }
        }
        // A flipped byte may still inflate (LZ4 carries no checksum) but then to other entries, which
        // the batch parser checks against the count; it must not crash either way.
        _ = try? WireFrame.frames(in: flipped)
    }

    @Test("a compressed header too short for its block is a damaged batch, not a plain one (fuzzer finding)")
    func shortCompressedHeader() {
        // The compressed header, 8 bytes of number and 4 of count, and no census or block size.
        let bytes =
            Array("\0gyrocompass/batch\0sequenced+lz4\0".utf8) + [8, 0, 0, 0] + Array("msg/".utf8) + [0, 0, 6, 0]
        #expect(throws: (any Error).self) { _ = try WireFrame.frames(in: bytes) }
        #expect(bytes.withUnsafeBytes { WireFrame.dataFrameCount($0) } == nil)
        var copy = bytes
        var views: [WireFrame.View] = []
        #expect(!copy.withUnsafeMutableBytes { WireFrame.views(in: $0, into: &views) })
    }
}
