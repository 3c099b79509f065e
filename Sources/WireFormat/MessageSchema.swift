/// A ROS 2 message definition in the `ros2msg` form bags embed: the type's own fields, then each
/// dependency after a line of '=' and "MSG: pkg/Type". Constants are read and kept apart.
public struct MessageSchema: Sendable, Equatable {
    /// One field type.
    public indirect enum FieldType: Sendable, Equatable, CustomStringConvertible {
        case primitive(String)  // bool, byte, char, int8 ... float64, string, wstring
        case message(String)  // normalised "pkg/Type"
        case fixedArray(FieldType, Int)
        case sequence(FieldType, bound: Int?)  // T[] or T[<=N]

        public var description: String {
            switch self {
            case .primitive(let p): return p
            case .message(let m): return m
            case .fixedArray(let t, let n): return "\(t)[\(n)]"
            case .sequence(let t, let b): return "\(t)[\(b.map { "<=\($0)" } ?? "")]"
            }
        }
    }
    public struct Field: Sendable, Equatable {
        public var name: String
        public var type: FieldType
    }

    /// Why a schema could not be read or used.
    public struct SchemaError: Error, Sendable, Equatable, CustomStringConvertible {
        public var type: String
        public var message: String
        public var description: String { "schema of \(type): \(message)" }
    }

    public let name: String
    /// Every type's fields, by normalised name ("pkg/Type"), the top-level type included.
    public let definitions: [String: [Field]]

    static let primitives: Set<String> = [
        "bool", "byte", "char", "int8", "uint8", "int16", "uint16", "int32", "uint32",
        "int64", "uint64", "float32", "float64", "string", "wstring",
    ]

    /// "pkg/msg/Type" and "pkg/Type" both become "pkg/Type"; a bare "Type" is resolved in `package`.
    static func normalise(_ name: String, package: String) -> String {
        let parts = name.split(separator: "/").map(String.init)
        if parts.count == 3 && parts[1] == "msg" { return parts[0] + "/" + parts[2] }
        if parts.count == 2 { return name }
        if name == "Header" { return "std_msgs/Header" }
        return package + "/" + name
    }

    /// Parses `text` as the definition of `name` (e.g. "sensor_msgs/msg/Imu").
    public init(name: String, text: String) throws(SchemaError) {
        self.name = Self.normalise(name, package: String(name.split(separator: "/").first ?? ""))
        var definitions: [String: [Field]] = [:]
        var current = self.name
        var fields: [Field] = []
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = Substring(rawLine)
            if let hash = line.firstIndex(of: "#") { line = line[..<hash] }
            let trimmed = line.trimmingWhitespace
            if trimmed.isEmpty { continue }
            if trimmed.allSatisfy({ $0 == "=" }) {
                definitions[current] = fields
                fields = []
                continue
            }
            if trimmed.hasPrefix("MSG:") {
                current = Self.normalise(String(trimmed.dropFirst(4).trimmingWhitespace), package: "")
                continue
            }
            let parts = trimmed.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard parts.count >= 2 else { throw SchemaError(type: name, message: "cannot read the line '\(trimmed)'") }
            if parts[1].contains("=") || (parts.count > 2 && parts[2].hasPrefix("=")) { continue }  // a constant
            let package = String(current.split(separator: "/").first ?? "")
            fields.append(
                Field(name: String(parts[1]), type: try Self.fieldType(String(parts[0]), package: package, in: name)))
        }
        definitions[current] = fields
        self.definitions = definitions
        // Every referenced message type must be defined.
        for (_, fs) in definitions { for f in fs { try checkDefined(f.type) } }
    }

    func checkDefined(_ t: FieldType) throws(SchemaError) {
        switch t {
        case .primitive: return
        case .message(let m):
            if m == "builtin_interfaces/Time" || m == "builtin_interfaces/Duration" || definitions[m] != nil { return }
            throw SchemaError(type: name, message: "uses \(m), which the schema does not define")
        case .fixedArray(let e, _), .sequence(let e, _): try checkDefined(e)
        }
    }

    static func fieldType(_ text: String, package: String, in type: String) throws(SchemaError) -> FieldType {
        if let open = text.firstIndex(of: "[") {
            guard text.hasSuffix("]") else { throw SchemaError(type: type, message: "bad array type '\(text)'") }
            let element = try fieldType(String(text[..<open]), package: package, in: type)
            let inner = text[text.index(after: open)..<text.index(before: text.endIndex)]
            if inner.isEmpty { return .sequence(element, bound: nil) }
            if inner.hasPrefix("<=") {
                guard let b = Int(inner.dropFirst(2)) else {
                    throw SchemaError(type: type, message: "bad bound in '\(text)'")
                }
                return .sequence(element, bound: b)
            }
            guard let n = Int(inner), n >= 0 else {
                throw SchemaError(type: type, message: "bad array size in '\(text)'")
            }
            return .fixedArray(element, n)
        }
        if text.hasPrefix("string<=") || text.hasPrefix("wstring<=") {  // bounded string
            return .primitive(String(text.prefix { $0 != "<" }))
        }
        if primitives.contains(text) { return .primitive(text) }
        if text == "time" || text == "duration" {
            return .message("builtin_interfaces/" + (text == "time" ? "Time" : "Duration"))
        }
        return .message(normalise(text, package: package))
    }

    /// The fields of a type; builtin_interfaces/Time and Duration are built in.
    func fields(of type: String) -> [Field] {
        if type == "builtin_interfaces/Time" || type == "builtin_interfaces/Duration" {
            return [Field(name: "sec", type: .primitive("int32")), Field(name: "nanosec", type: .primitive("uint32"))]
        }
        return definitions[type] ?? []
    }

    /// The wire layout: every leaf field in order, with its dotted path. Two schemas with the same
    /// layout decode the same bytes the same way.
    public var layout: [String] {
        var out: [String] = []
        func walk(_ type: String, _ prefix: String) {
            for f in fields(of: type) {
                let path = prefix.isEmpty ? f.name : prefix + "." + f.name
                if case .message(let m) = f.type { walk(m, path) } else { out.append(path + ":" + f.type.description) }
            }
        }
        walk(name, "")
        return out
    }
}

