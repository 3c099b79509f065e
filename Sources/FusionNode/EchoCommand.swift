import MessageBus
import WireFormat
import Pipeline
#if canImport(Glibc)
    import Glibc
#endif

/// `fusion-node echo ENDPOINT [TOPIC] [--count N] [--latest-only]`: subscribes and prints every message
/// as a JSON line {"topic", "type", "encoding", "message"}.
enum EchoCommand {
    static func run(_ args: [String]) throws -> Int32 {
        let a = try Arguments(args, valued: ["--count"], flags: ["--latest-only"])
        guard (1...2).contains(a.positionals.count) else {
            throw UsageError(message: "usage: fusion-node echo ENDPOINT [TOPIC] [--count N] [--latest-only]")
        }
        let endpoint = a.positionals[0]
        let topic = a.positionals.count == 2 ? a.positionals[1] : nil
        let limit = try a.integer("--count", minimum: 1)
        PipelineSignals.install()
        let context = BusContext()
        let socket = try BusSocket(context, .sub)
        if a.has("--latest-only") { try socket.setOption(54 /* ZMQ_CONFLATE */, 1) }
        try socket.subscribe(topic.map { Array($0.utf8) + [0] } ?? [])
        try socket.connect(endpoint)
        var printed = 0
        while !PipelineSignals.stopRequested {
            guard let bytes = try socket.receive(timeoutMilliseconds: 200) else { continue }
            let frame: WireFrame
            do { frame = try WireFrame.decode(bytes) } catch {
                writeStandardError("fusion-node: \(endpoint): \(error)\n")
                continue
            }
            let body: String
            if frame.encoding == "json" {
                body = String(decoding: frame.payload, as: UTF8.self)
            } else {
                do {
                    body = try jsonFromCDR(type: frame.type, frame.payload) ?? "{\"bytes\":\(frame.payload.count)}"
                } catch {
                    writeStandardError("fusion-node: \(endpoint): \(frame.topic): \(error)\n")
                    continue
                }
            }
            print(
                "{\"topic\":\(JSONText.string(frame.topic)),\"type\":\(JSONText.string(frame.type)),"
                    + "\"encoding\":\(JSONText.string(frame.encoding)),\"message\":\(body)}"
            )
            fflush(nil)
            printed += 1
            if let limit, printed >= limit { break }
        }
        return 0
    }
}
