#if canImport(Glibc)
    import Glibc
#endif
import CZeroMQ
import Foundation

/// A libzmq failure, with the operation and endpoint it concerns.
public struct BusError: Error, Equatable, Sendable, CustomStringConvertible {
    public let operation: String
    public let endpoint: String?
    public let errorNumber: Int32
    public var description: String {
        "\(operation)\(endpoint.map { " \($0)" } ?? ""): \(String(cString: zmq_strerror(errorNumber)))"
    }
    static func last(_ operation: String, _ endpoint: String? = nil) -> BusError {
        BusError(operation: operation, endpoint: endpoint, errorNumber: zmq_errno())
    }
}

/// A ZeroMQ context: one per process, shared by every socket (inproc endpoints are per context).
public final class BusContext: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
    /// The context's ZAP handler, if one runs: CURVE server sockets report failed handshakes to it.
    weak var zapHandler: ZapHandler?

    public init() {
        handle = zmq_ctx_new()
    }

    /// A context whose I/O threads run only on `cpus` (none = anywhere). Takes effect because it is
    /// set before the first socket starts them.
    public convenience init(ioThreadCPUs cpus: [Int]) throws(BusError) {
        self.init()
        for cpu in cpus {
            guard zmq_ctx_set(handle, ZMQ_THREAD_AFFINITY_CPU_ADD, Int32(cpu)) == 0 else {
                throw .last("zmq_ctx_set(ZMQ_THREAD_AFFINITY_CPU_ADD, \(cpu))")
            }
        }
    }

    private let termination = NSLock()
    private var terminated = false

    /// Ends the context once its sockets are closed, after libzmq has delivered what they still queue
    /// (a closed socket's messages wait in its I/O thread for a slow reader; a process that exits
    /// first loses them). Waits at most `seconds` (a reader that is gone never takes them); false when
    /// that was not enough. The context is unusable afterwards.
    public func finishDelivery(waitingAtMostSeconds seconds: Double) -> Bool {
        let first = termination.withLock { () -> Bool in
            defer { terminated = true }
            return !terminated
        }
        guard first else { return true }
        let done = DispatchSemaphore(value: 0)
        // The address travels as an integer: the thread only hands it back to libzmq.
        let address = Int(bitPattern: handle)
        let thread = Thread {
            zmq_ctx_term(UnsafeMutableRawPointer(bitPattern: address))
            done.signal()
        }
        thread.name = "bus-term"
        thread.start()
        return done.wait(timeout: .now() + seconds) == .success
    }

    deinit { if !termination.withLock({ terminated }) { zmq_ctx_term(handle) } }

    /// libzmq's version, e.g. "4.3.4".
    public static var libraryVersion: String {
        var a: Int32 = 0, b: Int32 = 0, c: Int32 = 0
        zmq_version(&a, &b, &c)
        return "\(a).\(b).\(c)"
    }
}

/// One ZeroMQ socket. Not thread-safe: owned by exactly one stage (actor) at a time.
public final class BusSocket: @unchecked Sendable {
    public enum Kind: Int32, Sendable {
        case pair = 0, pub = 1, sub = 2, rep = 4, dealer = 5, router = 6, xpub = 9, xsub = 10
        var raw: Int32 { rawValue }
    }
    let handle: UnsafeMutableRawPointer
    public let kind: Kind
    /// Kept alive while the socket exists: zmq_ctx_term waits for every socket to close.
    let context: BusContext
    private var closed = false
    /// An empty message kept for the next receive (a socket is used from one thread): checking for
    /// a message that is not there, once per frame on some paths, then allocates nothing.
    private var spare: BusMessage?

    public init(_ context: BusContext, _ kind: Kind) throws(BusError) {
        guard let h = zmq_socket(context.handle, kind.raw) else { throw .last("zmq_socket") }
        handle = h
        self.kind = kind
        self.context = context
        try setOption(ZMQ_LINGER, 2000)  // a closing publisher gets 2 s to deliver its tail
    }

    deinit { close() }

    public func close() {
        guard !closed else { return }
        closed = true
        zmq_close(handle)
    }

