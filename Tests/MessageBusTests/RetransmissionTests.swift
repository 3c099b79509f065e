import Testing
import Foundation
import WireFormat
@testable import MessageBus

@Suite("Retransmission")
struct RetransmissionTests {
    /// Message k of a stream of two-frame batches: frames 2k and 2k + 1.
    static func message(_ k: Int, payloadBytes: Int = 8) -> [UInt8] {
        let frames = (0..<2).map { _ in
            WireFrame(
                topic: "imu/data_raw", type: "t/msg/T", encoding: "cdr",
                payload: [UInt8](repeating: 7, count: payloadBytes))
        }
        return FrameSequenceTests.sequenced(frames[...], first: UInt64(2 * k))
    }

    static func keep(_ buffer: RetransmitBuffer, _ messages: some Sequence<Int>, payloadBytes: Int = 8) {
        for k in messages { buffer.keep(try! BusMessage(copying: message(k, payloadBytes: payloadBytes))) }
    }

    @Test("the buffer returns the messages holding a range, bounded by bytes, and forgets a renumbered run")
    func buffer() {
        let buffer = RetransmitBuffer(seconds: 60, maximumBytes: 1 << 20)
        Self.keep(buffer, 0..<10)
        let (some, oldest, next) = buffer.messages(first: 5, end: 9)
        #expect(oldest == 0 && next == 20)
        // Frames 5 to 8 lie in messages 2 (frames 4, 5) to 4 (frames 8, 9).
        #expect(some.map { WireFrame.sequence(of: $0)!.first } == [4, 6, 8])
        #expect(buffer.messages(first: Retransmission.everythingHeld, end: .max).messages.count == 10)
        #expect(buffer.messages(first: 20, end: 30).messages.isEmpty)

        let small = RetransmitBuffer(seconds: 60, maximumBytes: 3 * Self.message(0, payloadBytes: 1000).count)
        Self.keep(small, 0..<10, payloadBytes: 1000)
        let held = small.messages(first: Retransmission.everythingHeld, end: .max)
        #expect(held.messages.count == 3 && held.oldest == 14 && held.next == 20)
        #expect(small.held.bytes <= small.maximumBytes)

        Self.keep(buffer, 0..<2)  // a publisher that numbered from 0 again: a new run
        #expect(buffer.messages(first: Retransmission.everythingHeld, end: .max).messages.count == 2)
    }

    @Test("the buffer drops what is older than its seconds, but always keeps the last message")
    func age() throws {
        let buffer = RetransmitBuffer(seconds: 0.05, maximumBytes: 1 << 20)
        Self.keep(buffer, 0..<5)
        Thread.sleep(forTimeInterval: 0.1)
        let held = buffer.messages(first: Retransmission.everythingHeld, end: .max)
        #expect(held.messages.count == 1 && held.oldest == 8)
        Self.keep(buffer, 5..<6)
        #expect(buffer.messages(first: 0, end: 100).messages.count == 1)
    }

    @Test("a client gets a range from a server over ipc, as sent, and nothing from an endpoint nobody serves")
    func serverAndClient() throws {
        let context = BusContext()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gc-resend-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let buffer = RetransmitBuffer(seconds: 60, maximumBytes: 1 << 20)
        Self.keep(buffer, 0..<50)
        let server = try RetransmitServer(context, endpoint: "ipc://\(dir)/resend", buffer: buffer)
        defer { server.stop() }
        let client = try RetransmitClient(
            context, endpoint: "ipc://\(dir)/resend", maximumMessageBytes: 1 << 20, curve: nil)
        defer { client.close() }
        let reply = try #require(try client.request(first: 10, end: 20, timeoutMilliseconds: 2000))
        #expect(reply.messages == (5..<10).map { Self.message($0) })
        #expect(reply.oldest == 0 && reply.next == 100)
        let all = try #require(
            try client.request(first: Retransmission.everythingHeld, end: .max, timeoutMilliseconds: 2000))
        #expect(all.messages.count == 50)
        #expect(server.served == (2, 55))

