import CompassCore

/// Reads the input types through the schema a bag carries. When the bag's definition has the same
/// wire layout as ours, payloads pass through untouched (the fast path); when it differs, the fields
/// the pipeline needs are decoded by name through the bag's schema and re-encoded in the standard
/// layout; when they are missing, construction fails and says which.
public struct SchemaAdapter: Sendable {
    public enum Mode: Sendable, Equatable { case passThrough, byName }
    public let type: String
    public let mode: Mode
    let schema: MessageSchema?

    /// The field paths each supported type needs.
    static let required: [String: [String]] = [
        ImuMessage.typeName: [
            "header.stamp.sec", "header.stamp.nanosec", "header.frame_id", "angular_velocity.x", "angular_velocity.y",
            "angular_velocity.z", "linear_acceleration.x", "linear_acceleration.y", "linear_acceleration.z",
        ],
        MagneticFieldMessage.typeName: [
            "header.stamp.sec", "header.stamp.nanosec", "header.frame_id", "magnetic_field.x",
            "magnetic_field.y", "magnetic_field.z",
        ],
    ]

    /// - Parameters:
    ///   - type: the ROS type name the topic claims.
    ///   - schemaEncoding/schemaText: what the bag carries for it (nil: no schema, trust the type name).
    public init(type: String, schemaEncoding: String?, schemaText: String?) throws(MessageSchema.SchemaError) {
        self.type = type
        guard let needed = Self.required[type], let ours = MessageDefinitions.definition(for: type) else {
            throw MessageSchema.SchemaError(
                type: type,
                message: "not an input type the pipeline reads (\(Self.required.keys.sorted().joined(separator: ", ")))"
            )
        }
        guard let schemaText, !schemaText.isEmpty, schemaEncoding == nil || schemaEncoding == "ros2msg" else {
            if let e = schemaEncoding, e != "ros2msg", !(schemaText ?? "").isEmpty {
                throw MessageSchema.SchemaError(
                    type: type, message: "schema encoding '\(e)' is not supported (ros2msg is)")
            }
            mode = .passThrough
            schema = nil
            return
        }
        let theirs = try MessageSchema(name: type, text: schemaText)
        if theirs.layout == (try MessageSchema(name: type, text: ours)).layout {
            mode = .passThrough
            schema = nil
            return
        }
        let leaves = Set(theirs.layout.map { String($0.split(separator: ":").first!) })
        if let missing = needed.first(where: { !leaves.contains($0) }) {
            throw MessageSchema.SchemaError(type: type, message: "the bag's definition has no field '\(missing)'")
        }
        mode = .byName
        schema = theirs
    }

    /// The payload in the standard layout.
    public func standardPayload(_ payload: [UInt8]) throws(CDRError) -> [UInt8] {
        guard mode == .byName, let schema else { return payload }
        let v = try schema.decode(payload)
        func d(_ path: String) -> Double { v[path]?.double ?? .nan }
        let stampSec = Int32(clamping: Int64(v["header.stamp.sec"]?.double ?? 0))
        let stampNs = UInt32(clamping: Int64(v["header.stamp.nanosec"]?.double ?? 0))
        var frame = ""
        if case .text(let f)? = v["header.frame_id"] { frame = f }
        let header = RosHeader(stamp: RosTime(sec: stampSec, nanosec: stampNs), frameId: frame)
        switch type {
        case ImuMessage.typeName:
            return ImuMessage(
                header: header, orientation: Quaternion(w: 1, x: 0, y: 0, z: 0), orientationCovariance: .notProvided,
                angularVelocity: Vector3(d("angular_velocity.x"), d("angular_velocity.y"), d("angular_velocity.z")),
                angularVelocityCovariance: .zero,
                linearAcceleration: Vector3(
                    d("linear_acceleration.x"), d("linear_acceleration.y"), d("linear_acceleration.z")),
                linearAccelerationCovariance: .zero
            ).cdr()
        default:
            return MagneticFieldMessage(
                header: header,
                magneticField: Vector3(d("magnetic_field.x"), d("magnetic_field.y"), d("magnetic_field.z")),
                magneticFieldCovariance: .zero
            ).cdr()
        }
    }
}
