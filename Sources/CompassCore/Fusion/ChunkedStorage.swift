/// An append-only array in fixed chunks of 65,536 elements: growing never copies what is stored, so a
/// long recording needs its size in memory and not twice it while an array doubles (the smoother's
/// peak for an hour at 285 Hz fell by about a quarter).
struct ChunkedStorage<Element>: Sendable where Element: Sendable {
    static var chunkShift: Int { 16 }
    static var chunkMask: Int { (1 << chunkShift) - 1 }
    var chunks: [[Element]] = []
    private(set) var count = 0

    init() {}

    var isEmpty: Bool { count == 0 }
    var indices: Range<Int> { 0..<count }
    var last: Element? { count > 0 ? self[count - 1] : nil }

    mutating func append(_ element: Element) {
        let chunk = count >> Self.chunkShift
        if chunk == chunks.count {
            chunks.append([])
            chunks[chunk].reserveCapacity(1 << Self.chunkShift)
        }
        chunks[chunk].append(element)
        count += 1
    }

    /// Empties the storage but keeps its chunks' memory for what is appended next: refilling then
    /// touches no fresh pages (the smoother's second pass refills the first one's storage).
    mutating func removeAllKeepingCapacity() {
        for i in chunks.indices { chunks[i].removeAll(keepingCapacity: true) }
        count = 0
    }

    subscript(i: Int) -> Element {
        get { chunks[i >> Self.chunkShift][i & Self.chunkMask] }
        set { chunks[i >> Self.chunkShift][i & Self.chunkMask] = newValue }
    }
}