    /// The integer socket options callers outside this module set, by name.
    public enum Option: Sendable {
        /// Messages queued per peer for sending / receiving before back-pressure or drops.
        case sendHighWaterMark, receiveHighWaterMark
        /// XPUB: block (back-pressure) instead of dropping when a subscriber's queue is full.
        case publisherNoDrop
        /// Keep only the newest message in the queue (one frame per message).
        case conflate

        var raw: Int32 {
            switch self {
            case .sendHighWaterMark: ZMQ_SNDHWM
            case .receiveHighWaterMark: ZMQ_RCVHWM
            case .publisherNoDrop: ZMQ_XPUB_NODROP
            case .conflate: ZMQ_CONFLATE
            }
        }
    }

    public func set(_ option: Option, _ value: Int32) throws(BusError) { try setOption(option.raw, value) }

    /// How long closing waits for queued messages to be delivered, milliseconds.
    public func setOption(lingerMilliseconds: Int32) throws(BusError) { try setOption(ZMQ_LINGER, lingerMilliseconds) }

    public func setOption(_ option: Int32, _ value: Int32) throws(BusError) {
        var v = value
        guard zmq_setsockopt(handle, option, &v, MemoryLayout<Int32>.size) == 0 else {
            throw .last("zmq_setsockopt(\(option))")
        }
    }

    /// An int64 option (ZMQ_MAXMSGSIZE).
    public func setOption(_ option: Int32, int64 value: Int64) throws(BusError) {
        var v = value
        guard zmq_setsockopt(handle, option, &v, MemoryLayout<Int64>.size) == 0 else {
            throw .last("zmq_setsockopt(\(option))")
        }
    }

    /// Largest message this socket accepts; libzmq drops the connection of a peer that sends a larger
    /// one (it reconnects), so a runaway or hostile sender cannot make the receiver allocate without bound.
    public func limitMessages(toBytes bytes: Int) throws(BusError) {
        try setOption(ZMQ_MAXMSGSIZE, int64: Int64(bytes))
    }

    public func setOption(_ option: Int32, bytes: [UInt8]) throws(BusError) {
        let rc = bytes.withUnsafeBytes { zmq_setsockopt(handle, option, $0.baseAddress, $0.count) }
        guard rc == 0 else { throw .last("zmq_setsockopt(\(option))") }
    }

    public func bind(_ endpoint: String) throws(BusError) {
        guard zmq_bind(handle, endpoint) == 0 else { throw .last("bind", endpoint) }
    }

    public func connect(_ endpoint: String) throws(BusError) {
        guard zmq_connect(handle, endpoint) == 0 else { throw .last("connect", endpoint) }
    }

    /// The endpoint actually bound (resolves tcp://127.0.0.1:* to its port).
    public var lastEndpoint: String {
        var buffer = [CChar](repeating: 0, count: 256)
        var size = buffer.count
        zmq_getsockopt(handle, ZMQ_LAST_ENDPOINT, &buffer, &size)
        return text(ofNullTerminated: buffer)
    }

    /// Subscribes a SUB socket to a topic prefix ([] = everything).
    public func subscribe(_ prefix: [UInt8]) throws(BusError) { try setOption(ZMQ_SUBSCRIBE, bytes: prefix) }

    /// Sends one frame. Returns false when it would block (HWM reached on a non-dropping XPUB and
    /// `blocking` is false); throws for real errors.
    @discardableResult
    public func send(_ bytes: [UInt8], blocking: Bool = true) throws(BusError) -> Bool {
        while true {
            let rc = bytes.withUnsafeBytes { zmq_send(handle, $0.baseAddress, $0.count, blocking ? 0 : ZMQ_DONTWAIT) }
            if rc >= 0 { return true }
            let e = zmq_errno()
            if e == EAGAIN { return false }
            if e == EINTR { continue }
            throw BusError(operation: "zmq_send", endpoint: nil, errorNumber: e)
        }
    }

    /// Sends a message built in libzmq's own buffer (no copy). Returns false when it would block;
    /// the message is then still unsent and may be offered again.
    @discardableResult
    public func send(_ message: BusMessage, blocking: Bool = true) throws(BusError) -> Bool {
        precondition(!message.sent, "an outgoing message is sent once")
        while true {
            if zmq_msg_send(message.message, handle, blocking ? 0 : ZMQ_DONTWAIT) >= 0 {
                message.sent = true
                return true
            }
            let e = zmq_errno()
            if e == EAGAIN { return false }
            if e == EINTR { continue }
            throw BusError(operation: "zmq_msg_send", endpoint: nil, errorNumber: e)
        }
    }

