/// ROS 2 message definitions in the `ros2msg` form MCAP embeds as schemas: the type's own .msg text,
/// then every dependency as a line of 80 "=", "MSG: pkg/Type" and its text.
/// These are the definitions of the ROS 2 Humble/Jazzy releases, comments removed.
public enum MessageDefinitions {
    static let separator = "\n================================================================================\n"

    static let time = "int32 sec\nuint32 nanosec"
    static let header = "builtin_interfaces/Time stamp\nstring frame_id"
    static let quaternion = "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1"
    static let vector3 = "float64 x\nfloat64 y\nfloat64 z"
    static let navSatStatus = """
        int8 STATUS_NO_FIX = -1
        int8 STATUS_FIX = 0
        int8 STATUS_SBAS_FIX = 1
        int8 STATUS_GBAS_FIX = 2
        int8 status
        uint16 SERVICE_GPS = 1
        uint16 SERVICE_GLONASS = 2
        uint16 SERVICE_COMPASS = 4
        uint16 SERVICE_GALILEO = 8
        uint16 service
        """

    static func dependency(_ name: String, _ text: String) -> String { separator + "MSG: " + name + "\n" + text }

    public static let imu = """
        std_msgs/Header header
        geometry_msgs/Quaternion orientation
        float64[9] orientation_covariance
        geometry_msgs/Vector3 angular_velocity
        float64[9] angular_velocity_covariance
        geometry_msgs/Vector3 linear_acceleration
        float64[9] linear_acceleration_covariance
        """ + dependency("std_msgs/Header", header) + dependency("builtin_interfaces/Time", time)
        + dependency("geometry_msgs/Quaternion", quaternion) + dependency("geometry_msgs/Vector3", vector3)

    public static let magneticField = """
        std_msgs/Header header
        geometry_msgs/Vector3 magnetic_field
        float64[9] magnetic_field_covariance
        """ + dependency("std_msgs/Header", header) + dependency("builtin_interfaces/Time", time)
        + dependency("geometry_msgs/Vector3", vector3)

    public static let navSatFix = """
        uint8 COVARIANCE_TYPE_UNKNOWN = 0
        uint8 COVARIANCE_TYPE_APPROXIMATED = 1
        uint8 COVARIANCE_TYPE_DIAGONAL_KNOWN = 2
        uint8 COVARIANCE_TYPE_KNOWN = 3
        std_msgs/Header header
        sensor_msgs/NavSatStatus status
        float64 latitude
        float64 longitude
        float64 altitude
        float64[9] position_covariance
        uint8 position_covariance_type
        """ + dependency("std_msgs/Header", header) + dependency("builtin_interfaces/Time", time)
        + dependency("sensor_msgs/NavSatStatus", navSatStatus)

    public static let heading =
        HeadingMessage.definitionText + dependency("std_msgs/Header", header)
        + dependency("builtin_interfaces/Time", time) + dependency("geometry_msgs/Quaternion", quaternion)
        + dependency("geometry_msgs/Vector3", vector3)

    /// The .msg files of gyrocompass_msgs without comments (checked against the files by a test).
    public static let calibrationStatusText = """
        uint8 STATE_UNCALIBRATED=0
        uint8 STATE_COLLECTING=1
        uint8 STATE_CALIBRATED=2
        uint8 STATE_DEGRADED=3
        std_msgs/Header header
        uint8 state
        bool prompt
        float64 progress
        float64 coverage
        float64 rms_residual
        float64 field_strength
        geometry_msgs/Vector3 hard_iron
        float64[9] soft_iron
        geometry_msgs/Vector3 gyro_bias
        """
    public static let interferenceStatusText = """
        std_msgs/Header header
        bool disturbed
        uint16 flags
        uint32 samples_assessed
        uint32 samples_flagged
        uint32 disturbed_periods
        float64 disturbed_seconds
        float64 expected_strength
        float64 expected_dip
        uint32 reasons
        """
    public static let calibrationStatus =
        calibrationStatusText + dependency("std_msgs/Header", header)
        + dependency("builtin_interfaces/Time", time) + dependency("geometry_msgs/Vector3", vector3)
    public static let interferenceStatus =
        interferenceStatusText + dependency("std_msgs/Header", header)
        + dependency("builtin_interfaces/Time", time)

    /// The definition for a type name, if this module knows it.
    public static func definition(for typeName: String) -> String? {
        switch typeName {
        case ImuMessage.typeName: return imu
        case MagneticFieldMessage.typeName: return magneticField
        case NavSatFixMessage.typeName: return navSatFix
        case HeadingMessage.typeName: return heading
        case CalibrationStatusMessage.typeName: return calibrationStatus
        case InterferenceStatusMessage.typeName: return interferenceStatus
        default: return nil
        }
    }
}
