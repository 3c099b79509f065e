import Foundation
import CZeroMQ

/// Retransmission between stages, after the ZeroMQ guide's reliable pub-sub (the Clone pattern's
/// snapshot socket beside its publisher): the publisher of a live stream keeps the numbered bus
/// messages it sent in the last few seconds and serves ranges of them on a second endpoint (ROUTER),
/// so a reader that missed frames (a gap) or was restarted asks for them instead of losing them.
/// Streams a restarted stage can recompute (a bag, the simulator) need none.
///
/// Request (one frame, DEALER to ROUTER): `"\0gyrocompass/resend\0"`, then a request number, the first
/// frame number wanted and the number after the last (u64 little-endian each; first = `UInt64.max`:
/// everything held). Reply: the held messages that hold any of those frames, oldest first, exactly as
/// they were sent (plain or LZ4 numbered batches), then `"\0gyrocompass/resent\0"` with the request
/// number, the oldest frame number held (`UInt64.max`: none) and the publisher's next number.
public enum Retransmission {
    static let requestHeader: StaticString = "\0gyrocompass/resend\0"
    static let statusHeader: StaticString = "\0gyrocompass/resent\0"
    /// Asks for every frame held.
    public static let everythingHeld = UInt64.max

    static func encode(_ header: StaticString, _ values: [UInt64]) -> [UInt8] {
        var bytes = [UInt8](UnsafeBufferPointer(start: header.utf8Start, count: header.utf8CodeUnitCount))
        for v in values { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
        return bytes
    }

    /// The `count` numbers after `header`; nil for any other frame.
    static func decode(_ bytes: [UInt8], _ header: StaticString, count: Int) -> [UInt64]? {
        bytes.withUnsafeBytes { raw -> [UInt64]? in
            guard raw.count == header.utf8CodeUnitCount + 8 * count,
                WireFrame.starts(raw, with: header, more: 8 * count)
            else { return nil }
            return (0..<count).map {
                UInt64(
                    littleEndian: raw.loadUnaligned(fromByteOffset: header.utf8CodeUnitCount + 8 * $0, as: UInt64.self))
            }
        }
    }

    /// The endpoint a publisher on `endpoint` serves retransmissions on, when none is configured:
    /// the same ipc path or inproc name with "-resend", or, for tcp, the next port. Nil for a tcp
    /// endpoint without a numeric port (a wildcard).
    public static func defaultEndpoint(for endpoint: String) -> String? {
        guard endpoint.hasPrefix("tcp://") else { return endpoint + "-resend" }
        guard let colon = endpoint.lastIndex(of: ":"), let port = Int(endpoint[endpoint.index(after: colon)...]),
            port < 65535
        else { return nil }
        return "\(endpoint[...colon])\(port + 1)"
    }
}

/// What a publisher sent recently: its numbered bus messages, oldest first, bounded by age and
/// bytes. Appended to by the publishing thread, read by the `RetransmitServer` thread. Each entry
/// shares its message's content with the one sent (a reference count, no copy), and is only read.
public final class RetransmitBuffer: @unchecked Sendable {
    struct Entry {
        let first: UInt64
        let count: Int
        /// Released when the entry is dropped (the array is compacted later).
        var message: BusMessage?
        let size: Int
        let sentAt: Double
    }

    /// Seconds a message is kept; and the most bytes kept, oldest dropped first.
    public let seconds: Double
    public let maximumBytes: Int
    private let lock = NSLock()
    private var entries: [Entry] = []
    /// Entries before `head` are dropped (compacted once they are half the array).
    private var head = 0
    private var heldBytes = 0
    private var next: UInt64 = 0

    public init(seconds: Double, maximumBytes: Int) {
        self.seconds = seconds
        self.maximumBytes = maximumBytes
    }