    /// True when a message can be received within `timeoutMilliseconds`.
    public func poll(timeoutMilliseconds: Int32) throws(BusError) -> Bool {
        var item = zmq_pollitem_t(socket: handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)
        let n = zmq_poll(&item, 1, Int(timeoutMilliseconds))
        if n < 0 {
            if zmq_errno() == EINTR { return false }
            throw .last("zmq_poll")
        }
        return n > 0
    }

    /// Receives one message without copying it, waiting at most `timeoutMilliseconds` (-1 = forever);
    /// nil on timeout or interruption.
    public func receiveMessage(timeoutMilliseconds: Int32) throws(BusError) -> BusMessage? {
        // First without waiting: a message already queued costs no system call (zmq_poll always
        // makes one, even with a zero timeout: a poll per message and per subscription check).
        if let ready = try receive(flags: ZMQ_DONTWAIT) { return ready }
        if timeoutMilliseconds == 0 { return nil }
        if timeoutMilliseconds > 0 {
            var item = zmq_pollitem_t(socket: handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)
            let n = zmq_poll(&item, 1, Int(timeoutMilliseconds))
            if n < 0 {
                if zmq_errno() == EINTR { return nil }
                throw .last("zmq_poll")
            }
            if n == 0 { return nil }
            return try receive(flags: ZMQ_DONTWAIT)
        }
        return try receive(flags: 0)
    }

    /// One zmq_msg_recv into the spare message (or a new one); nil when nothing came (EAGAIN, EINTR).
    private func receive(flags: Int32) throws(BusError) -> BusMessage? {
        let received = spare ?? BusMessage()
        spare = nil
        if zmq_msg_recv(received.message, handle, flags) < 0 {
            spare = received  // still empty: a failed receive leaves the message as it was
            let e = zmq_errno()
            if e == EAGAIN || e == EINTR { return nil }
            throw BusError(operation: "zmq_msg_recv", endpoint: nil, errorNumber: e)
        }
        return received
    }

    /// Receives one frame, waiting at most `timeoutMilliseconds` (-1 = forever); nil on timeout or
    /// interruption.
    public func receive(timeoutMilliseconds: Int32) throws(BusError) -> [UInt8]? {
        try receiveMessage(timeoutMilliseconds: timeoutMilliseconds)?.array
    }

    /// Sends a multipart message (blocking, up to the socket's ZMQ_SNDTIMEO). False when a part could
    /// not be sent (no route to the peer, a timeout, a closing context): the rest is not sent.
    @discardableResult
    public func sendParts(_ parts: [[UInt8]]) -> Bool {
        for (i, part) in parts.enumerated() {
            let flags = i < parts.count - 1 ? ZMQ_SNDMORE : 0
            while part.withUnsafeBytes({ zmq_send(handle, $0.baseAddress, $0.count, flags) }) < 0 {
                if zmq_errno() != EINTR { return false }
            }
        }
        return true
    }

    /// Every part of the next multipart message (blocking); nil when the context terminates or the
    /// receive fails.
    public func receiveParts() -> [[UInt8]]? {
        var parts: [[UInt8]] = []
        var message = zmq_msg_t()
        while true {
            zmq_msg_init(&message)
            if zmq_msg_recv(&message, handle, 0) < 0 {
                zmq_msg_close(&message)
                if zmq_errno() == EINTR { continue }
                return nil
            }
            parts.append(Array(UnsafeRawBufferPointer(start: zmq_msg_data(&message), count: zmq_msg_size(&message))))
            let more = zmq_msg_more(&message) == 1
            zmq_msg_close(&message)
            if !more { return parts }
        }
    }
}

/// One bus message in libzmq's own buffer: built in place for sending (no copy), or received and
/// passed on as it is (no copy either; inproc receivers even get the same buffer).
public final class BusMessage {
    let message = UnsafeMutablePointer<zmq_msg_t>.allocate(capacity: 1)
    fileprivate(set) var sent = false

