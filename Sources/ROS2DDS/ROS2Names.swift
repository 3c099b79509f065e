/// How ROS 2 names appear on DDS (the conventions of rmw_cyclonedds and rmw_fastrtps):
///   topic `imu/data` in namespace `/robot` -> DDS topic `rt/robot/imu/data`
///   type `sensor_msgs/msg/Imu`             -> DDS type `sensor_msgs::msg::dds_::Imu_`
public enum ROS2Names {
    /// The prefix ROS 2 puts before every topic name (services and actions use others).
    public static let topicPrefix = "rt"

    /// The fully qualified ROS name of `name` in `namespace` ("/ns/name"); an absolute name ignores
    /// the namespace. Throws for names ROS 2 refuses (empty tokens, characters outside
    /// [A-Za-z0-9_], a token starting with a digit, `~` or substitutions).
    public static func qualified(_ name: String, namespace: String = "/") throws(ROS2NameError) -> String {
        try validate(name, what: "topic name")
        var namespace = namespace
        while namespace.count > 1 && namespace.hasSuffix("/") { namespace.removeLast() }
        if namespace != "/" && !namespace.isEmpty { try validate(namespace, what: "namespace") }
        if name.hasPrefix("/") { return name }
        let ns = namespace.hasPrefix("/") ? namespace : "/" + namespace
        return (ns.hasSuffix("/") ? ns : ns + "/") + name
    }

    /// The DDS topic a ROS topic travels on.
    public static func ddsTopic(_ name: String, namespace: String = "/") throws(ROS2NameError) -> String {
        topicPrefix + (try qualified(name, namespace: namespace))
    }

    /// The ROS topic of a DDS topic, or nil for one that is not a ROS topic (no `rt/` prefix).
    public static func rosTopic(ofDDSTopic dds: String) -> String? {
        dds.hasPrefix(topicPrefix + "/") ? String(dds.dropFirst(topicPrefix.count)) : nil
    }

    /// `pkg/msg/Name` -> `pkg::msg::dds_::Name_`.
    public static func ddsType(_ rosType: String) throws(ROS2NameError) -> String {
        let parts = rosType.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(isNameCharacter) }) else {
            throw ROS2NameError(name: rosType, what: "message type", problem: "expected package/msg/Name")
        }
        return "\(parts[0])::\(parts[1])::dds_::\(parts[2])_"
    }

    /// `pkg::msg::dds_::Name_` -> `pkg/msg/Name`, or nil for a type name of another form.
    public static func rosType(ofDDSType dds: String) -> String? {
        let parts = dds.components(separatedBy: "::")
        guard parts.count == 4, parts[2] == "dds_", parts[3].hasSuffix("_"), parts[3].count > 1 else { return nil }
        return "\(parts[0])/\(parts[1])/\(parts[3].dropLast())"
    }

    static func isNameCharacter(_ c: Character) -> Bool {
        c == "_" || (c.isASCII && (c.isLetter || c.isNumber))
    }

    static func validate(_ name: String, what: String) throws(ROS2NameError) {
        func fail(_ problem: String) throws(ROS2NameError) -> Never {
            throw ROS2NameError(name: name, what: what, problem: problem)
        }
        guard !name.isEmpty else { try fail("empty") }
        let body = name.hasPrefix("/") ? name.dropFirst() : Substring(name)
        guard !body.isEmpty || what == "namespace" else { try fail("no name after '/'") }
        for token in body.split(separator: "/", omittingEmptySubsequences: false) {
            guard !token.isEmpty else { try fail("empty token (two '/' in a row, or a trailing '/')") }
            guard let first = token.first, !first.isNumber else { try fail("token '\(token)' starts with a digit") }
            guard token.allSatisfy(isNameCharacter) else {
                try fail("token '\(token)' has a character outside A-Z, a-z, 0-9 and _")
            }
        }
    }
}

/// A name ROS 2 would refuse.
public struct ROS2NameError: Error, CustomStringConvertible, Equatable {
    public let name: String, what: String, problem: String
    public var description: String { "invalid ROS 2 \(what) '\(name)': \(problem)" }
}