    static func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) * 1e-9
    }

    /// Keeps a numbered bus message about to be sent (its numbers are read from its header). Neither
    /// it nor its content may be changed afterwards (sending does not).
    public func keep(_ message: BusMessage) {
        guard let (first, count) = WireFrame.sequence(of: UnsafeRawBufferPointer(message.bytes)),
            let shared = try? message.sharedCopy()
        else { return }
        let entry = Entry(first: first, count: count, message: shared, size: shared.bytes.count, sentAt: Self.now())
        lock.withLock {
            // A publisher numbers from 0 once; lower numbers would mean a new run: forget the old one.
            if first < next {
                entries.removeAll()
                head = 0
                heldBytes = 0
            }
            entries.append(entry)
            heldBytes += entry.size
            next = first + UInt64(count)
            dropExpired(now: entry.sentAt)
        }
    }

    private func dropExpired(now: Double) {
        while head < entries.count - 1
            && (now - entries[head].sentAt > seconds || heldBytes > maximumBytes)
        {
            heldBytes -= entries[head].size
            entries[head].message = nil
            head += 1
        }
        if head > 64 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    /// The held messages holding any frame of `first ..< end` (all of them for
    /// `Retransmission.everythingHeld`), the oldest number held (nil when nothing is), and the next
    /// number the publisher will send.
    public func messages(first: UInt64, end: UInt64) -> (messages: [[UInt8]], oldest: UInt64?, next: UInt64) {
        // References taken under the lock, bytes copied outside it: the publisher is not held up.
        let (wanted, oldest, next) = lock.withLock { () -> ([BusMessage], UInt64?, UInt64) in
            dropExpired(now: Self.now())
            let held = entries[head...]
            let wanted =
                first == Retransmission.everythingHeld
                ? Array(held) : held.filter { $0.first < end && $0.first + UInt64($0.count) > first }
            return (wanted.compactMap(\.message), held.first?.first, self.next)
        }
        return (wanted.map(\.array), oldest, next)
    }

    /// Bytes and messages held now.
    public var held: (bytes: Int, messages: Int) { lock.withLock { (heldBytes, entries.count - head) } }
}

/// Serves a `RetransmitBuffer` on its own ROUTER socket and thread until stopped.
public final class RetransmitServer: @unchecked Sendable {
    public let endpoint: String
    public let buffer: RetransmitBuffer
    private let lock = NSLock()
    private var stopping = false
    private var servedRequests = 0, servedMessages = 0, refusedRequests = 0
    /// Each client's share (`RetransmitBudget`); used by the serving thread only.
    private var budget: RetransmitBudget
    private let finished = DispatchSemaphore(value: 0)

    /// Binds `endpoint` (a CURVE server with `curve`, its clients checked by the context's ZAP handler)
    /// and starts serving.
    public init(_ context: BusContext, endpoint: String, buffer: RetransmitBuffer, curve: CurveKeyPair? = nil)
        throws(BusError)
    {
        self.endpoint = endpoint
        self.buffer = buffer
        budget = RetransmitBudget(bufferBytes: buffer.maximumBytes, bufferSeconds: buffer.seconds)
        let socket = try BusSocket(context, .router)
        try socket.setOption(ZMQ_LINGER, 0)
        // A reply is sent whole or not at all: no silent drop at the high-water mark, and a reader
        // that went away does not hold the thread for more than a second.
        try socket.setOption(ZMQ_ROUTER_MANDATORY, 1)
        try socket.setOption(ZMQ_SNDHWM, 0)
        try socket.setOption(ZMQ_SNDTIMEO, 1000)
        try socket.limitMessages(toBytes: 4096)
        if let curve { try socket.makeCurveServer(curve) }
        try socket.bind(endpoint)
        let thread = Thread { [self] in
            self.serve(socket)
            socket.close()
            self.finished.signal()
        }
        thread.name = "resend"
        thread.start()
    }

    /// Requests answered, and messages sent again in all.
    public var served: (requests: Int, messages: Int) { lock.withLock { (servedRequests, servedMessages) } }
    /// Requests answered without their messages: the client had used up its budget.
    public var refused: Int { lock.withLock { refusedRequests } }

