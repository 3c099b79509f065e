/// Topic names inside a pipeline and on its publish endpoints (bags spell them with a leading
/// slash). Defined here once: the stages publish them and the bus interns them (`WireFrame`).
public enum PipelineTopics {
    public static let imuRaw = "imu/data_raw"
    public static let magnetometer = "imu/mag"
    /// The primary magnetometer's name beside the others' (the NAME of imu/mag/NAME) in logs, the
    /// summary, `watch`, the report and the diagnostics.
    public static let primaryMagnetometerName = "mag"
    public static let heading = "heading"
    public static let imuFused = "imu/data"
    public static let fix = "fix"
    public static let direction = "direction"
    public static let calibrationStatus = "calibration/status"
    public static let interferenceStatus = "interference/status"
    /// The current drawn by the motors near the magnetometer (sensor_msgs/BatteryState).
    public static let motorCurrent = "motor/current"
    /// The motor-current compensation a calibration stage applies (geometry_msgs/Vector3Stamped: the
    /// field the motors add per ampere, microtesla per ampere, magnetometer axes), sent whenever it
    /// changes; calibration/motor/NAME for another magnetometer.
    public static let motorCompensation = "calibration/motor"
    /// The health a publish sink makes (diagnostic_msgs/DiagnosticArray), by convention.
    public static let diagnostics = "diagnostics"
    /// Static transforms between frames (tf2_msgs/TFMessage), as /tf_static carries them: how the
    /// sensors are mounted on the robot.
    public static let tfStatic = "tf_static"
    /// A GNSS receiver's velocity over ground (geometry_msgs/TwistWithCovarianceStamped, ENU).
    public static let gnssVelocity = "gnss/velocity"
    /// A dual-antenna GNSS receiver's heading (sensor_msgs/Imu orientation with its yaw variance).
    public static let gnssHeading = "gnss/heading"
    /// The simulator's true orientation (sensor_msgs/Imu, the orientation only, ENU with y magnetic
    /// north), for a summary that scores the headings against it.
    public static let truth = "truth/orientation"

    /// A magnetometer besides the primary: imu/mag/NAME; its calibration stage's status goes on
    /// calibration/status/NAME, the fusion stage's verdicts on interference/status/NAME. An empty name
    /// is the primary.
    public static func magnetometer(named name: String) -> String {
        name.isEmpty ? magnetometer : magnetometer + "/" + name
    }
    public static func calibrationStatus(named name: String) -> String {
        name.isEmpty ? calibrationStatus : calibrationStatus + "/" + name
    }
    public static func interferenceStatus(named name: String) -> String {
        name.isEmpty ? interferenceStatus : interferenceStatus + "/" + name
    }
    public static func motorCompensation(named name: String) -> String {
        name.isEmpty ? motorCompensation : motorCompensation + "/" + name
    }
    /// The name of the magnetometer besides the primary that `topic` carries; nil for any other topic.
    public static func otherMagnetometerName(_ topic: String) -> String? { suffix(of: topic, after: magnetometer) }
    /// The magnetometer whose calibration status `topic` carries; nil for any other topic.
    public static func otherCalibrationName(_ topic: String) -> String? { suffix(of: topic, after: calibrationStatus) }
    /// The magnetometer whose interference status `topic` carries (interference/status/NAME); nil otherwise.
    public static func otherInterferenceName(_ topic: String) -> String? {
        suffix(of: topic, after: interferenceStatus)
    }
    /// The topic a magnetometer's own topic is named after (imu/mag for imu/mag/NAME, and so for
    /// calibration/status/NAME and interference/status/NAME); nil for any other topic.
    public static func perMagnetometerBase(of topic: String) -> String? {
        [magnetometer, calibrationStatus, interferenceStatus, motorCompensation].first {
            suffix(of: topic, after: $0) != nil
        }
    }
    static func suffix(of topic: String, after base: String) -> String? {
        guard topic.count > base.count + 1, topic.hasPrefix(base + "/") else { return nil }
        return String(topic.dropFirst(base.count + 1))
    }

    /// A topic as the pipeline spells it: ROS's leading slash, if written, removed.
    public static func named(_ topic: String) -> String { topic.hasPrefix("/") ? String(topic.dropFirst()) : topic }

    /// The same name as a bag spells it, with the slash if it lacks one and without it if it has one.
    public static func otherSpelling(_ topic: String) -> String {
        topic.hasPrefix("/") ? String(topic.dropFirst()) : "/" + topic
    }

    /// Every topic above (string literals: immortal, so handing one out costs no reference counting).
    public static let all = [
        imuRaw, magnetometer, heading, imuFused, fix, direction, calibrationStatus, interferenceStatus,
        motorCurrent, tfStatic, gnssVelocity, gnssHeading, motorCompensation, diagnostics, truth,
    ]
}

/// The message types the pipeline itself reads and writes.
public enum PipelineMessageTypes {
    public static let all = [
        ImuMessage.typeName, MagneticFieldMessage.typeName, NavSatFixMessage.typeName, HeadingMessage.typeName,
        CalibrationStatusMessage.typeName, InterferenceStatusMessage.typeName, BatteryStateMessage.typeName,
        TFMessage.typeName, TwistWithCovarianceStampedMessage.typeName, Vector3StampedMessage.typeName,
        DiagnosticArrayMessage.typeName,
    ]
}