    /// An empty message of `size` bytes, to fill through `bytes` before sending.
    public init(size: Int) throws(BusError) {
        guard zmq_msg_init_size(message, size) == 0 else {
            message.deallocate()
            throw .last("zmq_msg_init_size")
        }
    }

    fileprivate init() { zmq_msg_init(message) }

    /// A message holding a copy of `content` (one received some other way, to read like any other).
    public convenience init(copying content: [UInt8]) throws(BusError) {
        try self.init(size: content.count)
        if !content.isEmpty {
            content.withUnsafeBytes { bytes.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
    }

    /// Makes this a new empty message of `size` bytes to fill and send, whatever it held (a sent
    /// message is empty already): one object for a stream of outgoing messages, not one per message.
    public func reuse(size: Int) throws(BusError) {
        zmq_msg_close(message)
        guard zmq_msg_init_size(message, size) == 0 else {
            zmq_msg_init(message)
            throw .last("zmq_msg_init_size")
        }
        sent = false
    }

    deinit {
        zmq_msg_close(message)
        message.deallocate()
    }

    /// The content. Write to it only when `isShared` is false.
    public var bytes: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: zmq_msg_data(message), count: zmq_msg_size(message))
    }

    /// True when the content may be shared with other copies of the message (one publisher sending
    /// to several readers in this process, or libzmq's zero-copy receive of large messages):
    /// changing it in place would change theirs.
    public var isShared: Bool { zmq_msg_get(message, ZMQ_SHARED) == 1 }

    /// A copy that owns its content alone (to change it when `isShared`).
    public func unsharedCopy() throws(BusError) -> BusMessage {
        let copy = try BusMessage(size: bytes.count)
        if bytes.count > 0 { copy.bytes.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
        return copy
    }

    /// Another message with the same content, shared by reference count (libzmq's zmq_msg_copy: no
    /// bytes copied beyond its small-message size), for keeping what is about to be sent.
    public func sharedCopy() throws(BusError) -> BusMessage {
        let copy = BusMessage()
        guard zmq_msg_copy(copy.message, message) == 0 else { throw .last("zmq_msg_copy") }
        return copy
    }

    /// A copy of the content as an array.
    public var array: [UInt8] { Array(UnsafeRawBufferPointer(bytes)) }

    /// Who sent a received message, for logs: the peer's address (tcp: its IP; ipc: user, group and
    /// process) and, under CURVE, the key the ZAP handler admitted; "" when libzmq names neither.
    public var peerDescription: String {
        let address = zmq_msg_gets(message, "Peer-Address").map { String(cString: $0) } ?? ""
        let user = zmq_msg_gets(message, "User-Id").map { String(cString: $0) } ?? ""
        return [address, user.isEmpty ? "" : "key \(user)"].filter { !$0.isEmpty }.joined(separator: ", ")
    }
}

/// Waits on several sockets at once.
public enum BusPoller {
    /// Indices of the sockets with a frame ready, waiting at most `timeoutMilliseconds`.
    public static func readable(_ sockets: [BusSocket], timeoutMilliseconds: Int32) throws(BusError) -> [Int] {
        var items = sockets.map { zmq_pollitem_t(socket: $0.handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0) }
        let n = zmq_poll(&items, Int32(items.count), Int(timeoutMilliseconds))
        if n < 0 {
            if zmq_errno() == EINTR { return [] }
            throw .last("zmq_poll")
        }
        return items.indices.filter { items[$0].revents & Int16(ZMQ_POLLIN) != 0 }
    }
}

/// ZeroMQ endpoint addresses as this project accepts them.
public enum BusEndpoint {
    /// The transports an endpoint may name.
    public static let transports = ["tcp://", "ipc://", "inproc://"]

    /// Why `text` is not an endpoint (nil when it is one), with a hint for a bare host:port.
    public static func problem(_ text: String) -> String? {
        guard !transports.contains(where: text.hasPrefix) else { return nil }
        let hint = text.contains(":") && !text.contains("://") ? " (did you mean 'tcp://\(text)'?)" : ""
        return "'\(text)' is not an endpoint: it needs a transport, tcp://, ipc:// or inproc://\(hint)"
    }
}