    private func serve(_ socket: BusSocket) {
        while !lock.withLock({ stopping }) {
            guard (try? socket.poll(timeoutMilliseconds: 100)) == true else { continue }
            guard let request = socket.receiveParts() else { return }
            guard request.count == 2,
                let numbers = Retransmission.decode(request[1], Retransmission.requestHeader, count: 3)
            else { continue }  // not a request: ignored (the reader times out)
            var (messages, oldest, next) = buffer.messages(first: numbers[1], end: numbers[2])
            // Over budget: the status alone, so the reader counts what it asked for as lost at once.
            if !budget.take(messages.reduce(0) { $0 + $1.count }, client: request[0], now: RetransmitBuffer.now()) {
                messages = []
                lock.withLock { refusedRequests += 1 }
            }
            let status = Retransmission.encode(Retransmission.statusHeader, [numbers[0], oldest ?? .max, next])
            // Counted before sending, so a reader that has its answer finds it counted.
            lock.withLock {
                servedRequests += 1
                servedMessages += messages.count
            }
            if !socket.sendParts([request[0]] + messages + [status]) {
                lock.withLock {
                    servedRequests -= 1
                    servedMessages -= messages.count
                }
            }
        }
    }

    /// Ends the thread (within about 0.1 s) and closes the socket.
    public func stop() {
        let first = lock.withLock { () -> Bool in
            defer { stopping = true }
            return !stopping
        }
        if first { finished.wait() }
    }

    deinit { stop() }
}

/// A reader's side: asks one publisher's `RetransmitServer` for a range and waits for the reply.
public final class RetransmitClient {
    public let endpoint: String
    private let socket: BusSocket
    private var nextRequest: UInt64 = 1

    /// What came back: the messages, as sent, and what the publisher held when it answered.
    public struct Reply {
        public var messages: [[UInt8]]
        /// The oldest frame number held (nil: nothing was), and the publisher's next number.
        public var oldest: UInt64?
        public var next: UInt64
    }

    public init(
        _ context: BusContext, endpoint: String, maximumMessageBytes: Int,
        curve: (serverKey: String, keys: CurveKeyPair)?
    ) throws(BusError) {
        self.endpoint = endpoint
        socket = try BusSocket(context, .dealer)
        try socket.setOption(ZMQ_LINGER, 0)
        try socket.setOption(ZMQ_RCVHWM, 0)
        try socket.limitMessages(toBytes: maximumMessageBytes)
        if let curve { try socket.makeCurveClient(serverPublicKey: curve.serverKey, keys: curve.keys) }
        try socket.connect(endpoint)
    }

    /// Frames `first ..< end` (or `Retransmission.everythingHeld`), waiting at most
    /// `timeoutMilliseconds`; nil when no answer came (no publisher serves there, or it is gone).
    public func request(first: UInt64, end: UInt64, timeoutMilliseconds: Int32) throws(BusError) -> Reply? {
        let id = nextRequest
        nextRequest += 1
        guard socket.sendParts([Retransmission.encode(Retransmission.requestHeader, [id, first, end])]) else {
            return nil
        }
        let deadline = RetransmitBuffer.now() + Double(timeoutMilliseconds) / 1000
        while true {
            let left = Int32(max(0, (deadline - RetransmitBuffer.now()) * 1000))
            guard left > 0, try socket.poll(timeoutMilliseconds: left), let parts = socket.receiveParts(),
                let last = parts.last
            else { return nil }
            // A late answer to an earlier request that timed out is dropped.
            guard let status = Retransmission.decode(last, Retransmission.statusHeader, count: 3), status[0] == id
            else { continue }
            return Reply(
                messages: Array(parts.dropLast()), oldest: status[1] == .max ? nil : status[1], next: status[2])
        }
    }

    public func close() { socket.close() }
}
