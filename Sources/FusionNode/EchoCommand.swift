import MessageBus
import WireFormat
import Pipeline
#if canImport(Glibc)
    import Glibc
#endif

/// `fusion-node echo ENDPOINT [TOPIC]`: subscribes to a pipeline's publisher and prints every message
/// as a JSON line {"topic", "type", "encoding", "message"}; says on stderr what it waits for, warns
/// while nothing arrives, and ends at the publisher's end of stream.
enum EchoCommand {
    static let help = CommandHelp(
        path: "echo", summary: "Subscribe to a pipeline's publish endpoint and print its messages as JSON lines.",
        positionals: "ENDPOINT [TOPIC]",
        options: [
            OptionHelp("--count", "N", "stop after N messages", default: "all"),
            OptionHelp(
                "--timeout", "SECONDS", "give up (exit 1) when nothing arrives for this long; 0 = wait", default: "0"),
            OptionHelp("--latest-only", nil, "keep only the newest message when the terminal is slower (ZMQ_CONFLATE)"),
            OptionHelp("--server-key", "FILE", "the publisher's CURVE public key (its server_key NAME.key)"),
            OptionHelp(
                "--key", "NAME", "this client's CURVE pair, NAME.key and NAME.key_secret (its NAME.key must be allowed)"
            ),
        ],
        details: """
            ENDPOINT is a ZeroMQ address such as tcp://127.0.0.1:5600 or ipc:///path; TOPIC a pipeline topic
            (heading, imu/data, calibration/status, ...; a leading slash is accepted). The command ends when
            the publisher's stream ends (exit 0).
            """,
        examples: ["fusion-node echo tcp://127.0.0.1:5600 heading", "fusion-node echo tcp://127.0.0.1:5601 --count 10"])

    static func run(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(1...2)
        let endpoint = a.positionals[0]
        if let problem = BusEndpoint.problem(endpoint) { throw UsageError(message: problem, command: help.path) }
        let topic = a.positionals.count == 2 ? PipelineTopics.named(a.positionals[1]) : nil
        if let topic, !PipelineTopics.all.contains(topic) {
            writeStandardError(
                "fusion-node: warning: '\(topic)' is not a topic GyroCompass "
                    + "publishes\(didYouMean(topic, in: PipelineTopics.all))\n"
            )
        }
        let limit = try a.integer("--count", minimum: 1)
        let timeout = try a.double("--timeout", minimum: 0, maximum: 1_000_000) ?? 0
        let stop = StopToken().handleSignals()
        let context = BusContext()
        let socket = try BusSocket(context, .sub)
        if a.has("--latest-only") { try socket.set(.conflate, 1) }
        try a.applyCurveClientKeys(to: socket)
        try socket.subscribe(topic.map { Array($0.utf8) + [0] } ?? [])
        try socket.connect(endpoint)
        writeStandardError("fusion-node: waiting for \(topic.map { "'\($0)'" } ?? "every topic") on \(endpoint)\n")
        var printed = 0
        var lastArrival = Clocks.monotonicSeconds(), warnedAt = lastArrival
        while !stop.requested {
            guard let bytes = try socket.receive(timeoutMilliseconds: 200) else {
                let now = Clocks.monotonicSeconds()
                if timeout > 0, now - lastArrival >= timeout {
                    writeStandardError(
                        "fusion-node: nothing arrived on \(endpoint) for \(format(timeout, 1)) s; giving up\n")
                    return .failed
                }
                if now - warnedAt >= 5 {
                    warnedAt = now
                    writeStandardError(
                        "fusion-node: nothing received for \(format(now - lastArrival, 0)) s; is a pipeline "
                            + "publishing on "
                            + "\(endpoint)\(topic.map { " with topic '\($0)' in its topics" } ?? "")?\n")
                }
                continue
            }
            lastArrival = Clocks.monotonicSeconds()
            warnedAt = lastArrival
            let frame: WireFrame
            do { frame = try WireFrame.decode(bytes) } catch {
                writeStandardError("fusion-node: \(endpoint): \(error)\n")
                continue
            }
            if frame.isEndOfStream {
                writeStandardError(
                    "fusion-node: \(endpoint): the publisher's stream ended after \(printed) message(s)\n")
                return .complete
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
            if let limit, printed >= limit { return .complete }
        }
        return .interrupted
    }
}
