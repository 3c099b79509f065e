#if canImport(Glibc)
    import Glibc
#endif
import CZeroMQ

/// An XPUB socket bound to `endpoint` that applies back-pressure instead of dropping (XPUB no-drop)
/// and passes every subscription and unsubscription to `ReaderCount.read`, which counts the readers.
/// It is not a manual XPUB: libzmq 4.3.4 keeps the pipe of a queued subscription after that pipe has
/// ended, and applying the subscription then (ZMQ_SUBSCRIBE) would use the freed pipe (fixed upstream
/// in 2df7ab6a, after 4.3.4); so libzmq applies subscriptions itself and `ReaderCount` cuts a
/// connection that asks for too many.
extension BusSocket {
    /// Largest message a publisher accepts from its readers, bytes: a subscription is one byte and a
    /// topic prefix, and no topic comes near this. A larger one (a 10 MB "prefix") would otherwise be
    /// stored by libzmq for as long as the connection lasts.
    public static let maximumSubscriptionBytes = 4096

    /// With `curve`, a CURVE server: only clients the context's ZAP handler admits connect.
    public static func readerFollowingPublisher(
        _ context: BusContext, endpoint: String, highWaterMark: Int32, curve: CurveKeyPair? = nil
    ) throws(BusError) -> BusSocket {
        let s = try BusSocket(context, .xpub)
        try s.setOption(ZMQ_SNDHWM, highWaterMark)
        // What comes in is subscriptions: a peer that sends a larger message is disconnected by libzmq
        // before it is stored.
        try s.limitMessages(toBytes: maximumSubscriptionBytes)
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

/// One peer's connection to a socket, as libzmq names it on the messages that came over it
/// (ZMQ_SRCFD): the descriptor, with the socket's inode, since a closed descriptor's number is reused.
public struct BusConnection: Hashable, Sendable {
    public let descriptor: Int32
    public let inode: UInt64

    public init(descriptor: Int32, inode: UInt64) {
        self.descriptor = descriptor
        self.inode = inode
    }

    /// The connection `message` came over; nil for an inproc peer and for a message libzmq made itself
    /// (the unsubscriptions it passes on when a connection ends carry no source).
    init?(of message: BusMessage) {
        let descriptor = zmq_msg_get(message.message, ZMQ_SRCFD)
        guard descriptor >= 0, let inode = Self.inode(of: descriptor) else { return nil }
        self.init(descriptor: descriptor, inode: inode)
    }

    /// Whether the descriptor still refers to this connection's socket.
    public var isOpen: Bool { Self.inode(of: descriptor) == inode }

    /// The inode of what `descriptor` refers to; nil when it is not open.
    private static func inode(of descriptor: Int32) -> UInt64? {
        var status = stat()
        return fstat(descriptor, &status) == 0 ? UInt64(status.st_ino) : nil
    }
}

/// The readers of a `readerFollowingPublisher` socket and the prefixes they subscribe to, so a sender
/// can tell whom a message would reach before it writes it; `value` counts subscriptions.
///
/// Each connection (tcp or ipc) holds a set of prefixes, at most `subscriptionsPerConnection`. One
/// more is refused (never counted or matched by the sender) and the connection is cut (`shutdown` of
/// the descriptor libzmq named; libzmq then closes it and forgets its subscriptions), because libzmq
/// itself records every prefix a peer asks for until the peer disconnects and offers no limit.
/// Refusals are counted and the first connections cut are named in `notices`. A connection
/// subscribing to a prefix it holds changes nothing (its SUB socket unsubscribes once), and an unsubscription of a
/// prefix a peer does not hold (a stray or hostile peer: 13 bytes of ZMTP/1.0 can send one) is
/// ignored, so nobody outside can make a publisher believe its readers left. Inproc readers (the
/// pipeline's own stages in this process) carry no source: they are counted per subscription, uncapped.
public struct ReaderCount: Sendable {
    /// A reader of every topic a pipeline has, per-magnetometer ones included, subscribes to far fewer.
    public static let defaultSubscriptionsPerConnection = 256

    public private(set) var value = 0
    /// Each prefix subscribed to, with how many subscriptions name it (a prefix two readers share
    /// counts twice). Indices change when subscriptions do.
    public private(set) var prefixes: [(bytes: [UInt8], count: Int)] = []
    public let subscriptionsPerConnection: Int
    /// Subscriptions refused because their connection held `subscriptionsPerConnection` already.
    public private(set) var refused = 0
    /// Connections that reached the cap.
    public private(set) var connectionsAtCap = 0
    /// A line for each of the first three connections cut, then for the 10th, 100th, ..., for the
    /// stage's log (a cut SUB socket reconnects and subscribes again); `takeNotices` empties it.
    public private(set) var notices: [String] = []

    private struct Held {
        var prefixes: Set<[UInt8]> = []
        var refused = 0
        var capped = false
    }
    private var held: [BusConnection: Held] = [:]
    private var inProcess: [[UInt8]: Int] = [:]
    /// Prefixes of connections found closed whose unsubscriptions (sent by libzmq, without a source)
    /// are still to come, and how many refused ones.
    private var departing: [[UInt8]: Int] = [:]
    private var departingRefused = 0
    /// An unsubscription without a source matched nothing yet: its connection's descriptor may not be
    /// closed yet, so the next `read` looks again.
    private var unresolvedDeparture = false
    /// Whether a connection is still there (a test gives its own).
    let isOpen: @Sendable (BusConnection) -> Bool

    public init(
        subscriptionsPerConnection: Int = ReaderCount.defaultSubscriptionsPerConnection,
        isOpen: @escaping @Sendable (BusConnection) -> Bool = { $0.isOpen }
    ) {
        self.subscriptionsPerConnection = subscriptionsPerConnection
        self.isOpen = isOpen
    }

    /// What one (un)subscription message did to the count: a subscription or unsubscription counted,
    /// nothing (a repeat, a stray unsubscription, one refused after the cut), or `disconnect`.
    enum Verdict: Equatable {
        case subscribe, unsubscribe, nothing
        /// Refused, and the connection is to be cut: it asked for more than its share.
        case disconnect
    }

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

    /// The connections holding subscriptions; an inproc reader, which carries no source, counts once
    /// per subscription.
    public var connections: Int { held.count + inProcess.values.reduce(0, +) }

    /// How many subscriptions name exactly `prefix`.
    public func subscriptions(to prefix: [UInt8]) -> Int {
        prefixes.first(where: { $0.bytes == prefix })?.count ?? 0
    }

    /// The summary's line for refused subscriptions.
    public var refusalSummary: String {
        "\(refused) subscription(s) refused and \(connectionsAtCap) connection(s) cut for asking for more than "
            + "\(subscriptionsPerConnection), the most one connection may"
    }

    public mutating func takeNotices() -> [String] {
        defer { notices.removeAll() }
        return notices
    }

    private mutating func add(_ prefix: [UInt8]) {
        value += 1
        if let i = prefixes.firstIndex(where: { $0.bytes == prefix }) {
            prefixes[i].count += 1
        } else {
            prefixes.append((prefix, 1))
        }
    }

    private mutating func remove(_ prefix: [UInt8]) {
        guard let i = prefixes.firstIndex(where: { $0.bytes == prefix }) else { return }
        value -= 1
        prefixes[i].count -= 1
        if prefixes[i].count <= 0 { prefixes.remove(at: i) }
    }

    /// Counts one message an XPUB socket received (1 + prefix subscribes, 0 + prefix unsubscribes)
    /// from `connection` (nil: none named), described as `peer` in notices.
    @discardableResult
    mutating func count(_ message: [UInt8], from connection: BusConnection? = nil, peer: String = "") -> Verdict {
        guard let kind = message.first, kind <= 1 else { return .nothing }
        let prefix = Array(message.dropFirst())
        guard let connection else {
            if kind == 1 {
                inProcess[prefix, default: 0] += 1
                add(prefix)
                return .subscribe
            }
            departedOrLeft(prefix)
            return .unsubscribe
        }
        var entry = held[connection] ?? Held()
        defer { held[connection] = entry.prefixes.isEmpty && entry.refused == 0 ? nil : entry }
        if kind == 0 {
            if entry.prefixes.remove(prefix) != nil {
                remove(prefix)
                return .unsubscribe
            }
            entry.refused = max(0, entry.refused - 1)
            return .nothing
        }
        if entry.prefixes.contains(prefix) { return .nothing }
        guard entry.prefixes.count < subscriptionsPerConnection else {
            entry.refused += 1
            refused += 1
            guard !entry.capped else { return .nothing }
            entry.capped = true
            connectionsAtCap += 1
            if connectionsAtCap <= 3 || isPowerOfTen(connectionsAtCap) {
                notices.append(
                    "\(peer.isEmpty ? "a peer" : peer) (connection \(connection.descriptor)) asked for more than "
                        + "\(subscriptionsPerConnection) subscriptions, the most one connection may: refused and "
                        + "disconnected (\(connectionsAtCap) connection(s) so far)")
            }
            return .disconnect
        }
        entry.prefixes.insert(prefix)
        add(prefix)
        return .subscribe
    }

    /// An unsubscription without a source: libzmq's own for a connection that ended, or an inproc
    /// reader's.
    private mutating func departedOrLeft(_ prefix: [UInt8]) {
        if takeDeparting(prefix) { return }
        sweepClosedConnections()
        if takeDeparting(prefix) { return }
        if let n = inProcess[prefix] {
            inProcess[prefix] = n > 1 ? n - 1 : nil
            remove(prefix)
        } else if departingRefused > 0 {
            departingRefused -= 1
        } else {
            unresolvedDeparture = true
        }
    }

    private func isPowerOfTen(_ n: Int) -> Bool {
        var n = n
        while n % 10 == 0 && n > 1 { n /= 10 }
        return n == 1
    }

    private mutating func takeDeparting(_ prefix: [UInt8]) -> Bool {
        guard let n = departing[prefix] else { return false }
        departing[prefix] = n > 1 ? n - 1 : nil
        return true
    }

    /// Forgets the subscriptions of every connection that has closed: its readers are gone.
    mutating func sweepClosedConnections() {
        for (connection, entry) in held where !isOpen(connection) {
            for prefix in entry.prefixes {
                departing[prefix, default: 0] += 1
                remove(prefix)
            }
            departingRefused += entry.refused
            held[connection] = nil
        }
        unresolvedDeparture = false
    }

    /// Counts the (un)subscription messages that arrived and cuts a connection over its cap, waiting at
    /// most `timeoutMilliseconds` for the first; true when one arrived.
    @discardableResult
    public mutating func read(_ socket: BusSocket, timeoutMilliseconds: Int32) throws(BusError) -> Bool {
        var any = false
        var timeout = timeoutMilliseconds
        if unresolvedDeparture { sweepClosedConnections() }
        while let message = try socket.receiveMessage(timeoutMilliseconds: timeout) {
            let bytes = message.array
            let connection = BusConnection(of: message)
            let peer = connection == nil ? "" : message.peerDescription
            switch count(bytes, from: connection, peer: peer) {
            case .subscribe, .unsubscribe, .nothing: break
            case .disconnect:
                // libzmq notices the end of the stream, closes the descriptor and drops the connection.
                if let connection, isOpen(connection) { shutdown(connection.descriptor, Int32(SHUT_RDWR)) }
            }
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
