import Testing
import WireFormat
@testable import MessageBus

@Suite("Frame sequence numbers")
struct FrameSequenceTests {
    static let frames = (0..<5).map { k in
        WireFrame(
            topic: k % 2 == 0 ? "imu/data_raw" : "imu/mag", type: "t/msg/T", encoding: "cdr",
            payload: [0, 1, 0, 0, UInt8(k)])
    }

    /// A numbered batch of `frames` from `first`, its topics numbered by `topics`.
    static func sequenced(_ frames: ArraySlice<WireFrame>, first: UInt64, topics: inout TopicNumbering) -> [UInt8] {
        let numbers = BatchNumbers(first: first, census: topics.census(of: frames))
        let size = WireFrame.encodedSize(frames, numbers: numbers)
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, n in
            WireFrame.encode(frames, into: UnsafeMutableRawBufferPointer(buffer), numbers: numbers)
            n = size
        }
    }

    /// The same from a publisher that sent nothing before (each topic from 0).
    static func sequenced(_ frames: ArraySlice<WireFrame>, first: UInt64) -> [UInt8] {
        var topics = TopicNumbering()
        return sequenced(frames, first: first, topics: &topics)
    }

    @Test("a sequenced batch carries its first number and count, and every reader path unpacks it")
    func layout() throws {
        var bytes = Self.sequenced(Self.frames[...], first: 41)
        #expect(Array(bytes.prefix(29)) == Array("\0gyrocompass/batch\0sequenced\0".utf8))
        #expect(WireFrame.sequence(of: bytes)! == (41, 5))
        #expect(try WireFrame.frames(in: bytes) == Self.frames)
        #expect(bytes.withUnsafeBytes { WireFrame.dataFrameCount($0) } == 5)
        var views: [WireFrame.View] = []
        #expect(bytes.withUnsafeMutableBytes { WireFrame.views(in: $0, into: &views) })
        #expect(views.map { Array(UnsafeRawBufferPointer($0.payload)) } == Self.frames.map { Array($0.payload) })
        // One frame is a sequenced batch too (numbers on every data frame); renumbering is in place.
        let one = Self.sequenced(Self.frames[2...2], first: 7)
        #expect(WireFrame.sequence(of: one)! == (7, 1))
        #expect(try WireFrame.frames(in: one) == [Self.frames[2]])
        // The census: each topic's own numbers, in order of first appearance.
        #expect(
            WireFrame.census(of: bytes)
                == [
                    TopicCount(topic: "imu/data_raw", first: 0, count: 3),
                    TopicCount(topic: "imu/mag", first: 0, count: 2),
                ])
        var publisher = TopicNumbering()
        _ = publisher.census(of: Self.frames[0..<3])  // this publisher sent data_raw 0, 1 and mag 0 before
        bytes.withUnsafeMutableBytes { WireFrame.renumber($0, first: 1_000_000_000_000, topics: &publisher) }
        #expect(WireFrame.sequence(of: bytes)! == (1_000_000_000_000, 5))
        #expect(
            WireFrame.census(of: bytes)
                == [
                    TopicCount(topic: "imu/data_raw", first: 2, count: 3),
                    TopicCount(topic: "imu/mag", first: 1, count: 2),
                ])
        #expect(try WireFrame.frames(in: bytes) == Self.frames)
        // Plain messages carry no numbers.
        #expect(WireFrame.sequence(of: Self.frames[0].encoded()) == nil)
        #expect(WireFrame.sequence(of: WireFrame.encodedMessage(Self.frames[...])) == nil)
    }

    @Test("a count that disagrees with the entries, or a cut header, is malformed on every path")
    func lyingCount() throws {
        var bytes = Self.sequenced(Self.frames[...], first: 0)
        bytes[29 + 8] = 6  // claims six frames
        #expect(throws: WireFrame.DecodeError.self) { try WireFrame.frames(in: bytes) }
        #expect(bytes.withUnsafeBytes { WireFrame.dataFrameCount($0) } == nil)
        var views: [WireFrame.View] = []
        #expect(!bytes.withUnsafeMutableBytes { WireFrame.views(in: $0, into: &views) })
        let cut = Array(Self.sequenced(Self.frames[...], first: 0).prefix(33))
        #expect(WireFrame.sequence(of: cut) == nil)
        #expect(throws: WireFrame.DecodeError.self) { try WireFrame.frames(in: cut) }
        // A census whose counts do not add up to the frames, or cut off, is malformed everywhere too.
        let good = Self.sequenced(Self.frames[...], first: 0)
        let census = 29 + 12 + 4
        var lying = good
        lying[census + 2 + "imu/data_raw".utf8.count + 8] = 4  // data_raw claims 4 of 5, mag 2
        var cutCensus = good
        cutCensus.replaceSubrange((29 + 12)..<(29 + 16), with: [0xFF, 0xFF, 0, 0])
        for bad in [lying, cutCensus] {
            #expect(WireFrame.census(of: bad) == nil)
            #expect(throws: WireFrame.DecodeError.self) { try WireFrame.frames(in: bad) }
            #expect(bad.withUnsafeBytes { WireFrame.dataFrameCount($0) } == nil)
            var copy = bad
            #expect(!copy.withUnsafeMutableBytes { WireFrame.views(in: $0, into: &views) })
        }
    }

    @Test("a reader counts per topic what gaps skipped; a topic first seen late, or numbered again, is no gap")
    func topics() {
        var s = TopicSequences()
        s.admit([
            TopicCount(topic: "imu/data_raw", first: 0, count: 10), TopicCount(topic: "imu/mag", first: 0, count: 1),
        ])
        s.admit([TopicCount(topic: "imu/data_raw", first: 15, count: 5)])  // 10 ..< 15 lost
        s.admit([TopicCount(topic: "imu/mag", first: 3, count: 1), TopicCount(topic: "heading", first: 40, count: 2)])
        #expect(s.missingByTopic.map(\.topic) == ["imu/data_raw", "imu/mag"])
        #expect(s.missingByTopic.map(\.frames) == [5, 2])
        s.admit([TopicCount(topic: "imu/data_raw", first: 0, count: 5)])  // a restarted publisher
        #expect(s.expected["imu/data_raw"] == 5 && s.missing["imu/data_raw"] == 5)
    }

    @Test("a reader of a reproducible stream drops what it has read and counts what it missed")
    func reproducible() {
        var s = InputSequence(.reproducible)
        #expect(s.admit(first: 0, count: 10) == .all)
        #expect(s.admit(first: 10, count: 5) == .all)
        // A restarted publisher numbers its stream again from 0.
        #expect(s.admit(first: 0, count: 8) == .none)
        #expect(s.admit(first: 8, count: 10) == .skippingFirst(7))
        #expect(s.expected == 18 && s.duplicates == 15)
        // Frames 18 to 24 never came.
        #expect(s.admit(first: 25, count: 1) == .all)
        #expect(s.missing == 7 && s.gaps == 1 && s.expected == 26 && s.restarts == 0)
        // Frames read some other way (recomputed): expected from there on.
        s.expect(100)
        #expect(s.admit(first: 90, count: 10) == .none && s.admit(first: 100, count: 1) == .all)
    }

    @Test("a reader of a live stream takes a restarted numbering as new data, and a joining reader starts anywhere")
    func live() {
        var s = InputSequence(.live)
        #expect(s.admit(first: 0, count: 10) == .all)
        #expect(s.admit(first: 0, count: 4) == .all)
        #expect(s.restarts == 1 && s.duplicates == 0 && s.expected == 4)
        var joining = InputSequence(.reproducible, joining: true)
        #expect(joining.expected == nil)
        #expect(joining.admit(first: 5_000, count: 3) == .all)
        #expect(joining.missing == 0 && joining.expected == 5_003)
    }
}
