import Pipeline
import Bags

/// `fusion-node bag info BAG`: what `ros2 bag info` users expect.
enum BagInfoCommand {
    static let help = CommandHelp(
        path: "bag info",
        summary: "Duration, start and end, message counts, topics with types and rates, compression, size.",
        positionals: "BAG",
        options: [OptionHelp("--salvage", nil, "read past damage, listing it on stderr")],
        details: "BAG is a rosbag2 directory or a .mcap / .db3 file.",
        examples: ["fusion-node bag info run.mcap", "fusion-node bag info damaged.mcap --salvage"])

    static func run(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(1...1)
        var options = BagReadOptions()
        options.salvage = a.has("--salvage")
        let bag = try BagReader(path: a.positionals[0])
        var first = UInt64.max, last = UInt64.min, count = 0
        var perTopic: [String: (count: Int, first: UInt64, last: UInt64)] = [:]
        try bag.forEachMessage(options) { m in
            first = min(first, m.logTime)
            last = max(last, m.logTime)
            count += 1
            var t = perTopic[m.topic] ?? (0, .max, .min)
            t.count += 1
            t.first = min(t.first, m.logTime)
            t.last = max(t.last, m.logTime)
            perTopic[m.topic] = t
        }
        let duration = count > 0 ? Double(last - first) * 1e-9 : 0
        print(terminalSafe("Files:             \(bag.files.joined(separator: ", "))"))
        print("Bag size:          \(humanBytes(bag.sizeBytes))")
        print("Storage id:        \(bag.storage.rawValue)")
        if bag.storage == .mcap {
            let compressions = bag.chunkCompressions.map {
                $0.map { $0.isEmpty ? "none" : $0 }.sorted().joined(separator: ", ")
            }
            print("Chunk compression: \(compressions ?? "unknown (no chunk index)")")
        }
        print("Duration:          \(format(duration, 3)) s")
        if count > 0 {
            print("Start:             \(format(Double(first) * 1e-9, 9)) s (log time)")
            print("End:               \(format(Double(last) * 1e-9, 9)) s (log time)")
        }
        print("Messages:          \(count)")
        print("Topic information:")
        for t in try bag.topics() {
            let p = perTopic[t.name]
            let span = p.map { Double($0.last - $0.first) * 1e-9 } ?? 0
            let rate = (p?.count ?? 0) > 1 && span > 0 ? Double(p!.count - 1) / span : 0
            print(
                terminalSafe(
                    "  Topic: \(t.name) | Type: \(t.type) | Count: \(p?.count ?? 0) | Rate: \(format(rate, 3)) Hz | "
                        + "Serialization: \(t.encoding)"))
        }
        for d in bag.damage { writeStandardError("fusion-node: damage: \(d)\n") }
        return .complete  // damage is only read past with --salvage, which accepts it
    }

    static func humanBytes(_ n: Int) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var v = Double(n), u = 0
        while v >= 1024 && u < units.count - 1 {
            v /= 1024
            u += 1
        }
        return "\(format(v, u == 0 ? 0 : 1)) \(units[u])"
    }
}
