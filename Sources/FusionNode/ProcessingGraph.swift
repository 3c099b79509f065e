import Foundation
import CompassCore
import Pipeline
import YAML

/// The processing every command that replays runs, the same as the built-in graph and the files in
/// Pipelines/: online calibration, then fusion (whose gate is the one verdict on each magnetometer
/// reading). `--no-calibration` removes the calibration stage, with the same meaning everywhere.
enum ProcessingGraph {
    static let noCalibrationOption = OptionHelp(
        "--no-calibration", nil, "fusion alone: no online calibration stage (the magnetometer as recorded)")

    static let currentTopicOption = OptionHelp(
        "--current-topic", "TOPIC",
        "bag topic with the motors' current (BatteryState, or Float32/Float64 amperes): the calibration removes the "
            + "field it makes, learning how much")

    /// GNSS aiding of the Kalman filter from a recording's receiver topics.
    static let gnssOptions = [
        OptionHelp(
            "--velocity-topic", "TOPIC",
            "bag topic with a GNSS receiver's velocity (geometry_msgs/msg/TwistWithCovarianceStamped, ENU): takes the "
                + "vehicle's acceleration out of gravity and gives the heading while it accelerates or turns"),
        OptionHelp(
            "--gnss-heading-topic", "TOPIC",
            "bag topic with a dual-antenna receiver's heading (sensor_msgs/msg/Imu with yaw covariance)"),
        OptionHelp(
            "--course-is-heading", nil, "the vehicle moves along its x axis: the GNSS course is its heading"),
        OptionHelp("--no-mag", nil, "no magnetometer: the heading comes from GNSS alone (use_mag: false)"),
    ]

    /// The settings `gnssOptions` stand for: (option, stage, setting, value for a flag).
    static let gnssSettings: [(option: String, stage: String, setting: String, flag: String?)] = [
        ("--velocity-topic", "bag", "velocity_topic", nil), ("--gnss-heading-topic", "bag", "gnss_heading_topic", nil),
        ("--course-is-heading", "fusion", "course_is_heading", "true"), ("--no-mag", "bag", "use_mag", "false"),
        ("--no-mag", "fusion", "use_mag", "false"),
    ]

    /// Any setting of the generated graph (bag, calibration, fusion, ...), as `--config` takes it.
    static let setOption = OptionHelp(
        "--set", "STAGE.SETTING=VALUE",
        "override a setting of the generated graph, e.g. fusion.inclination_gate_deg=2 (stages: bag, calibration, "
            + "fusion, and the outputs asked for); may be repeated", repeatable: true)

    /// The generated stages with the overrides written in, for `--print-config`: the file then runs
    /// what the command ran. A list value ("[1, 0, 0]") becomes a YAML sequence.
    static func withOverrides(_ stages: [(String, YAMLValue)], _ overrides: [SettingOverride]) -> [(String, YAMLValue)]
    {
        stages.map { name, value in
            guard case .mapping(var entries) = value else { return (name, value) }
            for o in overrides where o.stage == name || (o.stage == SettingOverride.everySource && name == "bag") {
                var v = YAMLValue.string(o.value)
                let text = o.value.trimmingCharacters(in: .whitespaces)
                if text.hasPrefix("[") && text.hasSuffix("]") {
                    v = .sequence(
                        text.dropFirst().dropLast().split(separator: ",").map {
                            .string($0.trimmingCharacters(in: .whitespaces))
                        })
                }
                if let i = entries.firstIndex(where: { $0.0 == o.setting }) {
                    entries[i].1 = v
                } else {
                    entries.append((o.setting, v))
                }
            }
            return (name, .mapping(entries))
        }
    }

    /// `--set` overrides, applied after the options'.
    static func setOverrides(_ a: Arguments) throws -> [SettingOverride] {
        try a.strings("--set").map { try SettingOverride(parsing: $0, origin: "--set \($0)") }
    }

