import CompassCore
import YAML
import Pipeline

/// `fusion-node replay BAG [...]`: builds the replay pipeline (bag -> calibration -> fusion -> csv /
/// record / publish sinks, or a summary when no output is asked for) from the command line and runs it in this
/// process: the same stages and code path as a pipeline file. Each option becomes the setting of its
/// stage and is checked like a file's, so an error names the option.
enum ReplayCommand {
    static let help = CommandHelp(
        path: "replay", summary: "Run a filter over a recorded ROS 2 bag (MCAP or sqlite3; directory or file).",
        positionals: "BAG",
        options: [
            OptionHelp(
                "--csv", "OUT.csv",
                "write t,qw,qx,qy,qz per IMU sample (sensor frame relative to ENU, y = magnetic north)"),
            OptionHelp(
                "--accuracy-csv", "OUT.csv", "write t,heading_deg,accuracy_deg,flags per IMU sample (95 % bound)"),
            OptionHelp(
                "--record", "PATH", "record /heading and /imu/data into a rosbag2 directory, or a .mcap / .db3 file"),
            OptionHelp("--storage", "mcap|sqlite3", "storage of a recorded directory", default: "mcap"),
            OptionHelp("--compression", "zstd|lz4|none", "MCAP chunk compression", default: "zstd"),
            OptionHelp(
                "--publish", "ENDPOINT", "publish heading and imu/data there while replaying (tcp://127.0.0.1:5601)"),
            OptionHelp(
                "--ros2", nil, "publish imu/data, heading and heading/quaternion on ROS 2 (DDS) while replaying"),
            OptionHelp("--domain-id", "N", "with --ros2: the DDS domain", default: "$ROS_DOMAIN_ID or 0"),
            OptionHelp("--namespace", "NS", "with --ros2: the ROS namespace of the published topics", default: "/"),
            OptionHelp("--publish-tf", nil, "with --ros2: also publish odom -> IMU frame on /tf"),
            OptionHelp(
                "--wait-for-subscribers", "N", "hold the replay until N subscribers are connected (--publish, --ros2)",
                default: "0"),
            OptionHelp("--encoding", "cdr|json", "encoding of published messages", default: "cdr"),
            OptionHelp("--latest-only", nil, "published: keep only the newest message for a slow subscriber"),
            OptionHelp(
                "--on-slow", "drop|block",
                "published: a subscriber that falls behind misses messages (drop) or holds the replay (block)",
                default: "block with --wait-for-subscribers, else drop"),
            OptionHelp("--insecure", nil, "allow --publish on an address other hosts can reach (no encryption)"),
            OptionHelp("--filter", "NAME", "kalman or complementary", default: "kalman"),
            ProcessingGraph.noCalibrationOption,
        ] + ProcessingGraph.mountingOptions + ProcessingGraph.extraMagnetometerOptions + [
            ProcessingGraph.calibrationFileOption
        ] + [
            OptionHelp(
                "--sensor-latency", "SECONDS", "predict the orientation this far ahead (the IMU's output latency)",
                default: "0"),
            OptionHelp(
                "--smooth", nil,
                "kalman: smooth offline, each estimate using the whole recording (outputs come at the end)"),
            OptionHelp("--imu-topic", "TOPIC", "bag topic with sensor_msgs/msg/Imu", default: "/imu/data_raw"),
            OptionHelp("--mag-topic", "TOPIC", "bag topic with sensor_msgs/msg/MagneticField", default: "/imu/mag"),
            ProcessingGraph.currentTopicOption,
        ] + ProcessingGraph.gnssOptions + [
            OptionHelp("--rate", "R", "1 = real time, 2 = twice as fast, 0 = as fast as possible", default: "0"),
            OptionHelp("--start", "SECONDS", "skip this long from the start of the bag", default: "0"),
            OptionHelp("--duration", "SECONDS", "replay only this long; 0 = all", default: "0"),
            OptionHelp("--loop", nil, "start again at the end (until Ctrl-C)"),
            OptionHelp(
                "--time", "header|log", "timestamps from the header stamp or the bag's log time", default: "header"),
            OptionHelp("--salvage", nil, "read past damage, report it, and accept it (exit 0)"),
            ProcessingGraph.setOption,
            OptionHelp("--print-config", "FILE", "also write the generated pipeline to FILE (a starting point)"),
            OptionHelp("--overwrite", nil, "replace output files (--csv, --accuracy-csv) that exist"),
            OptionHelp("--quiet", nil, "no progress bar and no summary on stderr"),
        ],
        details: """
            Without --csv, --accuracy-csv, --record or --publish the replay ends with a summary: duration,
            final and mean heading with accuracy, share of time per flag and skipped samples.
            Exit codes: 0 complete, 1 failed, 2 usage, 3 finished with damage or undecodable messages
            skipped (without --salvage), 130 interrupted.
            """,
        examples: [
            "fusion-node replay run.mcap --csv out.csv --accuracy-csv acc.csv",
            "fusion-node replay run/ --record fused.mcap --filter complementary",
            "fusion-node replay run.mcap --publish tcp://127.0.0.1:5601 --wait-for-subscribers 1 --rate 1",
        ])

