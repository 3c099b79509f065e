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
        var lines = BagJSONLines(bag: bag)
        struct Done: Error {}
        do {
            try bag.forEachMessage(options) { m in
                if let limit, printed >= limit { throw Done() }
                let line: String
                do { line = try lines.line(m) } catch {
                    undecodable += 1
                    writeStandardError(
                        "fusion-node: \(a.positionals[0]): \(m.topic) at log time \(m.logTime): \(error)\n")
                    return
                }
                print(line)
                printed += 1
            }
        } catch is Done {}
        for d in bag.damage { writeStandardError("fusion-node: damage: \(d)\n") }
        // Damage is only read past with --salvage, which accepts it; undecodable messages are a loss.
        return undecodable > 0 ? .finishedWithLoss : .complete
    }
}
