import Pipeline
import YAML

/// `fusion-node report BAG -o report.html`: replays the bag through the processing `replay` runs
/// (`ProcessingGraph`) and writes one self-contained HTML file with what the filter did.
enum ReportCommand {
    static let help = CommandHelp(
        path: "report", summary: "Replay a bag and write one self-contained HTML report (inline SVG plots).",
        positionals: "BAG",
        options: [
            OptionHelp("-o", "FILE", "the HTML file to write (required)"),
            OptionHelp("--filter", "NAME", "kalman or complementary", default: "kalman"),
            OptionHelp("--imu-topic", "TOPIC", "bag topic with sensor_msgs/msg/Imu", default: "/imu/data_raw"),
            OptionHelp("--mag-topic", "TOPIC", "bag topic with sensor_msgs/msg/MagneticField", default: "/imu/mag"),
            OptionHelp("--start", "SECONDS", "skip this long from the start of the bag", default: "0"),
            OptionHelp("--duration", "SECONDS", "replay only this long; 0 = all", default: "0"),
            ProcessingGraph.noCalibrationOption,
            OptionHelp(
                "--truth", "FILE", "reference orientation, BROAD-style t,qw,qx,qy,qz[,movement] (.csv or .csv.gz)"),
        ],
        details: """
            The report: a summary table (duration, headings, final heading, accuracy, share of time per flag,
            calibrations accepted, skipped samples), heading with its accuracy band, flags as shaded spans, field
            strength and dip against the expected values, raw and calibrated magnetometer points in three
            projections with the fitted sphere, and the gyro bias. Long bags stay small: every plot draws at most
            one minimum and one maximum per pixel column.
            """,
        examples: [
            "fusion-node report run.mcap -o run.html",
            "fusion-node report trial.mcap -o trial.html --truth truth.csv.gz --no-calibration",
        ])

    static func run(_ args: [String]) async throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(1...1)
        guard let output = a.string("-o") else {
            throw UsageError(message: "'fusion-node report' needs -o FILE (the HTML to write)", command: help.path)
        }
        let bag = a.positionals[0]
        let calibrate = !a.has("--no-calibration")
        var stages: [(String, YAMLValue)] =
            [("bag", .mapping([("type", .string("bag")), ("path", .string(bag))]))]
            + ProcessingGraph.stages(after: "bag", calibrate: calibrate)
        stages.append(
            (
                "report",
                .mapping([
                    ("type", .string("report")), ("inputs", .sequence([.string("bag"), .string("fusion")])),
                    ("path", .string(output)),
                    ("title", .string(String(bag.split(separator: "/").last ?? Substring(bag)))),
                ])
            ))
        var overrides: [SettingOverride] = []
        for (option, stage, setting) in [
            ("--filter", "fusion", "filter"), ("--imu-topic", "bag", "imu_topic"), ("--mag-topic", "bag", "mag_topic"),
            ("--start", "bag", "start"), ("--duration", "bag", "duration"), ("--truth", "report", "truth"),
        ] {
            if let v = a.string(option) {
                overrides.append(SettingOverride(stage: stage, setting: setting, value: v, origin: "\(option) \(v)"))
            }
        }
        let text = try YAMLEmitter.emit(.mapping([("name", .string("report")), ("stages", .mapping(stages))]))
        let config = try PipelineConfig.parse(
            text, file: "<report command line>", environment: [:], overrides: overrides)
        PipelineSignals.install()
        let reports = try await PipelineRunner.runAll(config, log: { _ in })
        for r in reports where r.stage != "report" { writeStandardError("fusion-node: \(r)\n") }
        // The fusion stage's skip counts go into the summary table.
        let skipped = reports.first { $0.stage == "fusion" }?.notes.first { $0.hasPrefix("filter skipped") } ?? "none"
        if var html = YAMLParser.readFile(output, maximumBytes: Int.max - 1) {
            html = html.replacingOccurrences(of: "<!--SKIPPED-->", with: skipped)
            let w = try BufferedFileWriter(path: output)
            try w.write(html)
            try w.close()
        }
        if let note = reports.first(where: { $0.stage == "report" })?.notes.last {
            writeStandardError("fusion-node: \(note)\n")
        }
        if PipelineSignals.interruptedBySignal { return .interrupted }
        return reports.contains { $0.losses > 0 } ? .finishedWithLoss : .complete
    }
}