/// A decoded value.
public indirect enum DecodedValue: Sendable, Equatable {
    case number(Double)
    case integer(Int64)
    /// A uint64, whose upper half does not fit an Int64.
    case unsigned(UInt64)
    case boolean(Bool)
    case text(String)
    case list([DecodedValue])
    case record([(String, DecodedValue)])

    public static func == (a: DecodedValue, b: DecodedValue) -> Bool {
        switch (a, b) {
        case let (.number(x), .number(y)): return x == y || (x.isNaN && y.isNaN)
        case let (.integer(x), .integer(y)): return x == y
        case let (.boolean(x), .boolean(y)): return x == y
        case let (.unsigned(x), .unsigned(y)): return x == y
        case let (.text(x), .text(y)): return x == y
        case let (.list(x), .list(y)): return x == y
        case let (.record(x), .record(y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The value at a dotted path ("header.stamp.sec", "angular_velocity.x").
    public subscript(path: String) -> DecodedValue? {
        var node = self
        for key in path.split(separator: ".") {
            guard case .record(let fields) = node, let next = fields.first(where: { $0.0 == key })?.1 else {
                return nil
            }
            node = next
        }
        return node
    }

    public var double: Double? {
        switch self {
        case .number(let d): return d
        case .integer(let i): return Double(i)
        case .unsigned(let u): return Double(u)
        default: return nil
        }
    }

    /// As JSON (NaN and infinities as null).
    public var json: String {
        switch self {
        case .number(let d): return JSONText.number(d)
        case .integer(let i): return String(i)
        case .boolean(let b): return b ? "true" : "false"
        case .unsigned(let u): return String(u)
        case .text(let s): return JSONText.string(s)
        case .list(let items): return "[" + items.map(\.json).joined(separator: ",") + "]"
        case .record(let fields):
            return "{" + fields.map { JSONText.string($0.0) + ":" + $0.1.json }.joined(separator: ",") + "}"
        }
    }
}

extension MessageSchema {
    /// Decodes a CDR payload by this schema. Sequences longer than the payload could hold are refused
    /// before anything is allocated.
    public func decode(_ payload: [UInt8]) throws(CDRError) -> DecodedValue {
        let result = payload.withUnsafeBytes { buffer in
            Result { () throws(CDRError) -> DecodedValue in
                var r = try CDRReader(buffer)
                return try self.decodeRecord(name, &r, path: "")
            }
        }
        return try result.get()
    }

    func decodeRecord(_ type: String, _ r: inout CDRReader, path: String) throws(CDRError) -> DecodedValue {
        var out: [(String, DecodedValue)] = []
        let fields = fields(of: type)
        if fields.isEmpty {
            // A message without fields (only constants, or std_msgs/Empty) still takes one byte in ROS 2:
            // rosidl adds `uint8 structure_needs_at_least_one_member`.
            _ = try r.uint8(
                path.isEmpty ? "structure_needs_at_least_one_member" : path + ".structure_needs_at_least_one_member")
            return .record([])
        }
        for f in fields {
            out.append((f.name, try decodeValue(f.type, &r, path: path.isEmpty ? f.name : path + "." + f.name)))
        }
        return .record(out)
    }

    func decodeValue(_ t: FieldType, _ r: inout CDRReader, path: String) throws(CDRError) -> DecodedValue {
        switch t {
        case .message(let m): return try decodeRecord(m, &r, path: path)
        case .fixedArray(let e, let n):
            var items: [DecodedValue] = []
            for _ in 0..<n { items.append(try decodeValue(e, &r, path: path)) }
            return .list(items)
        case .sequence(let e, _):
            let n = Int(try r.uint32(path))
            guard n <= r.remaining else { throw .lengthTooLarge(field: path, length: n, offset: r.offset) }
            var items: [DecodedValue] = []
            for _ in 0..<n { items.append(try decodeValue(e, &r, path: path)) }
            return .list(items)
        case .primitive(let p):
            switch p {
            case "bool": return .boolean(try r.uint8(path) != 0)
            case "byte", "char", "uint8": return .integer(Int64(try r.uint8(path)))
            case "int8": return .integer(Int64(try r.int8(path)))
            case "int16": return .integer(Int64(Int16(bitPattern: try r.uint16(path))))
            case "uint16": return .integer(Int64(try r.uint16(path)))
            case "int32": return .integer(Int64(try r.int32(path)))
            case "uint32": return .integer(Int64(try r.uint32(path)))
            case "int64": return .integer(Int64(bitPattern: try r.raw(UInt64.self, path)))
            case "uint64": return .unsigned(try r.raw(UInt64.self, path))
            case "float32": return .number(Double(Float(bitPattern: try r.uint32(path))))
            case "float64": return .number(try r.float64(path))
            case "string": return .text(try r.string(path))
            // As rosbags serializes it (and reads it back): like a string.
            case "wstring": return .text(try r.string(path))
            default: throw .invalidString(field: "\(path) (unsupported type \(p))", offset: r.offset)
            }
        }
    }
}

extension Substring {
    var trimmingWhitespace: Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" || f == "\r" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" { s = s.dropLast() }
        return s
    }
}
