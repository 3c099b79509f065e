import YAML

/// The processing every command that replays runs, the same as the built-in graph and the files in
/// Pipelines/: online calibration, then fusion (whose gate is the one verdict on each magnetometer
/// reading). `--no-calibration` removes the calibration stage, with the same meaning everywhere.
enum ProcessingGraph {
    static let noCalibrationOption = OptionHelp(
        "--no-calibration", nil, "fusion alone: no online calibration stage (the magnetometer as recorded)")

    /// The stages after `source`, in order; the last is `fusion`.
    static func stages(after source: String, calibrate: Bool) -> [(String, YAMLValue)] {
        var stages: [(String, YAMLValue)] = []
        var upstream = source
        if calibrate {
            stages.append(
                (
                    "calibration",
                    .mapping([
                        ("type", .string("calibration")), ("inputs", .sequence([.string(source)])),
                        ("online", .string("true")), ("prompt", .string("false")),
                    ])
                ))
            upstream = "calibration"
        }
        stages.append(("fusion", .mapping([("type", .string("fusion")), ("inputs", .sequence([.string(upstream)]))])))
        return stages
    }
}
