import Testing
import CZeroMQ
@testable import MessageBus

@Suite("Reader count bookkeeping")
struct ReaderCountBookkeepingTests {
    @Test("an unsubscription nobody subscribed cannot make readers leave")
    func strayUnsubscribe() {
        var readers = ReaderCount()
        readers.count([1] + Array("heading\0".utf8))
        readers.count([1] + Array("imu/data\0".utf8))
        #expect(readers.value == 2)
        readers.count([0] + Array("abcdefghi".utf8))  // never subscribed: a stray or hostile peer
        readers.count([0])  // the empty prefix, never subscribed either
        #expect(readers.value == 2)
        readers.count([0] + Array("heading\0".utf8))  // a real reader leaves
        #expect(readers.value == 1)
        readers.count([0] + Array("heading\0".utf8))  // the same again: nobody left to leave
        #expect(readers.value == 1)
        #expect(readers.prefixes.map(\.bytes) == [Array("imu/data\0".utf8)])
    }

    @Test("two readers of one prefix are two, and leave one at a time")
    func sharedPrefix() {
        var readers = ReaderCount()
        readers.count([1])
        readers.count([1])
        #expect(readers.value == 2)
        readers.count([0])
        #expect(readers.value == 1)
        readers.count([0])
        readers.count([0])
        #expect(readers.value == 0)
    }
}

/// Which test connections have closed.
private final class ClosedConnections: @unchecked Sendable {
    var descriptors: Set<Int32> = []
}

@Suite("Subscriptions per connection")
struct SubscriptionsPerConnectionTests {
    let a = BusConnection(descriptor: 20, inode: 1001)
    let b = BusConnection(descriptor: 21, inode: 1002)

    @Test("a connection subscribing to a prefix it holds is one reader, gone with one unsubscription")
    func repeatedSubscription() {
        var readers = ReaderCount()
        #expect(readers.count([1] + Array("heading".utf8), from: a) == .subscribe)
        #expect(readers.count([1] + Array("heading".utf8), from: a) == .nothing)
        #expect(readers.value == 1)
        #expect(readers.count([0] + Array("heading".utf8), from: b) == .nothing)  // b never held it
        #expect(readers.value == 1)
        #expect(readers.count([0] + Array("heading".utf8), from: a) == .unsubscribe)
        #expect(readers.value == 0)
    }

    @Test("a connection over the cap is refused, to be cut, and counted; others are not affected")
    func capPerConnection() {
        var readers = ReaderCount(subscriptionsPerConnection: 3)
        let verdicts = (0..<5).map { readers.count([1, UInt8($0)], from: a, peer: "127.0.0.1") }
        #expect(verdicts == [.subscribe, .subscribe, .subscribe, .disconnect, .nothing])
        #expect(readers.count([1, 9], from: b) == .subscribe)
        #expect(readers.value == 4)
        #expect(readers.refused == 2 && readers.connectionsAtCap == 1)
        let notices = readers.takeNotices()
        #expect(notices.count == 1 && notices[0].contains("127.0.0.1") && notices[0].contains("more than 3"))
        #expect(readers.takeNotices().isEmpty)
        #expect(readers.refusalSummary.hasPrefix("2 subscription(s) refused and 1 connection(s) cut"))
        // Cut SUB sockets reconnect and ask again: the log names the first three, then the 10th, 100th...
        for d in Int32(30)..<Int32(130) {
            for p in UInt8(0)..<4 { readers.count([1, p], from: BusConnection(descriptor: d, inode: UInt64(d))) }
        }
        #expect(readers.takeNotices().count == 4)  // connections 2, 3, 10 and 100
    }

    @Test("a connection that ends takes its readers along; its unsubscriptions leave inproc readers alone")
    func endedConnection() {
        let closed = ClosedConnections()
        var readers = ReaderCount(subscriptionsPerConnection: 2) { !closed.descriptors.contains($0.descriptor) }
        readers.count([1] + Array("heading".utf8))  // an inproc reader: no connection named
        readers.count([1] + Array("heading".utf8), from: a)
        readers.count([1] + Array("imu".utf8), from: a)
        readers.count([1] + Array("refused".utf8), from: a)
        #expect(readers.value == 3 && readers.refused == 1)
        closed.descriptors.insert(a.descriptor)
        // libzmq's own unsubscriptions for the ended connection carry no source, one per prefix it asked for.
        readers.count([0] + Array("heading".utf8))
        #expect(readers.value == 1)
        readers.count([0] + Array("refused".utf8))
        readers.count([0] + Array("imu".utf8))
        #expect(readers.value == 1)
        #expect(readers.prefixes.map(\.bytes) == [Array("heading".utf8)])
        readers.count([0] + Array("heading".utf8))  // now the inproc reader leaves
        #expect(readers.value == 0)
    }
}

@Suite("Subscriptions per connection over libzmq", .serialized)
struct SubscriptionCapOverZeroMQTests {
    @Test("a tcp peer asking for 300 subscriptions is cut off; another peer keeps receiving")
    func capOverTCP() throws {
        let context = BusContext()
        let publisher = try BusSocket.readerFollowingPublisher(
            context, endpoint: "tcp://127.0.0.1:*", highWaterMark: 1000)
        let greedy = try BusSocket(context, .sub)
        try greedy.setOption(ZMQ_RECONNECT_IVL, -1)  // once cut, it stays away
        try greedy.connect(publisher.lastEndpoint)
        let topics = (0..<300).map { Array("t/\(1000 + $0)/".utf8) }
        for t in topics { try greedy.subscribe(t) }
        let modest = try BusSocket(context, .sub)
        try modest.connect(publisher.lastEndpoint)
        try modest.subscribe(Array("heading".utf8))
        var readers = ReaderCount()
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        // The greedy connection's 256 come and go with it; the modest one's stays.
        while readers.connectionsAtCap < 1 || readers.value != 1, clock.now < deadline {
            try readers.read(publisher, timeoutMilliseconds: 100)
        }
        // The 257th is refused; of the rest, those that came before the cut are counted too.
        #expect((1...44).contains(readers.refused) && readers.connectionsAtCap == 1)
        #expect(readers.value == 1 && readers.prefixes.map(\.bytes) == [Array("heading".utf8)])
        #expect(readers.takeNotices().first?.contains("127.0.0.1") == true)
        try publisher.send(try BusMessage(copying: topics[0] + [1]), blocking: true)
        try publisher.send(try BusMessage(copying: Array("heading".utf8) + [2]), blocking: true)
        #expect(try modest.receive(timeoutMilliseconds: 2000) == Array("heading".utf8) + [2])
        #expect(try greedy.receive(timeoutMilliseconds: 200) == nil)
        greedy.close()
        modest.close()
        publisher.close()
    }
}
