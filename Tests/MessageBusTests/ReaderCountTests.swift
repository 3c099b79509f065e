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