    static func run(_ args: [String]) async throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(1...1)
        let bagPath = a.positionals[0]
        try ProcessingGraph.checkMounting(a, command: help.path)
        try OutputPaths.refuseClashes(
            outputs: ["--csv", "--accuracy-csv", "--record"].compactMap { o in a.string(o).map { (o, $0) } },
            inputs: [("recording", bagPath)] + (a.string("--calibration").map { [("calibration file", $0)] } ?? []),
            command: help.path)
        var graph = try ReplayGraph(a, bagPath: bagPath)
        try graph.addOutputs()
        try refuseOrphanOptions(a)
        var top: [(String, YAMLValue)] = [("name", .string("replay"))]
        if a.has("--insecure") { top.append(("insecure", .string("true"))) }
        graph.overrides += try ProcessingGraph.setOverrides(a)
        let text = try YAMLEmitter.emit(.mapping(top + [("stages", .mapping(graph.stages))]))
        let config = try PipelineConfig.parse(
            text, file: "<replay command line>", environment: [:], overrides: graph.overrides)
        warnOfFormerNames(config)
        try ProcessingGraph.refuseExistingOutputs(config, a, command: help.path)
        if let out = a.string("--print-config") {
            let w = try BufferedFileWriter(path: out)
            try w.write(
                try YAMLEmitter.emit(
                    .mapping(
                        top + [("stages", .mapping(ProcessingGraph.withOverrides(graph.stages, graph.overrides)))])))
            try w.close()
        }
        let stop = StopToken().handleSignals()
        let started = Clocks.monotonicSeconds()
        let reports = try await PipelineRunner.runAll(config, stop: stop)
        return finish(reports, a, bagPath: bagPath, seconds: Clocks.monotonicSeconds() - started, stop: stop)
    }

    /// An option that belongs to an output that was not asked for is a usage error naming both.
    static func refuseOrphanOptions(_ a: Arguments) throws {
        for option in ["--domain-id", "--namespace", "--publish-tf"]
        where (a.string(option) != nil || a.has(option)) && !a.has("--ros2") {
            throw UsageError(message: "\(option) applies to --ros2, which was not given", command: "replay")
        }
        for option in ["--storage", "--compression"] where a.string(option) != nil && a.string("--record") == nil {
            throw UsageError(message: "\(option) applies to --record, which was not given", command: "replay")
        }
        if a.string("--wait-for-subscribers") != nil && a.string("--publish") == nil && !a.has("--ros2") {
            throw UsageError(
                message: "--wait-for-subscribers applies to --publish or --ros2, neither was given", command: "replay")
        }
        for option in ["--encoding", "--on-slow"] where a.string(option) != nil && a.string("--publish") == nil {
            throw UsageError(message: "\(option) applies to --publish, which was not given", command: "replay")
        }
    }

    /// What the run tells on standard error, and its exit code.
    static func finish(
        _ reports: [StageReport], _ a: Arguments, bagPath: String, seconds: Double, stop: StopToken
    ) -> ExitCode {
        if !a.has("--quiet") {
            for r in reports where r.stage != "summary" { writeStandardError("fusion-node: \(r)\n") }
            writeStandardError("fusion-node: replay of \(bagPath) took \(format(seconds, 3)) s\n")
        }
        if let summary = reports.first(where: { $0.stage == "summary" }) {
            writeStandardError(
                summary.notes.map { "  \($0)\n" }.joined()
                    + "  write outputs with --csv OUT.csv, --accuracy-csv OUT.csv, --record PATH or --publish "
                    + "ENDPOINT\n"
            )
        }
        guard let fused = reports.first(where: { $0.stage == "fusion" }), fused.published > 0 else {
            let topics = "\(a.string("--imu-topic") ?? "/imu/data_raw") and \(a.string("--mag-topic") ?? "/imu/mag")"
            writeStandardError(
                "fusion-node: \(bagPath): nothing was fused (no IMU messages on \(topics); see fusion-node bag info)\n")
            return .failed
        }
        if stop.interruptedBySignal { return .interrupted }
        return .finished(reports, ignoringLoss: a.has("--salvage"))
    }
}

