import YAML

/// The processing between a source and the sinks that `fusion-node replay`, `report` and `calibrate`
/// build, and the library's replay: mounting (when a rotation is given), calibration (online, or from a
/// file; one stage per magnetometer) and fusion. Declared once here so every user of the graph gets the
/// same one.
public enum ProcessingGraphStages {
    /// The sensors' mountings, as the command line's --imu-rotation, --mag-rotation (a rotation name,
    /// "r,p,y" degrees, "tf" or "auto"), --extra-magnetometer NAME=... and --extra-mag-rotation
    /// NAME=ROTATION give them.
    public struct Mounting: Sendable {
        public var imuRotation: String?
        public var magRotation: String?
        /// Names of the magnetometers besides the primary.
        public var extraMagnetometers: [String]
        /// NAME=ROTATION entries.
        public var extraRotations: [String]

        public init(
            imuRotation: String? = nil, magRotation: String? = nil, extraMagnetometers: [String] = [],
            extraRotations: [String] = []
        ) {
            self.imuRotation = imuRotation
            self.magRotation = magRotation
            self.extraMagnetometers = extraMagnetometers
            self.extraRotations = extraRotations
        }
    }

    /// The stages after `source`: mount (when a rotation is given), calibration (online unless
    /// `calibrationFile` is given; learning into it with `learnIntoFile`) when `calibrate`, then fusion.
    public static func stages(
        after source: String, calibrate: Bool, mounting: Mounting = Mounting(), calibrationFile: String? = nil,
        learnIntoFile: Bool = false
    ) -> [(String, YAMLValue)] {
        var stages: [(String, YAMLValue)] = []
        var upstream = source
        let imu = mounting.imuRotation
        let detect = mounting.magRotation == "auto"
        let mag = detect ? nil : mounting.magRotation
        let extras = mounting.extraMagnetometers
        let extraRotations = mounting.extraRotations
        if imu != nil || mag != nil || !extraRotations.isEmpty {
            func value(_ text: String) -> YAMLValue {
                text.contains(",") ? .sequence(text.split(separator: ",").map { .string(String($0)) }) : .string(text)
            }
            var mount: [(String, YAMLValue)] = [("type", .string("mount")), ("inputs", .sequence([.string(source)]))]
            if let imu { mount.append(("imu_rotation", value(imu))) }
            if let mag { mount.append(("mag_rotation", value(mag))) }
            if !extraRotations.isEmpty {
                mount.append(("extra_mag_rotations", .sequence(extraRotations.map { .string($0) })))
            }
            stages.append(("mount", .mapping(mount)))
            upstream = "mount"
        }
        if calibrate {
            // The primary's calibration, then each extra magnetometer's own (online, or from the same
            // file, keyed by name); only the primary's finds its mounting.
            let stored: [(String, YAMLValue)] =
                calibrationFile.map { [("file", .string($0)), ("online", .string(learnIntoFile ? "true" : "false"))] }
                ?? [("online", .string("true"))]
            for name in [nil] + extras.map(Optional.some) {
                let stage = name.map { "calibration_\($0)" } ?? "calibration"
                var settings: [(String, YAMLValue)] = [
                    ("type", .string("calibration")), ("inputs", .sequence([.string(upstream)])),
                ]
                if let name { settings.append(("magnetometer", .string(name))) }
                settings += stored + [("prompt", .string("false"))]
                if name == nil && detect { settings.append(("detect_rotation", .string("true"))) }
                stages.append((stage, .mapping(settings)))
                upstream = stage
            }
        }
        stages.append(("fusion", .mapping([("type", .string("fusion")), ("inputs", .sequence([.string(upstream)]))])))
        return stages
    }
}
