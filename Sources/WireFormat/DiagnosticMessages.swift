/// diagnostic_msgs/msg/DiagnosticArray: what `/diagnostics` carries, read by diagnostic_aggregator,
/// rqt_robot_monitor and Foxglove. One status per part of the system, each with a level, a one-line
/// message and key/value pairs.
public struct DiagnosticArrayMessage: RosMessage, Equatable {
    public static let typeName = "diagnostic_msgs/msg/DiagnosticArray"

    /// DiagnosticStatus levels (the message's byte constants).
    public enum Level: UInt8, Sendable, Comparable {
        case ok = 0, warn = 1, error = 2, stale = 3
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    }

    public struct Status: Sendable, Equatable {
        public var level: Level
        /// "node: part", as diagnostic_updater names them.
        public var name: String
        public var message: String
        public var hardwareId: String
        public var values: [(key: String, value: String)]

        public init(
            level: Level, name: String, message: String, hardwareId: String, values: [(key: String, value: String)]
        ) {
            self.level = level
            self.name = name
            self.message = message
            self.hardwareId = hardwareId
            self.values = values
        }

        public static func == (a: Status, b: Status) -> Bool {
            a.level == b.level && a.name == b.name && a.message == b.message && a.hardwareId == b.hardwareId
                && a.values.map(\.key) == b.values.map(\.key) && a.values.map(\.value) == b.values.map(\.value)
        }
    }

    public var header: RosHeader
    public var status: [Status]

    public init(header: RosHeader, status: [Status]) {
        self.header = header
        self.status = status
    }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        header = try RosHeader(&r)
        let count = try r.uint32("status.length")
        // Each status is at least 20 bytes (a level and four lengths): more than the rest is damage.
        guard Int(count) <= cdr.count / 20 else {
            throw CDRError.lengthTooLarge(field: "status", length: Int(count), offset: 0)
        }
        status = []
        for _ in 0..<count {
            let raw = try r.uint8("level")
            let level = Level(rawValue: raw) ?? .error
            let name = try r.string("name"), message = try r.string("message"), hardware = try r.string("hardware_id")
            let pairs = try r.uint32("values.length")
            guard Int(pairs) <= cdr.count / 8 else {
                throw CDRError.lengthTooLarge(field: "values", length: Int(pairs), offset: 0)
            }
            var values: [(key: String, value: String)] = []
            for _ in 0..<pairs { values.append((try r.string("key"), try r.string("value"))) }
            status.append(Status(level: level, name: name, message: message, hardwareId: hardware, values: values))
        }
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 64 + status.count * 256)
        header.encode(&w)
        w.uint32(UInt32(status.count))
        for s in status {
            w.uint8(s.level.rawValue)
            w.string(s.name)
            w.string(s.message)
            w.string(s.hardwareId)
            w.uint32(UInt32(s.values.count))
            for v in s.values {
                w.string(v.key)
                w.string(v.value)
            }
        }
        return w.take()
    }
}