    /// `gnssOptions` given on the command line, as overrides. Options that need a GNSS topic without
    /// one are refused: they would change nothing (the course) or leave the heading unknown (no magnetometer).
    static func gnssOverrides(_ a: Arguments, command: String) throws -> [SettingOverride] {
        if a.has("--course-is-heading") && a.string("--velocity-topic") == nil {
            throw UsageError(
                message: "--course-is-heading takes the course from --velocity-topic, which was not given",
                command: command)
        }
        if a.has("--no-mag") && a.string("--velocity-topic") == nil && a.string("--gnss-heading-topic") == nil {
            throw UsageError(
                message: "--no-mag needs --velocity-topic or --gnss-heading-topic: without the magnetometer only GNSS "
                    + "gives the heading", command: command)
        }
        return gnssSettings.compactMap { entry in
            if let value = entry.flag {
                return a.has(entry.option)
                    ? SettingOverride(stage: entry.stage, setting: entry.setting, value: value, origin: entry.option)
                    : nil
            }
            return a.string(entry.option).map {
                SettingOverride(stage: entry.stage, setting: entry.setting, value: $0, origin: "\(entry.option) \($0)")
            }
        }
    }

    static let mountingOptions = [
        OptionHelp(
            "--imu-rotation", "ROTATION",
            "the IMU's mounting: a name (yaw_90, roll_180, ...), ROLL,PITCH,YAW in degrees (URDF convention), or tf "
                + "(from the bag's /tf_static)"),
        OptionHelp(
            "--mag-rotation", "ROTATION",
            "the magnetometer's mounting, as --imu-rotation, or auto: found from motion by the calibration stage"),
    ]

    /// The stages after `source`, in order; the last is `fusion`. With a mounting rotation, a `mount`
    /// stage first turns the sensors into the body frame.
    static let calibrationFileOption = OptionHelp(
        "--calibration", "FILE",
        "a calibration file (fusion-node calibrate, or a calibration stage's file) applied from the start, "
            + "instead of learning online")

    /// The calibration file `--calibration` names, checked: a file that cannot be used is a usage error,
    /// never a silent start uncalibrated.
    static func calibrationFile(_ a: Arguments, command: String) throws -> String? {
        guard let path = a.string("--calibration") else { return nil }
        if a.has("--no-calibration") {
            throw UsageError(message: "--calibration and --no-calibration contradict each other", command: command)
        }
        if case .failure(let refusal) = CalibrationFile.load(path) {
            throw UsageError(message: "--calibration \(path): \(refusal.reason)", command: command)
        }
        return path
    }

    /// `--mag-rotation auto` asks the calibration stage to find the mounting: without that stage it
    /// would be silently ignored. The extra magnetometers and their rotations are checked too.
    static func checkMounting(_ a: Arguments, command: String) throws {
        _ = try extraMagnetometerNames(a, command: command)
        // Checked here, so a mistake names the option rather than a line of the generated pipeline.
        for (option, words) in [("--imu-rotation", ["tf"]), ("--mag-rotation", ["tf", "auto"])] {
            guard let text = a.string(option), !words.contains(text), MountingRotation.parse(text) == nil else {
                continue
            }
            let hint =
                text == "auto"
                ? " (auto finds the magnetometer's mounting: --mag-rotation auto)"
                : didYouMean(text, in: MountingRotation.names + words)
            throw UsageError(
                message:
                    "\(option) \(text): not a rotation name, ROLL,PITCH,YAW in degrees or "
                    + words.joined(separator: " or ") + hint, command: command)
        }
        if a.string("--mag-rotation") == "auto" && a.has("--no-calibration") {
            throw UsageError(
                message:
                    "--mag-rotation auto needs the calibration stage (it finds the mounting); drop --no-calibration",
                command: command)
        }
    }

    /// Outputs of a command's generated pipeline that exist are refused unless `--overwrite`: as a
    /// usage error naming the file (the generated pipeline's lines mean nothing to the user).
    static func refuseExistingOutputs(_ config: PipelineConfig, _ a: Arguments, command: String) throws {
        do { try config.refuseExistingOutputs(overwriting: a.has("--overwrite")) } catch {
            throw UsageError(message: error.message, command: command)
        }
    }

