import CompassCore
import YAML
import Pipeline

/// `fusion-node replay BAG [...]`: builds the replay pipeline (bag -> fusion -> csv / record / publish
/// sinks) from the command line and runs it in this process: the same stages and code path as a
/// pipeline file.
struct ReplayCommand {
    static let valued: Set<String> = [
        "--csv", "--accuracy-csv", "--sensor-latency", "--record", "--storage", "--compression",
        "--filter", "--imu-topic", "--mag-topic", "--start", "--duration", "--time", "--rate",
        "--publish", "--wait-for-subscribers", "--encoding", "--print-config",
    ]
    static let flags: Set<String> = ["--salvage", "--quiet", "--loop", "--latest-only"]
    static let usage = """
        fusion-node replay BAG [options]
          --csv OUT.csv          write t,qw,qx,qy,qz for every IMU sample (orientation of the sensor frame
                                 relative to ENU, y = magnetic north; t = header stamp in seconds)
          --accuracy-csv OUT.csv write t,heading_deg,accuracy_deg,flags for every IMU sample (accuracy =
                                 the filter's 95 % bound of the heading error, empty while not valid)
          --record PATH          record the fused output (/heading: gyrocompass_msgs/msg/Heading, /imu/data:
                                 sensor_msgs/msg/Imu with the orientation) into a rosbag2 directory, or a
                                 bare file when PATH ends in .mcap or .db3
          --storage mcap|sqlite3 storage of a recorded directory (default mcap)
          --compression zstd|lz4|none   MCAP chunk compression (default zstd)
          --publish ENDPOINT     publish heading and imu/data there while replaying (e.g. tcp://127.0.0.1:5601)
          --wait-for-subscribers N   hold the replay until N subscribers are connected (with --publish)
          --encoding cdr|json    encoding of published messages (default cdr)
          --latest-only          published: keep only the newest message for a slow subscriber
          --filter NAME          kalman (default) or complementary
          --sensor-latency S     the IMU's output latency in seconds: the orientation is predicted this
                                 far ahead with the current rate (default 0)
          --imu-topic TOPIC      default /imu/data_raw (sensor_msgs/msg/Imu)
          --mag-topic TOPIC      default /imu/mag (sensor_msgs/msg/MagneticField)
          --rate R               1 = real time, 2 = twice as fast, 0 = as fast as possible (default)
          --start SECONDS        skip this long from the start of the bag
          --duration SECONDS     replay only this long
          --loop                 start again at the end (until Ctrl-C)
          --time header|log      timestamps from the header stamp (default) or the bag's log time
          --salvage              keep reading past damage and report it
          --print-config FILE    also write the generated pipeline to FILE (as a starting point)
          --quiet                no summary on stderr
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let a = try Arguments(args, valued: valued, flags: flags)
        guard a.positionals.count == 1 else { throw UsageError(message: "replay needs exactly one BAG\n" + usage) }
        func number(_ option: String, _ key: String) throws -> (String, YAMLValue)? {
            try a.double(option, minimum: 0).map { (key, .string(String($0))) }
        }
        var bag: [(String, YAMLValue)] = [
            ("type", .string("bag")), ("path", .string(a.positionals[0])),
            ("time", .string(a.string("--time") ?? "header")),
        ]
        if let t = a.string("--imu-topic") { bag.append(("imu_topic", .string(t))) }
        if let t = a.string("--mag-topic") { bag.append(("mag_topic", .string(t))) }
        for (option, key) in [("--rate", "rate"), ("--start", "start"), ("--duration", "duration")] {
            if let entry = try number(option, key) { bag.append(entry) }
        }
        if a.has("--loop") { bag.append(("loop", .string("true"))) }
        if a.has("--salvage") { bag.append(("salvage", .string("true"))) }
        if a.has("--quiet") { bag.append(("progress", .string("false"))) }
        var fusion: [(String, YAMLValue)] = [
            ("type", .string("fusion")), ("inputs", .sequence([.string("bag")])),
            ("filter", .string(a.string("--filter") ?? "kalman")),
        ]
        if let latency = try a.double("--sensor-latency", minimum: 0) {
            guard latency <= 1 else {
                throw UsageError(message: "--sensor-latency is in seconds; \(latency) is not a plausible latency")
            }
            fusion.append(("sensor_latency", .string(String(latency))))
        }
        var stages: [(String, YAMLValue)] = [("bag", .mapping(bag)), ("fusion", .mapping(fusion))]
        let fromFusion: (String, YAMLValue) = ("inputs", .sequence([.string("fusion")]))
        if a.string("--csv") != nil || a.string("--accuracy-csv") != nil {
            var csv: [(String, YAMLValue)] = [
                ("type", .string("csv")), fromFusion, ("path", .string(a.string("--csv") ?? "/dev/null")),
            ]
            if let p = a.string("--accuracy-csv") { csv.append(("accuracy_path", .string(p))) }
            stages.append(("csv", .mapping(csv)))
        }
        if let path = a.string("--record") {
            stages.append(
                (
                    "record",
                    .mapping([
                        ("type", .string("record")), fromFusion, ("path", .string(path)),
                        ("storage", .string(a.string("--storage") ?? "mcap")),
                        ("compression", .string(a.string("--compression") ?? "zstd")),
                    ])
                ))
        }
        if let endpoint = a.string("--publish") {
            stages.append(
                (
                    "publish",
                    .mapping([
                        ("type", .string("publish")), fromFusion, ("bind", .string(endpoint)),
                        ("encoding", .string(a.string("--encoding") ?? "cdr")),
                        ("latest_only", .string(a.has("--latest-only") ? "true" : "false")),
                        ("min_change_deg", .string("0")),
                        ("wait_for_subscribers", .string(String(try a.integer("--wait-for-subscribers") ?? 0))),
                    ])
                ))
        }
        let text = try YAMLEmitter.emit(.mapping([("name", .string("replay")), ("stages", .mapping(stages))]))
        if let out = a.string("--print-config") {
            let w = try BufferedFileWriter(path: out)
            try w.write(text)
            try w.close()
        }
        let config = try PipelineConfig.parse(text, file: "<replay command line>", environment: [:])
        PipelineSignals.install()
        let started = Clocks.monotonicSeconds()
        let reports = try await PipelineRunner.runAll(config)
        if !a.has("--quiet") {
            for r in reports { writeStandardError("fusion-node: \(r)\n") }
            writeStandardError(
                "fusion-node: replay of \(a.positionals[0]) took \(format(Clocks.monotonicSeconds() - started, 3)) s\n")
        }
        guard let fused = reports.first(where: { $0.stage == "fusion" }), fused.published > 0 else {
            writeStandardError(
                "fusion-node: \(a.positionals[0]): nothing was fused (no IMU messages on the chosen topics?)\n")
            return 1
        }
        return 0
    }
}
