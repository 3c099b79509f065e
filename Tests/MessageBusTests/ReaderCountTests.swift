import Testing
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

    @Test("a connection over the cap is refused and counted; others are not affected")
    func capPerConnection() {
        var readers = ReaderCount(subscriptionsPerConnection: 3)
        let verdicts = (0..<5).map { readers.count([1, UInt8($0)], from: a, peer: "127.0.0.1") }
        #expect(verdicts == [.subscribe, .subscribe, .subscribe, .nothing, .nothing])
        #expect(readers.count([1, 9], from: b) == .subscribe)
        #expect(readers.value == 4)
        #expect(readers.refused == 2 && readers.connectionsAtCap == 1)
        let notices = readers.takeNotices()
        #expect(notices.count == 1 && notices[0].contains("127.0.0.1") && notices[0].contains("3 subscriptions"))
        #expect(readers.takeNotices().isEmpty)
        // One given up makes room for another.
        #expect(readers.count([0, 0], from: a) == .unsubscribe)
        #expect(readers.count([1, 7], from: a) == .subscribe)
        #expect(readers.refusalSummary.hasPrefix("2 subscription(s) refused from 1 connection(s)"))
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
    @Test("a tcp peer with 300 subscriptions gets 256 applied: nothing reaches it for the others")
    func capOverTCP() throws {
        let context = BusContext()
        let publisher = try BusSocket.readerFollowingPublisher(
            context, endpoint: "tcp://127.0.0.1:*", highWaterMark: 1000)
        let subscriber = try BusSocket(context, .sub)
        try subscriber.connect(publisher.lastEndpoint)
        let topics = (0..<300).map { Array("t/\(1000 + $0)/".utf8) }
        for t in topics { try subscriber.subscribe(t) }
        var readers = ReaderCount()
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        while readers.value + readers.refused < 300, clock.now < deadline {
            try readers.read(publisher, timeoutMilliseconds: 100)
        }
        #expect(readers.value == 256)
        #expect(readers.refused == 44)
        #expect(readers.takeNotices().first?.contains("127.0.0.1") == true)
        try publisher.send(try BusMessage(copying: topics[299] + [1]), blocking: true)  // refused: not delivered
        try publisher.send(try BusMessage(copying: topics[0] + [2]), blocking: true)
        let first = try subscriber.receive(timeoutMilliseconds: 2000)
        #expect(first == topics[0] + [2])
        subscriber.close()
        let gone = clock.now + .seconds(10)
        while readers.value > 0, clock.now < gone {
            try readers.read(publisher, timeoutMilliseconds: 100)
        }
        #expect(readers.value == 0)
        publisher.close()
    }
}
