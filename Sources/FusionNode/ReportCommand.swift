import Foundation
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
            ProcessingGraph.currentTopicOption,
        ] + ProcessingGraph.gnssOptions + [
            OptionHelp("--start", "SECONDS", "skip this long from the start of the bag", default: "0"),
            OptionHelp("--duration", "SECONDS", "replay only this long; 0 = all", default: "0"),
            ProcessingGraph.noCalibrationOption,
        ] + ProcessingGraph.mountingOptions + ProcessingGraph.extraMagnetometerOptions + [
            OptionHelp(
                "--truth", "FILE", "reference orientation, BROAD-style t,qw,qx,qy,qz[,movement] (.csv or .csv.gz)"),
            ProcessingGraph.setOption,
            OptionHelp("--salvage", nil, "read past damage in the bag, report it on the page, and accept it (exit 0)"),
            OptionHelp("--overwrite", nil, "replace the page when FILE exists"),
            OptionHelp(
                "--compare", "CSV",
                "a second run to overlay and score beside this one: t,qw,qx,qy,qz (replay --csv with another filter "
                    + "or pipeline, or another tool's output)"),
            OptionHelp("--compare-label", "NAME", "the second run's name on the page (default: the file's name)"),
        ],
        details: """
            The report: a summary table (duration, headings, final heading, accuracy, share of time per flag,
            calibrations accepted, skipped samples), heading with its accuracy band, flags as shaded spans, field
            strength and dip against the expected values, raw and calibrated magnetometer points in three
            projections with the fitted ellipsoid, the calibration values and every fit accepted, the gyro bias
            the filter removed, what produced the page (version, commit, the pipeline as run). With --truth:
            the RMSE as the BROAD scorer defines it, error percentiles, the signed heading error against the
            reported bound and the inclination error. Long bags stay small: every plot draws at most one
            minimum and one maximum per pixel column.
            A replay that fails still leaves the page of what was read, marked INCOMPLETE in its first line,
            and exits 1. A truth that does not fit the recording (it overlaps less than half of it, or the
            median heading error is over three times the median bound) is warned about, on the page and on
            stderr, with exit 3.
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
        try OutputPaths.refuseClashes(
            outputs: [("-o", output)],
            inputs: [("recording", bag)] + (a.string("--truth").map { [("truth", $0)] } ?? []), command: help.path)
        let (text, overrides) = try pipeline(a, bag: bag, output: output)
        let config = try PipelineConfig.parse(
            text, file: "<report command line>", environment: [:], overrides: overrides)
        try ProcessingGraph.refuseExistingOutputs(config, a, command: help.path)
        let startedAt = Date()
        let stop = StopToken().handleSignals()
        let reports: [StageReport]
        do {
            reports = try await PipelineRunner.runAll(config, stop: stop, log: { _ in })
        } catch {
            // What was read before the failure is still worth a look, but never as a finished report.
            if written(output, since: startedAt) {
                try annotate(
                    output,
                    status: "INCOMPLETE: the replay failed, the page shows only what was read before: "
                        + "\(error)", skipped: nil, pipeline: text, overrides: overrides)
                writeStandardError("fusion-node: \(output) is marked incomplete\n")
            }
            throw error
        }
        for r in reports where r.stage != "report" { writeStandardError("fusion-node: \(r)\n") }
        // The fusion stage's skip counts go into the summary table.
        let skipped = reports.first { $0.stage == "fusion" }?.notes.first { $0.hasPrefix("filter skipped") } ?? "none"
        let salvaged = a.has("--salvage")
        let status = lossStatus(reports, salvaged: salvaged)
        if written(output, since: startedAt) {
            try annotate(output, status: status, skipped: skipped, pipeline: text, overrides: overrides)
        }
        for r in reports where r.stage == "report" {
            for note in r.notes { writeStandardError("fusion-node: \(note)\n") }
        }
        if stop.interruptedBySignal { return .interrupted }
        let truthWarning = reports.contains { $0.stage == "report" && $0.losses > 0 }
        return .finished(reports, ignoringLoss: salvaged && !truthWarning)
    }

    /// The report's pipeline as YAML text (bag, processing graph, report stage) and the command line's
    /// values as overrides, so that an error names the option.
    static func pipeline(_ a: Arguments, bag: String, output: String) throws -> (
        text: String, overrides: [SettingOverride]
    ) {
        let calibrate = !a.has("--no-calibration")
        try ProcessingGraph.checkMounting(a, command: help.path)
        var stages: [(String, YAMLValue)] =
            [("bag", .mapping([("type", .string("bag")), ("path", .string(bag))]))]
            + ProcessingGraph.stages(after: "bag", calibrate: calibrate, a)
        stages.append(
            (
                "report",
                .mapping([
                    ("type", .string("report")), ("inputs", .sequence([.string("bag"), .string("fusion")])),
                    ("path", .string(output)),
                    ("title", .string(String(bag.split(separator: "/").last ?? Substring(bag)))),
                ])
            ))
        var overrides: [SettingOverride] = ProcessingGraph.sourceOverrides(a)
        for (option, stage, setting) in [
            ("--filter", "fusion", "filter"), ("--imu-topic", "bag", "imu_topic"), ("--mag-topic", "bag", "mag_topic"),
            ("--current-topic", "bag", "current_topic"), ("--start", "bag", "start_s"),
            ("--duration", "bag", "duration_s"),
            ("--truth", "report", "truth"), ("--compare", "report", "compare"),
            ("--compare-label", "report", "compare_label"),
        ] {
            if let v = a.string(option) {
                overrides.append(SettingOverride(stage: stage, setting: setting, value: v, origin: "\(option) \(v)"))
            }
        }
        overrides += try ProcessingGraph.gnssOverrides(a, command: help.path)
        if a.has("--salvage") {
            overrides.append(SettingOverride(stage: "bag", setting: "salvage", value: "true", origin: "--salvage"))
        }
        overrides += try ProcessingGraph.setOverrides(a)
        let text = try YAMLEmitter.emit(.mapping([("name", .string("report")), ("stages", .mapping(stages))]))
        return (text, overrides)
    }

    /// The page's status line when a stage lost or skipped something (nil when none did).
    static func lossStatus(_ reports: [StageReport], salvaged: Bool) -> String? {
        let lossNotes = reports.filter { $0.losses > 0 }.flatMap { r in
            r.notes.filter { $0.hasPrefix("warning") || $0.contains("skipped") || $0.contains("damage") }
                .map { note in
                    // The status already says "warning"; the report's own notes need no stage name.
                    let text = note.hasPrefix("warning: ") ? String(note.dropFirst(9)) : note
                    return r.stage == "report" ? text : "\(r.stage): \(text)"
                }
        }
        return reports.contains { $0.losses > 0 }
            ? (salvaged ? "Read past damage (--salvage): " : "Finished with damage, loss or a warning: ")
                + (lossNotes.isEmpty ? "see the summary" : lossNotes.joined(separator: "; "))
            : nil
    }

    /// Whether `path` was written by this run (the report stage writes it when the inputs end).
    static func written(_ path: String, since start: Date) -> Bool {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let modified = attributes[.modificationDate] as? Date
        else { return false }
        return modified >= start.addingTimeInterval(-1)
    }

    /// Fills the page's placeholders: the status line first (incomplete, damage, a warning), the skipped
    /// samples, and what produced it (the pipeline as run, with the command-line settings).
    static func annotate(
        _ path: String, status: String?, skipped: String?, pipeline: String, overrides: [SettingOverride]
    ) throws {
        guard var html = YAMLParser.readFile(path, maximumBytes: Int.max - 1) else { return }
        func escape(_ s: String) -> String {
            s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;")
        }
        if let status {
            html = html.replacingOccurrences(
                of: "<!--STATUS-->", with: "<p class=\"incomplete\" id=\"status\">\(escape(status))</p>")
            if status.hasPrefix("INCOMPLETE"), let range = html.range(of: "<title>") {
                html.replaceSubrange(range, with: "<title>INCOMPLETE: ")
            }
        }
        if let skipped { html = html.replacingOccurrences(of: "<!--SKIPPED-->", with: escape(skipped)) }
        let settings = overrides.map(\.origin).joined(separator: " ")
        html = html.replacingOccurrences(
            of: "<!--PIPELINE-->",
            with: "<details id=\"pipeline\"><summary>The pipeline as run"
                + (settings.isEmpty ? "" : " (with \(escape(settings)))")
                + "</summary><pre>\(escape(pipeline))</pre></details>\n")
        let w = try BufferedFileWriter(path: path)
        try w.write(html)
        try w.close()
    }
}
