/// Topic names inside a pipeline and on its publish endpoints (bags spell them with a leading
/// slash). Defined here once: the stages publish them and the bus interns them (`WireFrame`).
public enum PipelineTopics {
    public static let imuRaw = "imu/data_raw"
    public static let magnetometer = "imu/mag"
    public static let heading = "heading"
    public static let imuFused = "imu/data"
    public static let fix = "fix"
    public static let direction = "direction"
    public static let calibrationStatus = "calibration/status"
    public static let interferenceStatus = "interference/status"
    /// The current drawn by the motors near the magnetometer (sensor_msgs/BatteryState).
    public static let motorCurrent = "motor/current"
    /// Static transforms between frames (tf2_msgs/TFMessage), as /tf_static carries them: how the
    /// sensors are mounted on the robot.
    public static let tfStatic = "tf_static"
    /// A GNSS receiver's velocity over ground (geometry_msgs/TwistWithCovarianceStamped, ENU).
    public static let gnssVelocity = "gnss/velocity"
    /// A dual-antenna GNSS receiver's heading (sensor_msgs/Imu orientation with its yaw variance).
    public static let gnssHeading = "gnss/heading"

    /// A topic as the pipeline spells it: ROS's leading slash, if written, removed.
    public static func named(_ topic: String) -> String { topic.hasPrefix("/") ? String(topic.dropFirst()) : topic }

    /// The same name as a bag spells it, with the slash if it lacks one and without it if it has one.
    public static func otherSpelling(_ topic: String) -> String {
        topic.hasPrefix("/") ? String(topic.dropFirst()) : "/" + topic
    }

    /// Every topic above (string literals: immortal, so handing one out costs no reference counting).
    public static let all = [
        imuRaw, magnetometer, heading, imuFused, fix, direction, calibrationStatus, interferenceStatus,
        motorCurrent, tfStatic, gnssVelocity, gnssHeading,
    ]
}

/// The message types the pipeline itself reads and writes.
public enum PipelineMessageTypes {
    public static let all = [
        ImuMessage.typeName, MagneticFieldMessage.typeName, NavSatFixMessage.typeName, HeadingMessage.typeName,
        CalibrationStatusMessage.typeName, InterferenceStatusMessage.typeName, BatteryStateMessage.typeName,
        TFMessage.typeName, TwistWithCovarianceStampedMessage.typeName,
    ]
}
