import Testing
import WireFormat
import CZeroMQ
@testable import MessageBus

@Suite("Wire frames")
struct WireFrameTests {
    @Test("wire frames round-trip, batches unpack, and malformed ones are refused")
    func frames() throws {
        let f = WireFrame(
            topic: "heading", type: "gyrocompass_msgs/msg/Heading", encoding: "cdr", payload: [0, 1, 0, 0, 42])
        #expect(Array(f.encoded().prefix(8)) == Array("heading\0".utf8))
        #expect(try WireFrame.decode(f.encoded()) == f)
        // The batch layout written out by hand: header, then per frame its u32 little-endian length and the frame.
        let header = Array("\0gyrocompass/batch\0frames\0".utf8)
        func batchBytes(_ frames: [WireFrame]) -> [UInt8] {
            var out = header
            for f in frames {
                let one = Array("\(f.topic)\0\(f.type)\0\(f.encoding)\0".utf8) + Array(f.payload)
                withUnsafeBytes(of: UInt32(one.count).littleEndian) { out += $0 }
                out += one
            }
            return out
        }
        let batch = batchBytes([f, f, WireFrame.endOfStream(from: "x")])
        #expect(try WireFrame.frames(in: batch) == [f, f, WireFrame.endOfStream(from: "x")])
        #expect(throws: WireFrame.DecodeError.missingSeparator(field: "type")) {
            try WireFrame.decode(Array("topic\0type".utf8))
        }
        #expect(throws: WireFrame.DecodeError.invalidUTF8(field: "topic")) { try WireFrame.decode([0xFF, 0, 0, 0]) }
        var bad = batch
        bad[header.count] = 0xFF  // the first length claims more than the batch holds
        #expect(throws: WireFrame.DecodeError.self) { try WireFrame.frames(in: bad) }
        // The one-pass encoder writes that layout; decoding in place gives the frames back.
        let other = WireFrame(
            topic: "some/unknown topic", type: "pkg/msg/Unlisted", encoding: "json", payload: Array("{}".utf8))
        let frames = [f, other, f]
        #expect(WireFrame.encodedMessage(frames[...]) == batchBytes(frames))
        #expect(other.encoded() == Array("some/unknown topic\0pkg/msg/Unlisted\0json\0{}".utf8))
        #expect(WireFrame.encodedMessage(frames[1...1]) == other.encoded())
        #expect(try WireFrame.frames(in: WireFrame.encodedMessage(frames[...])) == frames)
        #expect(try WireFrame.frames(in: other.encoded()) == [other])
        #expect(throws: WireFrame.DecodeError.malformedBatch(offset: 0)) {
            try WireFrame.frames(in: Array("\0gyrocompass/batch\0frames\0".utf8) + [200, 0, 0, 0, 1])
        }
        // Batches do not nest (the wire frame fuzzer's first find, tools/fuzz/regressions/wireframe).
        let nested = WireFrame(
            topic: "", type: WireFrame.batchType, encoding: "frames", payload: batchBytes([f]).dropFirst(header.count))
        var inner = batchBytes([f, nested])
        #expect(throws: WireFrame.DecodeError.self) { try WireFrame.frames(in: inner) }
        var views: [WireFrame.View] = []
        #expect(!inner.withUnsafeMutableBytes { WireFrame.views(in: $0, into: &views) })
    }

    @Test("every pipeline topic and message type is interned: decoding hands out the table's own string")
    func knownNames() throws {
        for topic in PipelineTopics.all { #expect(WireFrame.knownTopics.names.contains(topic), "\(topic)") }
        for type in PipelineMessageTypes.all { #expect(WireFrame.knownTypes.names.contains(type), "\(type)") }
        for topic in PipelineTopics.all {
            let bytes = Array(topic.utf8)
            let found = bytes.withUnsafeBytes { WireFrame.knownTopics.match($0) }
            #expect(found == topic)
        }
        #expect(Array("nope".utf8).withUnsafeBytes { WireFrame.knownTopics.match($0) } == nil)
    }
}

@Suite("Reader counting")
struct ReaderCountTests {
    @Test("a reader-following publisher counts subscriptions up and disconnections down")
    func counts() throws {
        let context = BusContext()
        let endpoint = "inproc://reader-count-test"
        let publisher = try BusSocket.readerFollowingPublisher(context, endpoint: endpoint, highWaterMark: 10)
        var readers = ReaderCount()
        var subscribers: [BusSocket] = []
        for _ in 0..<2 {
            let s = try BusSocket(context, .sub)
            try s.subscribe([])
            try s.connect(endpoint)
            subscribers.append(s)
        }
        try readers.wait(publisher, for: 2, logEveryPolls: 1000, stopRequested: { false }) { _ in }
        #expect(readers.value == 2)
        subscribers.removeLast().close()
        var waited = 0
        while readers.value != 1 && waited < 40 {
            try readers.read(publisher, timeoutMilliseconds: 50)
            waited += 1
        }
        #expect(readers.value == 1)
        subscribers.forEach { $0.close() }
        publisher.close()
    }
}
