#if canImport(Glibc)
    import Glibc
#endif
import CZeroMQ

/// An XPUB socket bound to `endpoint` that applies back-pressure instead of dropping (XPUB no-drop)
/// and reports every subscription and unsubscription, so its readers can be counted (`ReaderCount`).
extension BusSocket {
    /// With `curve`, a CURVE server: only clients the context's ZAP handler admits connect.
    public static func readerFollowingPublisher(
        _ context: BusContext, endpoint: String, highWaterMark: Int32, curve: CurveKeyPair? = nil
    ) throws(BusError) -> BusSocket {
        let s = try BusSocket(context, .xpub)
        try s.setOption(ZMQ_SNDHWM, highWaterMark)
        try s.setOption(ZMQ_XPUB_NODROP, 1)  // back-pressure instead of silent drops
        try s.setOption(ZMQ_XPUB_VERBOSE, 1)  // see every subscription
        try s.setOption(ZMQ_XPUB_VERBOSER, 1)  // and every unsubscription (a reader gone)
        if let curve { try s.makeCurveServer(curve) }  // before bind: applies to every connection
        try s.bind(endpoint)
        return s
    }
}

extension BusSocket {
    /// On a `readerFollowingPublisher`: sends `message` to every subscriber whose queue has room,
    /// never blocking. Returns false when a subscriber's queue was full: libzmq then drops this
    /// message for it and stops sending to it at all until it has read its queue down (it leaves the
    /// set a no-drop XPUB checks), so what that subscriber misses meanwhile goes uncounted and later
    /// sends return true. False therefore marks the start of one episode of falling behind, not one
    /// missed message; libzmq does not say which subscriber it was. (A no-drop XPUB refuses a message
    /// when any matching queue is full, so the message goes out once more with dropping allowed, for
    /// this send only.)
    public func sendSkippingFullReaders(_ message: BusMessage) throws(BusError) -> Bool {
        if try send(message, blocking: false) { return true }
        try setOption(ZMQ_XPUB_NODROP, 0)
        defer { try? setOption(ZMQ_XPUB_NODROP, 1) }
        _ = try send(message, blocking: false)
        return false
    }
}

/// The readers of a `readerFollowingPublisher` socket: +1 per subscription message, -1 per
/// unsubscription (including a reader's subscriptions when its connection ends), and the prefixes
/// they subscribe to, so a sender can tell whom a message would reach before it writes it.
public struct ReaderCount: Sendable {
    public private(set) var value = 0
    /// Each prefix subscribed to, with how many subscriptions name it (XPUB verbose passes every
    /// one, so a prefix two readers share counts twice). Indices change when subscriptions do.
    public private(set) var prefixes: [(bytes: [UInt8], count: Int)] = []

    /// The subscriptions a message starting with `bytes` reaches (XPUB matches prefixes of the whole
    /// message): how many, and which prefix when exactly one does.
    public func subscriptions(matching bytes: UnsafeRawBufferPointer) -> (count: Int, sole: Int?) {
        var count = 0
        var sole: Int?
        for i in prefixes.indices {
            let p = prefixes[i].bytes
            guard p.count <= bytes.count else { continue }
            let matches = p.isEmpty || p.withUnsafeBytes { memcmp($0.baseAddress!, bytes.baseAddress!, p.count) == 0 }
            if matches {
                count += prefixes[i].count
                sole = i
            }
        }
        return (count, count == 1 ? sole : nil)
    }

    /// Records a subscription, or an unsubscription of a prefix someone subscribed to; false for an
    /// unsubscription nobody's subscription matches (it changes nothing).
    @discardableResult
    mutating func note(_ prefix: ArraySlice<UInt8>, subscribed: Bool) -> Bool {
        if let i = prefixes.firstIndex(where: { $0.bytes[...] == prefix }) {
            prefixes[i].count += subscribed ? 1 : -1
            if prefixes[i].count <= 0 { prefixes.remove(at: i) }
            return true
        }
        guard subscribed else { return false }
        prefixes.append((Array(prefix), 1))
        return true
    }

    /// Counts one message an XPUB socket received: 1 + prefix subscribes, 0 + prefix unsubscribes.
    /// An unsubscription for a prefix never subscribed (a stray or hostile peer: 13 bytes of ZMTP/1.0
    /// can send one) is ignored, so it cannot make a publisher believe its readers left.
    mutating func count(_ message: [UInt8]) {
        if message.first == 1 {
            value += 1
            note(message.dropFirst(), subscribed: true)
        } else if message.first == 0, note(message.dropFirst(), subscribed: false) {
            value = max(0, value - 1)
        }
    }

    public init() {}

    /// Counts the (un)subscription messages that arrived, waiting at most `timeoutMilliseconds` for
    /// the first; true when one arrived.
    @discardableResult
    public mutating func read(_ socket: BusSocket, timeoutMilliseconds: Int32) throws(BusError) -> Bool {
        var any = false
        var timeout = timeoutMilliseconds
        while let message = try socket.receive(timeoutMilliseconds: timeout) {
            count(message)
            any = true
            timeout = 0
        }
        return any
    }

    /// Waits until `wanted` readers are connected or `stopRequested` says to give up, polling every
    /// 0.5 s; `waiting` is told how many are missing every `logEveryPolls` quiet polls.
    public mutating func wait(
        _ socket: BusSocket, for wanted: Int, logEveryPolls: Int, stopRequested: () -> Bool, _ waiting: (Int) -> Void
    ) throws(BusError) {
        var quiet = 0
        while value < wanted && !stopRequested() {
            if try !read(socket, timeoutMilliseconds: 500) {
                quiet += 1
                if quiet % logEveryPolls == 0 { waiting(wanted - value) }
            }
        }
    }
}