        let nobody = try RetransmitClient(
            context, endpoint: "ipc://\(dir)/nobody", maximumMessageBytes: 1 << 20, curve: nil)
        defer { nobody.close() }
        #expect(try nobody.request(first: 0, end: 10, timeoutMilliseconds: 100) == nil)
    }

    @Test("a client repeating requests for everything is refused once its budget is spent; another is not")
    func budgetPerClient() throws {
        let context = BusContext()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gc-resend-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // The buffer holds 10 messages; a long memory (600 s) refills slowly, so the burst is what counts.
        let size = Self.message(0, payloadBytes: 1000).count
        let buffer = RetransmitBuffer(seconds: 600, maximumBytes: 10 * size)
        Self.keep(buffer, 0..<10, payloadBytes: 1000)
        let server = try RetransmitServer(context, endpoint: "ipc://\(dir)/resend", buffer: buffer)
        defer { server.stop() }
        func client() throws -> RetransmitClient {
            try RetransmitClient(context, endpoint: "ipc://\(dir)/resend", maximumMessageBytes: 1 << 20, curve: nil)
        }
        let greedy = try client()
        defer { greedy.close() }
        var counts: [Int] = []
        for _ in 0..<5 {
            let reply = try #require(
                try greedy.request(first: Retransmission.everythingHeld, end: .max, timeoutMilliseconds: 2000))
            counts.append(reply.messages.count)
            #expect(reply.oldest == 0 && reply.next == 20)  // the status comes either way
        }
        // Twice the buffer: two whole answers, then refusals.
        #expect(counts == [10, 10, 0, 0, 0])
        #expect(server.refused == 3)
        let other = try client()
        defer { other.close() }
        let reply = try #require(try other.request(first: 0, end: 4, timeoutMilliseconds: 2000))
        #expect(reply.messages.count == 2)

        var budget = RetransmitBudget(bufferBytes: 100, bufferSeconds: 1, maximumClients: 2)
        let whole = budget.take(200, client: [1], now: 0), more = budget.take(1, client: [1], now: 0)
        let refilled = budget.take(50, client: [1], now: 0.5)  // 100 bytes per second
        #expect(whole && !more && refilled)
        _ = budget.take(1, client: [2], now: 1)
        _ = budget.take(1, client: [3], now: 2)
        #expect(budget.clients == 2)  // the stalest forgotten
    }

    @Test("default retransmit endpoints: the ipc path or inproc name with -resend, the next tcp port")
    func defaultEndpoints() {
        #expect(Retransmission.defaultEndpoint(for: "ipc:///run/x/fusion") == "ipc:///run/x/fusion-resend")
        #expect(Retransmission.defaultEndpoint(for: "inproc://a") == "inproc://a-resend")
        #expect(Retransmission.defaultEndpoint(for: "tcp://127.0.0.1:5601") == "tcp://127.0.0.1:5602")
        #expect(Retransmission.defaultEndpoint(for: "tcp://[::1]:7000") == "tcp://[::1]:7001")
        #expect(Retransmission.defaultEndpoint(for: "tcp://127.0.0.1:*") == nil)
        #expect(Retransmission.defaultEndpoint(for: "tcp://127.0.0.1:65535") == nil)
    }

    @Test("after a retransmission, what the live stream still queued from before is dropped as repeats")
    func repeatsAfterRetransmission() {
        var s = InputSequence(.live, joining: true)
        #expect(s.admit(first: 100, count: 50) == .all)  // retransmitted: frames 100 ..< 150
        s.expectRepeats()
        #expect(s.admit(first: 120, count: 10) == .none)  // queued live messages from before
        #expect(s.admit(first: 140, count: 20) == .skippingFirst(10))
        #expect(s.admit(first: 160, count: 5) == .all)
        #expect(s.restarts == 0 && s.duplicates == 20 && s.missing == 0)
        // Caught up: a lower number now is a restarted publisher again.
        #expect(s.admit(first: 0, count: 5) == .all)
        #expect(s.restarts == 1)
        #expect(s.gap(before: 10) == 5..<10 && s.gap(before: 5) == nil)
    }
}
