import Testing
import Foundation
import CompassCore
import IMUSimulator
import WireFormat
@testable import Bags

/// A scratch directory removed when the test ends.
final class ScratchDirectory {
    let path: String
    init() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("gyrocompass-\(UUID().uuidString)").path
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Simulated IMU and magnetometer messages, as a ROS driver would publish them.
func simulatedMessages(seconds: Double = 6, seed: UInt64 = 4) -> [BagMessage] {
    var s = SimulationScenario()
    s.seed = seed
    s.motion = [.rest(seconds: 1), .turn(degreesPerSecond: 30, seconds: seconds - 1)]
    s.startTime = 1_700_000_000
    var out: [BagMessage] = []
    for x in IMUSimulator.samples(s) {
        let header = RosHeader(stamp: RosTime(seconds: x.imu.timestamp), frameId: "imu_link")
        let t = UInt64(header.stamp.nanoseconds)
        let imu = ImuMessage(
            header: header, orientation: Quaternion(w: 1, x: 0, y: 0, z: 0),
            orientationCovariance: [-1, 0, 0, 0, 0, 0, 0, 0, 0],
            angularVelocity: x.imu.angularVelocity, angularVelocityCovariance: [],
            linearAcceleration: x.imu.specificForce,
            linearAccelerationCovariance: [])
        let mag = MagneticFieldMessage(
            header: header, magneticField: x.magnetometer.fieldMicrotesla * 1e-6, magneticFieldCovariance: [])
        out.append(
            BagMessage(
                topic: "/imu/data_raw", type: ImuMessage.typeName, encoding: "cdr", logTime: t, publishTime: t,
                data: imu.cdr()))
        out.append(
            BagMessage(
                topic: "/imu/mag", type: MagneticFieldMessage.typeName, encoding: "cdr", logTime: t, publishTime: t,
                data: mag.cdr()))
    }
    return out
}

func writeMCAP(
    _ messages: [BagMessage], to path: String, compression: String, chunkBytes: Int = 16 << 10, finish: Bool = true
) throws -> MCAPWriter {
    let w = try MCAPWriter(path: path, compression: compression)
    w.chunkTargetBytes = chunkBytes
    for m in messages {
        try w.addTopic(m.topic, type: m.type, definition: MessageDefinitions.definition(for: m.type)!)
        try w.write(topic: m.topic, logTime: m.logTime, publishTime: m.publishTime, data: m.data)
    }
    if finish { try w.finish() } else { try w.flush() }
    return w
}

extension Array {
    /// Consecutive slices of `size` elements (the last may be shorter).
    func chunked(_ size: Int) -> [[Element]] {
        stride(from: 0, to: count, by: size).map { Array(self[$0..<Swift.min($0 + size, count)]) }
    }
}

func readAll(_ path: String, _ options: BagReadOptions = .init()) throws -> [BagMessage] {
    var out: [BagMessage] = []
    try BagReader(path: path).forEachMessage(options) { out.append($0) }
    return out
}

@Suite("ROS 2 bags: MCAP and sqlite3")
struct BagsTests {
    let messages = simulatedMessages()