    /// What the source options set on the bag stage: `--extra-magnetometer` its `extra_magnetometers`,
    /// and a rotation given as `tf` its `tf_topic` (the bag's /tf_static).
    static func sourceOverrides(_ a: Arguments, source: String = "bag") -> [SettingOverride] {
        var overrides: [SettingOverride] = []
        let extras = a.strings("--extra-magnetometer")
        if !extras.isEmpty {
            overrides.append(
                SettingOverride(
                    stage: source, setting: "extra_magnetometers", value: "[" + extras.joined(separator: ", ") + "]",
                    origin: extras.map { "--extra-magnetometer \($0)" }.joined(separator: " ")))
        }
        let tf =
            a.string("--imu-rotation") == "tf" || a.string("--mag-rotation") == "tf"
            || a.strings("--extra-mag-rotation").contains { $0.hasSuffix("=tf") }
        if tf {
            overrides.append(
                SettingOverride(stage: source, setting: "tf_topic", value: "/tf_static", origin: "--mag-rotation tf"))
        }
        return overrides
    }

    static let extraMagnetometerOptions = [
        OptionHelp(
            "--extra-magnetometer", "NAME=TOPIC",
            "another magnetometer's bag topic (mast=/mast/mag), read as imu/mag/NAME, calibrated by its own stage "
                + "(calibration_NAME) and fused with the primary by the kalman filter; may be repeated",
            repeatable: true),
        OptionHelp(
            "--extra-mag-rotation", "NAME=ROTATION",
            "an extra magnetometer's mounting (mast=yaw_90, mast=0,0,-90, mast=tf), as --mag-rotation; may be repeated",
            repeatable: true),
    ]

    /// The names of the `--extra-magnetometer` entries, checked here so a mistake names the option (a
    /// name becomes part of a stage's name and of topics).
    static func extraMagnetometerNames(_ a: Arguments, command: String) throws -> [String] {
        var names: [String] = []
        for entry in a.strings("--extra-magnetometer") {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[1].isEmpty else {
                throw UsageError(
                    message: "--extra-magnetometer \(entry): expected NAME=TOPIC (mast=/mast/mag)", command: command)
            }
            if let problem = magnetometerNameProblem(parts[0]) {
                throw UsageError(message: "--extra-magnetometer \(entry): \(problem)", command: command)
            }
            guard !names.contains(parts[0]) else {
                throw UsageError(
                    message: "--extra-magnetometer: the name '\(parts[0])' is given twice", command: command)
            }
            names.append(parts[0])
        }
        for entry in a.strings("--extra-mag-rotation") {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, names.contains(parts[0]) else {
                let known = names.isEmpty ? "none was given" : "given: " + names.joined(separator: ", ")
                throw UsageError(
                    message: "--extra-mag-rotation \(entry): expected NAME=ROTATION for a NAME of --extra-magnetometer "
                        + "(\(known))", command: command)
            }
            if case .failure(let refusal) = SettingSpec.rotationValue(parts[1], choices: ["tf"]) {
                throw UsageError(message: "--extra-mag-rotation \(entry): must be \(refusal.detail)", command: command)
            }
        }
        return names
    }

    static func stages(
        after source: String, calibrate: Bool, _ a: Arguments? = nil, calibrationFile: String? = nil,
        learnIntoFile: Bool = false
    ) -> [(String, YAMLValue)] {
        // Names checked by `checkMounting` before the graph is made.
        let mounting = ProcessingGraphStages.Mounting(
            imuRotation: a?.string("--imu-rotation"), magRotation: a?.string("--mag-rotation"),
            extraMagnetometers: (a?.strings("--extra-magnetometer") ?? []).map { String($0.prefix { $0 != "=" }) },
            extraRotations: a?.strings("--extra-mag-rotation") ?? [])
        return ProcessingGraphStages.stages(
            after: source, calibrate: calibrate, mounting: mounting, calibrationFile: calibrationFile,
            learnIntoFile: learnIntoFile)
    }
}
