// libFuzzer harness: the ZeroMQ wire frame parser (single frames, batches, numbered batches, compressed numbered
// batches, in-place views).
import MessageBus

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? WireFrame.decode(bytes)
    if let frames = try? WireFrame.frames(in: bytes) {
        // What parses re-encodes to a message that parses to the same frames.
        let again = try? WireFrame.frames(in: WireFrame.encodedMessage(frames[...]))
        precondition(again.map { $0.count } == frames.count, "re-encoded batch lost frames")
        // A numbered batch that unpacks holds as many frames as its header says.
        if let numbers = WireFrame.sequence(of: bytes) {
            precondition(numbers.count == frames.count, "sequenced batch count disagrees with its frames")
            let counted = WireFrame.census(of: bytes)?.reduce(0) { $0 + $1.count }
            precondition(counted == frames.count, "a numbered batch that unpacks has a census of its frames")
        }
    }
    // A compressed batch that inflates reads as the plain batch it inflates to, and keeps its numbers.
    if let plain = bytes.withUnsafeBytes({ try? WireFrame.inflated($0) }) {
        precondition(WireFrame.sequence(of: plain.array)?.first == WireFrame.sequence(of: bytes)?.first)
        let direct = try? WireFrame.frames(in: bytes), inflated = try? WireFrame.frames(in: plain.array)
        precondition(direct == inflated, "a compressed batch reads differently from its inflated form")
    }
    bytes.withUnsafeBytes { _ = WireFrame.dataFrameCount($0) }
    var views: [WireFrame.View] = []
    bytes.withUnsafeMutableBytes { _ = WireFrame.views(in: $0, into: &views) }
    return 0
}
