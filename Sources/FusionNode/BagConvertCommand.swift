import Bags
import Pipeline
import WireFormat

/// `fusion-node bag convert IN OUT`: every message of a bag, read with this project's reader and
/// written with its writer (MCAP or sqlite3), definitions kept (or taken from the known interfaces
/// when the input has none), as `ros2 bag convert` does.
enum BagConvertCommand {
    static let help = CommandHelp(
        path: "bag convert", summary: "Copy a bag into a new MCAP or sqlite3 bag, every message and definition kept.",
        positionals: "IN OUT",
        options: [
            OptionHelp("--storage", "mcap|sqlite3", "storage of OUT when it is a directory", default: "mcap"),
            OptionHelp("--compression", "zstd|lz4|none", "MCAP chunk compression", default: "zstd"),
            OptionHelp("--topic", "TOPIC", "only this topic (may be repeated)", repeatable: true),
            OptionHelp("--salvage", nil, "read past damage in IN, listing it on stderr"),
        ],
        details: "OUT ending in .mcap or .db3 is a bare file; otherwise a rosbag2 directory. OUT must not exist.",
        examples: [
            "fusion-node bag convert old.db3 new.mcap",
            "fusion-node bag convert run/ imu-only.mcap --topic /imu/data_raw",
        ])

    static func run(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(2...2)
        let storage = a.string("--storage") ?? "mcap"
        let compression = a.string("--compression") ?? "zstd"
        guard ["mcap", "sqlite3"].contains(storage) else {
            throw UsageError(message: "--storage expects mcap or sqlite3, got '\(storage)'", command: help.path)
        }
        guard ["zstd", "lz4", "none"].contains(compression) else {
            throw UsageError(
                message: "--compression expects zstd, lz4 or none, got '\(compression)'", command: help.path)
        }
        let input = try BagReader(path: a.positionals[0])
        var options = BagReadOptions()
        options.salvage = a.has("--salvage")
        let topics = try input.topics()
        if !a.strings("--topic").isEmpty {
            var chosen: Set<String> = []
            for t in a.strings("--topic") {
                guard let found = BagTopicLookup.find(t, in: topics) else {
                    throw UsageError(
                        message: BagTopicLookup.missing(t, bag: a.positionals[0], topics: topics), command: help.path)
                }
                chosen.insert(found)
            }
            options.topics = chosen
        }
        var definitions: [String: String] = [:]
        for topic in topics {
            let own = input.schema(forTopic: topic.name).flatMap { $0.encoding == "ros2msg" ? $0.text : nil }
            guard let text = own ?? KnownInterfaces.definition(for: topic.type) else {
                writeStandardError(
                    "fusion-node: \(topic.name): no definition of \(topic.type) in the bag or known; written "
                        + "without one\n"
                )
                definitions[topic.name] = ""
                continue
            }
            definitions[topic.name] = text
        }
        let output = try BagRecorder(
            path: a.positionals[1], storage: storage == "sqlite3" ? .sqlite3 : .mcap,
            compression: compression == "none" ? "" : compression)
        var count = 0
        try input.forEachMessage(options) { m in
            try output.write(
                topic: m.topic, type: m.type, definition: definitions[m.topic] ?? "", logTime: m.logTime, data: m.data)
            count += 1
        }
        try output.finish()
        for d in input.damage { writeStandardError("fusion-node: damage: \(d)\n") }
        writeStandardError("fusion-node: \(count) message(s) to \(output.path)\n")
        return .complete
    }
}
