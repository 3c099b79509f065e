import Pipeline
import WireFormat
import Bags

/// `fusion-node bag echo BAG [--topic T] [--limit N]`: every message as a JSON line
/// {"topic", "type", "log_time" (ns), "message"}; types without a JSON form carry "bytes" instead.
enum BagEchoCommand {
    static let help = CommandHelp(
        path: "bag echo",
        summary: "Every message (or one topic's) as a JSON line {\"topic\", \"type\", \"log_time\", \"message\"}.",
        positionals: "BAG",
        options: [
            OptionHelp("--topic", "TOPIC", "only this topic (with or without the leading slash)", default: "all"),
            OptionHelp("--limit", "N", "stop after N messages", default: "all"),
            OptionHelp("--salvage", nil, "read past damage, listing it on stderr"),
        ],
        details: "Types without a known definition carry \"bytes\" (their size) instead of \"message\".",
        examples: ["fusion-node bag echo run.mcap --topic /imu/mag --limit 3"])

    static func run(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(1...1)
        let bag = try BagReader(path: a.positionals[0])
        var options = BagReadOptions()
        if let t = a.string("--topic") {
            let topics = try bag.topics()
            guard let found = BagTopicLookup.find(t, in: topics) else {
                throw UsageError(
                    message: BagTopicLookup.missing(t, bag: a.positionals[0], topics: topics), command: help.path)
            }
            options.topics = [found]
        }
        options.salvage = a.has("--salvage")
        let limit = try a.integer("--limit", minimum: 1)
        var printed = 0, undecodable = 0
        // Types this module does not know are decoded through the definition the bag carries.
        var schemas: [String: MessageSchema?] = [:]
        func schema(for m: BagMessage) -> MessageSchema? {
            if let cached = schemas[m.topic] { return cached }
            // The bag's own definition, else a known one (older sqlite3 bags carry none).
            let text =
                bag.schema(forTopic: m.topic).flatMap { $0.encoding == "ros2msg" ? $0.text : nil }
                ?? KnownInterfaces.definition(for: m.type)
            let s = text.flatMap { try? MessageSchema(name: m.type, text: $0) }
            schemas[m.topic] = s
            return s
        }
        struct Done: Error {}
        do {
            try bag.forEachMessage(options) { m in
                if let limit, printed >= limit { throw Done() }
                let body: String
                do {
                    if let known = try jsonFromCDR(type: m.type, m.data) {
                        body = "\"message\":" + known
                    } else if m.encoding == "cdr", let s = schema(for: m) {
                        body = "\"message\":" + (try s.decode(m.data)).json
                    } else {
                        body = "\"bytes\":\(m.data.count)"
                    }
                } catch {
                    undecodable += 1
                    writeStandardError(
                        "fusion-node: \(a.positionals[0]): \(m.topic) at log time \(m.logTime): \(error)\n")
                    return
                }
                print(
                    "{\"topic\":\(JSONText.string(m.topic)),\"type\":\(JSONText.string(m.type)),"
                        + "\"log_time\":\(m.logTime),\(body)}"
                )
                printed += 1
            }
        } catch is Done {}
        for d in bag.damage { writeStandardError("fusion-node: damage: \(d)\n") }
        // Damage is only read past with --salvage, which accepts it; undecodable messages are a loss.
        return undecodable > 0 ? .finishedWithLoss : .complete
    }
}
