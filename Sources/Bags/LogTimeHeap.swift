/// Messages by (log time, position in the file): a binary min-heap, so equal log times leave in the
/// order the file stores them.
struct LogTimeHeap {
    private var items: [(key: UInt64, sequence: (UInt64, Int), message: BagMessage)] = []

    var isEmpty: Bool { items.isEmpty }
    var minimumLogTime: UInt64? { items.first?.key }

    private func less(_ a: Int, _ b: Int) -> Bool {
        (items[a].key, items[a].sequence.0, items[a].sequence.1) < (
            items[b].key, items[b].sequence.0, items[b].sequence.1
        )
    }

    /// `filePosition`: the chunk's offset and the message's place in it.
    mutating func insert(_ m: BagMessage, filePosition: (UInt64, Int)) {
        items.append((m.logTime, filePosition, m))
        var i = items.count - 1
        while i > 0, less(i, (i - 1) / 2) {
            items.swapAt(i, (i - 1) / 2)
            i = (i - 1) / 2
        }
    }

    mutating func popMinimum() -> BagMessage? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast().message
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < items.count, less(l, m) { m = l }
            if r < items.count, less(r, m) { m = r }
            if m == i { break }
            items.swapAt(i, m)
            i = m
        }
        return top
    }
}