/// The replay's pipeline as the command line describes it: the bag source, the processing graph,
/// the outputs asked for, and every value the user gave as an override (so its error names the
/// option).
struct ReplayGraph {
    let a: Arguments
    var stages: [(String, YAMLValue)]
    var overrides: [SettingOverride]
    var outputs: [String] = []
    let fromFusion: (String, YAMLValue) = ("inputs", .sequence([.string("fusion")]))

    init(_ a: Arguments, bagPath: String) throws {
        self.a = a
        stages =
            [("bag", .mapping([("type", .string("bag")), ("path", .string(bagPath))]))]
            + ProcessingGraph.stages(
                after: "bag", calibrate: !a.has("--no-calibration"), a,
                calibrationFile: try ProcessingGraph.calibrationFile(a, command: ReplayCommand.help.path))
        overrides = ProcessingGraph.sourceOverrides(a)
        for (option, setting) in [
            ("--imu-topic", "imu_topic"), ("--mag-topic", "mag_topic"), ("--current-topic", "current_topic"),
            ("--rate", "rate"), ("--start", "start_s"), ("--duration", "duration_s"), ("--time", "time"),
        ] { set("bag", setting, option) }
        overrides += try ProcessingGraph.gnssOverrides(a, command: ReplayCommand.help.path)
        flag("bag", "loop", "--loop")
        flag("bag", "salvage", "--salvage")
        flag("bag", "progress", "--quiet", "false")
        set("fusion", "filter", "--filter")
        set("fusion", "sensor_latency_s", "--sensor-latency")
        flag("fusion", "smooth", "--smooth")
    }

    /// The option's value (or `value`) as a setting of `stage`, when given.
    mutating func set(_ stage: String, _ setting: String, _ option: String, _ value: String? = nil) {
        guard let v = value ?? a.string(option) else { return }
        overrides.append(SettingOverride(stage: stage, setting: setting, value: v, origin: "\(option) \(v)"))
    }

    /// `value` as a setting of `stage` when the flag `option` is given.
    mutating func flag(_ stage: String, _ setting: String, _ option: String, _ value: String = "true") {
        if a.has(option) {
            overrides.append(SettingOverride(stage: stage, setting: setting, value: value, origin: option))
        }
    }

    /// The sinks asked for (CSV, record, publish, ROS 2), or the summary when none is.
    mutating func addOutputs() throws {
        if a.string("--csv") != nil || a.string("--accuracy-csv") != nil {
            var csv: [(String, YAMLValue)] = [("type", .string("csv")), fromFusion]
            if let p = a.string("--csv") { csv.append(("path", .string(p))) }
            if let p = a.string("--accuracy-csv") { csv.append(("accuracy_path", .string(p))) }
            stages.append(("csv", .mapping(csv)))
            outputs.append("csv")
        }
        if let path = a.string("--record") {
            stages.append(("record", .mapping([("type", .string("record")), fromFusion, ("path", .string(path))])))
            set("record", "storage", "--storage")
            set("record", "compression", "--compression")
            outputs.append("record")
        }
        if let endpoint = a.string("--publish") { addPublish(endpoint) }
        if a.has("--ros2") {
            stages.append(("ros2", .mapping([("type", .string("ros2_sink")), fromFusion])))
            // As `ros2 echo` and pipeline files do: the option, else ROS_DOMAIN_ID, else 0.
            set("ros2", "domain_id", "--domain-id", String(try ROS2Command.domainId(a)))
            set("ros2", "namespace", "--namespace")
            flag("ros2", "publish_tf", "--publish-tf")
            if a.string("--publish") == nil { set("ros2", "wait_for_subscribers", "--wait-for-subscribers") }
            outputs.append("ros2")
        }
        if outputs.isEmpty {
            stages.append(("summary", .mapping([("type", .string("summary")), fromFusion])))
        }
    }

    mutating func addPublish(_ endpoint: String) {
        stages.append(
            ("publish", .mapping([("type", .string("publish")), fromFusion, ("min_change_deg", .string("0"))])))
        set("publish", "bind", "--publish", endpoint)
        set("publish", "encoding", "--encoding")
        flag("publish", "latest_only", "--latest-only")
        // Subscribers the replay was asked to wait for get every message unless told otherwise: a
        // recording can be replayed again, so holding it costs nothing but time.
        let waited = Int(a.string("--wait-for-subscribers") ?? "0") ?? 0
        set("publish", "on_slow", "--on-slow", a.string("--on-slow") ?? (waited > 0 ? "block" : nil))
        set("publish", "wait_for_subscribers", "--wait-for-subscribers")
        outputs.append("publish")
    }
}
