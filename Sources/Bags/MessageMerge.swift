/// One chunk's messages in log-time order, waiting to be merged with the chunks whose times overlap
/// it. A message leaves by being moved out of its slot (`take`), never copied.
struct MessageRun {
    let chunkOffset: UInt64
    private var messages: [BagMessage?]
    private var next = 0

    /// `sorted`: the messages are in log-time order already; otherwise they are sorted stably (equal
    /// log times keep their order in the chunk, as rosbag2 reads them).
    init(chunkOffset: UInt64, inLogTimeOrder given: consuming [BagMessage?], sorted: Bool) {
        self.chunkOffset = chunkOffset
        messages = given
        if !sorted {
            let order = messages.indices.sorted { (messages[$0]!.logTime, $0) < (messages[$1]!.logTime, $1) }
            var inOrder: [BagMessage?] = []
            inOrder.reserveCapacity(order.count)
            for i in order { inOrder.append(messages[i].take()) }
            messages = inOrder
        }
    }

    var headLogTime: UInt64? { next < messages.count ? messages[next]!.logTime : nil }

    mutating func takeHead() -> BagMessage {
        defer { next += 1 }
        return messages[next].take()!
    }
}

/// The runs of overlapping chunks, merged: the next message is the earliest head of any run, ties to
/// the chunk first in the file (so equal log times leave in file order). A binary heap of the runs'
/// heads: a message costs O(log runs) however many chunks overlap.
struct MessageMerge {
    private struct Head {
        var logTime: UInt64
        var chunkOffset: UInt64
        var run: Int
    }
    private var runs: [MessageRun] = []
    private var heads: [Head] = []

    var isEmpty: Bool { heads.isEmpty }

    mutating func add(_ run: MessageRun) {
        guard let t = run.headLogTime else { return }
        runs.append(run)
        push(Head(logTime: t, chunkOffset: run.chunkOffset, run: runs.count - 1))
    }

    /// Hands `body` every waiting message earlier than `limit` (all of them when nil), in order.
    mutating func deliver(before limit: UInt64?, _ body: (BagMessage) throws -> Void) throws {
        while let first = heads.first, limit.map({ first.logTime < $0 }) ?? true {
            let head = pop()
            try body(runs[head.run].takeHead())
            if let t = runs[head.run].headLogTime {
                push(Head(logTime: t, chunkOffset: head.chunkOffset, run: head.run))
            }
        }
        if heads.isEmpty { runs.removeAll(keepingCapacity: true) }
    }

    private func less(_ a: Int, _ b: Int) -> Bool {
        (heads[a].logTime, heads[a].chunkOffset) < (heads[b].logTime, heads[b].chunkOffset)
    }

    private mutating func push(_ head: Head) {
        heads.append(head)
        var i = heads.count - 1
        while i > 0, less(i, (i - 1) / 2) {
            heads.swapAt(i, (i - 1) / 2)
            i = (i - 1) / 2
        }
    }

    private mutating func pop() -> Head {
        heads.swapAt(0, heads.count - 1)
        let top = heads.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heads.count, less(l, m) { m = l }
            if r < heads.count, less(r, m) { m = r }
            if m == i { break }
            heads.swapAt(i, m)
            i = m
        }
        return top
    }
}
