import Foundation
import CZeroMQ

/// The ZeroMQ authentication protocol (ZAP, RFC 27) handler of one context: every CURVE handshake on
/// a server socket of the context asks it, and it admits the client public keys of its allow-list
/// only. Clients libzmq refuses before ZAP is asked (plaintext, or one holding a wrong server key)
/// are seen through a socket monitor on each server socket. Rejections are counted and logged at a
/// bounded rate (the first three, then at most one line per 10 s with the count since).
public final class ZapHandler: @unchecked Sendable {
    let allowed: Set<String>
    let log: @Sendable (String) -> Void
    private let lock = NSLock()
    private var rejectedTotal = 0, admittedTotal = 0
    private var rejectedSinceLog = 0, lastLog = 0.0
    private var stopping = false
    private let finished = DispatchSemaphore(value: 0)
    private let context: BusContext
    /// One per watched server socket; signalled when its monitor thread ends.
    private var watchers: [DispatchSemaphore] = []

    public var rejected: Int { lock.withLock { rejectedTotal } }
    public var admitted: Int { lock.withLock { admittedTotal } }

    /// Starts the handler on `context` (one per context: libzmq asks inproc://zeromq.zap.01).
    public init(context: BusContext, allowedClientKeys: Set<String>, log: @escaping @Sendable (String) -> Void)
        throws(BusError)
    {
        allowed = allowedClientKeys
        self.log = log
        self.context = context
        let socket = try BusSocket(context, .rep)
        try socket.setOption(ZMQ_LINGER, 0)
        try socket.bind("inproc://zeromq.zap.01")
        let thread = Thread { [self] in
            self.serve(socket)
            self.finished.signal()
        }
        thread.name = "zap"
        thread.start()
        context.zapHandler = self
    }

    /// Counts the failed handshakes of a CURVE server socket (ZAP refusals excepted: those are
    /// counted where they are decided). Call while the socket is being set up.
    func watchHandshakes(of server: BusSocket) throws(BusError) {
        let endpoint = "inproc://gyrocompass-handshakes-\(UUID().uuidString)"
        let events = ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
        guard zmq_socket_monitor(server.handle, endpoint, events) == 0 else { throw .last("zmq_socket_monitor") }
        let monitor = try BusSocket(context, .pair)
        try monitor.setOption(ZMQ_LINGER, 0)
        try monitor.connect(endpoint)
        let done = DispatchSemaphore(value: 0)
        lock.withLock { watchers.append(done) }
        let thread = Thread { [self] in
            self.watch(monitor)
            monitor.close()
            done.signal()
        }
        thread.name = "zap-monitor"
        thread.start()
    }

    /// Reads monitor events (a 6-byte event frame, then the peer's address) until stopped.
    private func watch(_ monitor: BusSocket) {
        while !lock.withLock({ stopping }) {
            guard (try? monitor.poll(timeoutMilliseconds: 200)) == true else { continue }
            guard let event = monitor.receiveParts(), event.count >= 2, event[0].count >= 6 else { return }
            // libzmq reports a plaintext peer as a protocol error or without detail, depending on
            // when the connection broke; such a client retries, and every attempt is counted.
            note(
                ok: false, key: "no completed CURVE handshake (a plaintext client, or a wrong server key)",
                address: String(decoding: event[1], as: UTF8.self))
        }
    }

    /// Ends the handler and waits for its thread (at most about 0.2 s): its socket is closed, so the
    /// context can terminate, and its sockets' queued messages are delivered (linger) before exit.
    public func stop() {
        let first = lock.withLock { () -> Bool in
            defer { stopping = true }
            return !stopping
        }
        if first {
            finished.wait()
            for w in lock.withLock({ watchers }) { w.wait() }
        }
    }

    /// Answers requests until stopped.
    private func serve(_ socket: BusSocket) {
        defer { socket.close() }
        while !lock.withLock({ stopping }) {
            guard (try? socket.poll(timeoutMilliseconds: 200)) == true else { continue }
            guard let request = socket.receiveParts() else { return }
            guard request.count >= 6 else { continue }
            let mechanism = String(decoding: request[5], as: UTF8.self)
            var key = ""
            if mechanism == "CURVE", request.count >= 7, request[6].count == 32 {
                var text = [CChar](repeating: 0, count: 41)
                _ = request[6].withUnsafeBufferPointer { zmq_z85_encode(&text, $0.baseAddress, 32) }
                key = MessageBus.text(ofNullTerminated: text)
            }
            let ok = allowed.contains(key)
            let address = String(decoding: request[3], as: UTF8.self)
            note(ok: ok, key: key.isEmpty ? "no CURVE key (\(mechanism))" : "unknown key \(key)", address: address)
            let reply: [[UInt8]] = [
                Array("1.0".utf8), request[1], Array((ok ? "200" : "400").utf8),
                Array((ok ? "OK" : "client key not allowed").utf8), [], [],
            ]
            if !socket.sendParts(reply) { return }
        }
    }

    private func note(ok: Bool, key: String, address: String) {
        lock.lock()
        defer { lock.unlock() }
        if ok {
            admittedTotal += 1
            return
        }
        rejectedTotal += 1
        rejectedSinceLog += 1
        let now = ProcessInfo.processInfo.systemUptime
        if rejectedTotal <= 3 || now - lastLog >= 10 {
            log(
                "refused a client from \(address.isEmpty ? "a local peer" : address): \(key)"
                    + (rejectedSinceLog > 1
                        ? " (\(rejectedSinceLog) refused since the last line, \(rejectedTotal) in all)" : ""))
            rejectedSinceLog = 0
            lastLog = now
        }
    }
}