    @Test("MCAP written with each compression reads back identical", arguments: ["", "zstd", "lz4"])
    func mcapRoundTrip(compression: String) throws {
        let dir = ScratchDirectory()
        let path = dir.path + "/t.mcap"
        _ = try writeMCAP(messages, to: path, compression: compression)
        let reader = try MCAPReader(path: path)
        #expect(
            reader.hasFooter && !reader.chunkIndexes.isEmpty
                && reader.statistics?.messageCount == UInt64(messages.count))
        #expect(Set(reader.chunkIndexes.map(\.compression)) == [compression])
        #expect(try readAll(path) == messages)
        // The same file read without its summary (forward scan) gives the same messages.
        var scanned: [BagMessage] = []
        try reader.scan(from: 8, to: reader.size, .init(), { scanned.append($0) }, topLevel: true)
        #expect(scanned == messages)
        let topics = try BagReader(path: path).topics()
        #expect(
            topics.map(\.name) == ["/imu/data_raw", "/imu/mag"]
                && topics.allSatisfy { $0.messageCount == messages.count / 2 })
    }

    @Test(
        "messages stored out of log-time order (reversed, chunks overlapping) read in log-time order, ties as stored")
    func logTimeOrder() throws {
        let dir = ScratchDirectory()
        // In log-time order the stream is the simulator's: IMU before magnetometer at every equal time.
        let ordered = messages
        for (name, stored) in [
            ("reversed", Array(messages.reversed().chunked(2).flatMap { $0.reversed() })),
            (
                "interleaved",
                stride(from: 0, to: messages.count, by: 2).map { messages[$0] }
                    + stride(from: 1, to: messages.count, by: 2).map { messages[$0] }
            ),
        ] {
            let path = dir.path + "/\(name).mcap"
            _ = try writeMCAP(stored, to: path, compression: "zstd", chunkBytes: 4 << 10)
            #expect(try MCAPReader(path: path).chunkIndexes.count > 3)
            let got = try readAll(path)
            let sameTimes = got.map(\.logTime) == ordered.map(\.logTime), same = got == ordered
            #expect(got.count == ordered.count && sameTimes && same, "\(name)")
        }
    }

    @Test("topic and time filters select without reading the rest")
    func filters() throws {
        let dir = ScratchDirectory()
        let path = dir.path + "/f.mcap"
        _ = try writeMCAP(messages, to: path, compression: "zstd")
        var options = BagReadOptions()
        options.topics = ["/imu/mag"]
        options.startTime = messages[200].logTime
        options.endTime = messages[800].logTime
        let got = try readAll(path, options)
        let want = messages.filter {
            $0.topic == "/imu/mag" && $0.logTime >= options.startTime! && $0.logTime < options.endTime!
        }
        #expect(got == want && !got.isEmpty)
    }

    @Test("sqlite3 (.db3) bags round-trip, also as a rosbag2 directory with metadata.yaml")
    func sqlite() throws {
        let dir = ScratchDirectory()
        let db = dir.path + "/bag_0.db3"
        let w = try SQLiteBagWriter(path: db)
        for m in messages {
            try w.addTopic(m.topic, type: m.type)
            try w.write(topic: m.topic, timestamp: m.logTime, data: m.data)
        }
        try w.finish()
        let back = try readAll(db)
        #expect(back.map(\.data) == messages.map(\.data) && back.map(\.logTime) == messages.map(\.logTime))
        try """
        rosbag2_bagfile_information:
          version: 5
          storage_identifier: sqlite3
          relative_file_paths:
            - bag_0.db3
        """.write(toFile: dir.path + "/metadata.yaml", atomically: true, encoding: .utf8)
        #expect(try readAll(dir.path).count == messages.count)
        try "rosbag2_bagfile_information:\n  storage_identifier: tape\n".write(
            toFile: dir.path + "/metadata.yaml", atomically: true, encoding: .utf8)
        #expect(throws: BagError.self) { try BagReader(path: dir.path) }
    }

    @Test("a file cut off after its last flush (a crash) is damaged; salvage reads every flushed message")
    func unfinished() throws {
        let dir = ScratchDirectory()
        let path = dir.path + "/crash.mcap"
        let w = try writeMCAP(messages, to: path, compression: "zstd", finish: false)
        let reader = try MCAPReader(path: path)
        #expect(!reader.hasFooter)
        do {
            _ = try readAll(path)
            Issue.record("a recording without a footer was read as complete")
        } catch let error as BagError {
            #expect(error.description.contains("the file ends without one"))
        }
        var options = BagReadOptions()
        options.salvage = true
        #expect(try readAll(path, options) == messages)
        let salvaged = try MCAPReader(path: path)
        try salvaged.forEachMessage(options) { _ in }
        #expect(salvaged.damage.count == 1)
        _ = w  // the writer finishes the file when it goes away
    }

    @Test("truncation at any point: a clear error, or with salvage every message before the damage")
    func truncation() throws {
        let dir = ScratchDirectory()
        let path = dir.path + "/full.mcap"
        _ = try writeMCAP(Array(messages.prefix(400)), to: path, compression: "zstd", chunkBytes: 4 << 10)
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let cut = dir.path + "/cut.mcap"
        var salvagedCounts: [Int] = []
        for n in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 300)) {
            try Data(bytes.prefix(n)).write(to: URL(fileURLWithPath: cut))
            do {
                var options = BagReadOptions()
                options.salvage = true
                let got = try readAll(cut, options)
                #expect(
                    got == Array(messages.prefix(got.count)),
                    "salvage at \(n) returned messages out of order or altered")
                salvagedCounts.append(got.count)
            } catch let e as BagError {
                #expect(!e.description.isEmpty)
                switch e {
                case .notABag, .truncated, .cannotOpen: break
                default: Issue.record("unexpected error for a cut at \(n): \(e)")
                }
            }
        }
        #expect(salvagedCounts.count > 250)
        #expect(salvagedCounts.max()! == 400 && salvagedCounts.contains { $0 > 0 && $0 < 400 })
    }

    @Test("seeded bit flips never crash, hang or alter a delivered message")
    func bitFlips() throws {
        let dir = ScratchDirectory()
        let path = dir.path + "/clean.mcap"
        let subset = Array(messages.prefix(300))
        _ = try writeMCAP(subset, to: path, compression: "zstd", chunkBytes: 4 << 10)
        let clean = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let known = Set(subset.map(\.data))
        var rng = SeededGenerator(seed: 2024)
        let damaged = dir.path + "/flipped.mcap"
        var errors = 0, delivered = 0
        for _ in 0..<1500 {
            var b = clean
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                let i = Int(rng.next() % UInt64(b.count))
                b[i] ^= UInt8(1 << (rng.next() % 8))
            }
            try Data(b).write(to: URL(fileURLWithPath: damaged))
            for salvage in [false, true] {
                var options = BagReadOptions()
                options.salvage = salvage
                do {
                    let got = try readAll(damaged, options)
                    delivered += got.count
                    // Chunk payloads are CRC-protected: nothing altered gets through.
                    #expect(got.allSatisfy { known.contains($0.data) })
                } catch {
                    errors += 1
                    #expect(error is BagError)
                }
            }
        }
        #expect(errors > 0 && delivered > 0)
    }

    /// The file's records, (offset, opcode, whole record length), from the magic to the footer.
    func records(_ b: [UInt8]) -> [(offset: Int, op: UInt8, length: Int)] {
        var out: [(Int, UInt8, Int)] = []
        var pos = 8
        while pos + 9 <= b.count - 8 {
            let len = (0..<8).reduce(0) { $0 | Int(b[pos + 1 + $1]) << (8 * $1) }
            out.append((pos, b[pos], 9 + len))
            pos += 9 + len
        }
        return out
    }

    @Test("a chunk cut out of an MCAP is damage, found whichever way the file was patched up")
    func removedChunk() throws {
        let dir = ScratchDirectory()
        let path = dir.path + "/whole.mcap"
        _ = try writeMCAP(Array(messages.prefix(400)), to: path, compression: "zstd", chunkBytes: 4 << 10)
        let whole = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let chunks = records(whole).filter { $0.op == 0x06 }
        #expect(chunks.count > 4)
        let victim = chunks[2]
        var cut = whole
        cut.removeSubrange(victim.offset..<(victim.offset + victim.length))
        let cutPath = dir.path + "/cut.mcap"
        try Data(cut).write(to: URL(fileURLWithPath: cutPath))
        // The footer still points where the summary was: refused, and with salvage listed.
        #expect(throws: BagError.self) { _ = try readAll(cutPath) }
        var options = BagReadOptions()
        options.salvage = true
        let reader = try BagReader(path: cutPath)
        var got = 0
        try reader.forEachMessage(options) { _ in got += 1 }
        #expect(got < 400 && got > 300)
        #expect(reader.damage.contains { "\($0)".contains("summary section") })
    }

    @Test("a change outside every chunk is caught by the data section CRC, on reading, not on listing")
    func dataSectionCRC() throws {
        let dir = ScratchDirectory()
        let path = dir.path + "/crc.mcap"
        _ = try writeMCAP(Array(messages.prefix(100)), to: path, compression: "zstd")
        var b = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        // The Header record's library name (no CRC of its own): the last byte of the record.
        let header = try #require(records(b).first { $0.op == 0x01 })
        b[header.offset + header.length - 1] ^= 0x20
        let changed = dir.path + "/changed.mcap"
        try Data(b).write(to: URL(fileURLWithPath: changed))
        #expect(try BagReader(path: changed).topics().count == 2)
        do {
            _ = try readAll(changed)
            Issue.record("a changed data section went unnoticed")
        } catch let e as BagError {
            #expect("\(e)".contains("data section"), "\(e)")
        }
    }

    @Test("fewer messages than the statistics count is damage, named per topic")
    func statisticsCount() throws {
        let dir = ScratchDirectory()
        let path = dir.path + "/stats.mcap"
        _ = try writeMCAP(Array(messages.prefix(200)), to: path, compression: "lz4")
        var b = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        // Raise the first channel's count in the Statistics record by one and drop the summary CRC.
        let stats = try #require(records(b).first { $0.op == 0x0B })
        // message_count u64, schema u16, channel u32, attachment u32, metadata u32, chunk u32, start u64,
        // end u64, then the map's byte length u32 and (u16 channel, u64 count) pairs.
        let firstCount = stats.offset + 9 + 8 + 2 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 2
        b[firstCount] &+= 1
        let footerCRC = b.count - 8 - 4
        for i in 0..<4 { b[footerCRC + i] = 0 }
        let patched = dir.path + "/patched.mcap"
        try Data(b).write(to: URL(fileURLWithPath: patched))
        do {
            _ = try readAll(patched)
            Issue.record("a missing message went unnoticed")
        } catch let e as BagError {
            #expect("\(e)".contains("missing"), "\(e)")
            #expect(e.isDamage)
        }
        // Reading a time range cannot be compared with the whole file's statistics: no complaint.
        var range = BagReadOptions()
        range.startTime = messages[10].logTime
        #expect(try readAll(patched, range).count == 190)
    }

    @Test("lying length fields are refused before any allocation")
    func lyingLengths() throws {
        let dir = ScratchDirectory()
        let path = dir.path + "/lie.mcap"
        _ = try writeMCAP(Array(messages.prefix(50)), to: path, compression: "zstd")
        var b = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let reader = try MCAPReader(path: path)
        let chunkAt = Int(reader.chunkIndexes[0].chunkStartOffset)
        // uncompressed_size sits after opcode (1), length (8), start and end times (16).
        for i in 0..<8 { b[chunkAt + 25 + i] = i == 7 ? 0x7F : 0xFF }
        try Data(b).write(to: URL(fileURLWithPath: path))
        #expect(throws: BagError.self) { try readAll(path) }
        var options = BagReadOptions()
        options.salvage = true
        let r2 = try BagReader(path: path)
        try r2.forEachMessage(options) { _ in }
        #expect(
            r2.damage.contains {
                if case .tooLarge = $0 { return true }
                return false
            })
    }

    @Test("not a bag, missing files and empty files are clear errors")
    func notBags() throws {
        let dir = ScratchDirectory()
        #expect(throws: BagError.self) { try BagReader(path: dir.path + "/nothing.mcap") }
        try Data("hello".utf8).write(to: URL(fileURLWithPath: dir.path + "/x.mcap"))
        #expect(throws: BagError.notABag(path: dir.path + "/x.mcap", reason: "no MCAP magic at the start")) {
            try BagReader(path: dir.path + "/x.mcap")
        }
        try Data().write(to: URL(fileURLWithPath: dir.path + "/e.mcap"))
        #expect(throws: BagError.self) { try BagReader(path: dir.path + "/e.mcap") }
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: dir.path + "/g.db3"))
        #expect(throws: BagError.self) { try BagReader(path: dir.path + "/g.db3") }
        let empty = ScratchDirectory()
        #expect(throws: BagError.self) { try BagReader(path: empty.path) }
    }

    @Test("CRC-32 matches the standard check value, one byte at a time, and across every split")
    func crc() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([]) == 0)
        // Against the definition, bit by bit, for every length up to 40 and a long run (the eight-byte
        // steps, the tail, and unaligned starts).
        func bitwise(_ bytes: [UInt8]) -> UInt32 {
            var c: UInt32 = 0xFFFF_FFFF
            for b in bytes {
                c ^= UInt32(b)
                for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            }
            return ~c
        }
        var generator = SystemRandomNumberGenerator()
        let data = (0..<1000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for n in Array(0...40) + [999, 1000] {
            #expect(CRC32.checksum(Array(data[0..<n])) == bitwise(Array(data[0..<n])), "\(n) bytes")
        }
        for split in [1, 3, 7, 8, 9, 500] {
            let whole = data.withUnsafeBytes { raw in
                CRC32.update(
                    CRC32.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<split])),
                    UnsafeRawBufferPointer(rebasing: raw[split...]))
            }
            #expect(whole == bitwise(data), "split at \(split)")
        }
    }
}

@Test("a directory's files are one recording only when they are its numbered parts, read in number order")
func splitRecordingParts() {
    #expect(BagReader.splitParts(["only.mcap"]) == ["only.mcap"])
    let parts = (0...10).map { "run_\($0).mcap" }
    #expect(BagReader.splitParts(parts.sorted()) == parts)
    #expect(BagReader.splitParts(["monday.mcap", "tuesday.mcap"]) == nil)
    #expect(BagReader.splitParts(["a_0.mcap", "b_1.mcap"]) == nil)
    #expect(BagReader.splitParts(["run_0.mcap", "run_2.mcap"]) == nil)
    #expect(BagReader.splitParts(["run_1.mcap", "run_2.mcap"]) == nil)
}
