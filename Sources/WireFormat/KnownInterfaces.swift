import Foundation

/// Message definitions this project knows without a bag carrying them: the ROS 2 interface packages a
/// bag most often holds (builtin_interfaces, std_msgs, geometry_msgs, sensor_msgs, nav_msgs, tf2_msgs,
/// diagnostic_msgs; `KnownInterfacesData.swift`, generated) and the pipeline's own types. Older
/// rosbag2 sqlite3 bags store no definitions; with these their messages still decode by name.
public enum KnownInterfaces {
    /// The full `ros2msg` definition of `typeName` ("pkg/msg/Type"): its own text, then every
    /// dependency after a separator line and "MSG: pkg/Type", as MCAP embeds schemas; nil if unknown.
    public static func definition(for typeName: String) -> String? {
        if let own = MessageDefinitions.definition(for: typeName) { return own }
        guard let own = ownDefinitions[typeName] else { return nil }
        var text = own.joined(separator: "\n") + "\n"
        var seen: Set<String> = [typeName]
        var queue = dependencies(of: typeName)
        while !queue.isEmpty {
            let dependency = queue.removeFirst()
            guard !seen.contains(dependency), let lines = ownDefinitions[dependency] else { continue }
            seen.insert(dependency)
            let parts = dependency.split(separator: "/")
            text += MessageDefinitions.dependency("\(parts[0])/\(parts[2])", lines.joined(separator: "\n") + "\n")
            queue += dependencies(of: dependency)
        }
        return text
    }

    /// The parsed schema of a known type, made once per type and process (decoding by definition
    /// happens per message: the text is assembled and parsed only the first time).
    public static func schema(for typeName: String) -> MessageSchema? {
        schemaLock.lock()
        defer { schemaLock.unlock() }
        if let cached = schemas[typeName] { return cached }
        let made = definition(for: typeName).flatMap { try? MessageSchema(name: typeName, text: $0) }
        schemas[typeName] = .some(made)
        return made
    }

    private static let schemaLock = NSLock()
    nonisolated(unsafe) private static var schemas: [String: MessageSchema?] = [:]

    /// The message types a known type's fields use, as "pkg/msg/Type".
    static func dependencies(of typeName: String) -> [String] {
        let package = String(typeName.split(separator: "/").first ?? "")
        return (ownDefinitions[typeName] ?? []).compactMap { line in
            guard let first = line.split(separator: " ").first, !line.contains("=") else { return nil }
            var type = String(first)
            if let bracket = type.firstIndex(of: "[") { type = String(type[..<bracket]) }
            if MessageSchema.primitives.contains(type) || type.hasPrefix("string<=") { return nil }
            if type == "Header" { return "std_msgs/msg/Header" }
            let parts = type.split(separator: "/")
            return parts.count == 2 ? "\(parts[0])/msg/\(parts[1])" : "\(package)/msg/\(type)"
        }
    }
}
