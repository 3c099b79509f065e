import CSodium
import Foundation
import WireFormat

/// RIHS01 type hashes (REP-2011): SHA-256 of a type's description (its fields and those of every
/// type it uses, default values left out) as rosidl writes it in JSON. Jazzy's rmw puts
/// "typehash=RIHS01_<hex>;" in every endpoint's user data; Humble ignores it. Computed from the
/// embedded interface definitions, so every type those know has its hash.
public enum TypeHashes {
    /// The hash of a type the embedded definitions know ("sensor_msgs/msg/Imu"), or nil.
    public static func rihs01(_ type: String) -> String? {
        lock.lock()
        defer { lock.unlock() }
        if let known = cache[type] { return known }
        let hash = compute(type)
        cache[type] = hash
        return hash
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var cache: [String: String?] = [:]

    static func compute(_ type: String) -> String? {
        guard let text = KnownInterfaces.definition(for: type),
            // The schema reader keeps no string bounds, which the hash includes: such types get none.
            !text.contains("string<="),
            let schema = KnownInterfaces.schema(for: type),
            let json = descriptionJSON(type, schema)
        else { return nil }
        return "RIHS01_" + sha256Hex(Array(json.utf8))
    }

    /// The JSON rosidl hashes: {"type_description": T, "referenced_type_descriptions": [sorted by name]}.
    static func descriptionJSON(_ type: String, _ schema: MessageSchema) -> String? {
        var writer = DescriptionWriter(schema: schema)
        let main = writer.describe(schema.name)
        let others = writer.referenced.filter { $0.key != schema.name }.sorted { fullName($0.key) < fullName($1.key) }
        guard !writer.failed, main != nil, others.allSatisfy({ $0.value != nil }) else { return nil }
        return "{\"type_description\": \(main!), \"referenced_type_descriptions\": ["
            + others.map { $0.value! }.joined(separator: ", ") + "]}"
    }

    /// Writes individual type descriptions, collecting the types they reference.
    struct DescriptionWriter {
        typealias Field = (name: String, type: MessageSchema.FieldType)
        let schema: MessageSchema
        /// Every referenced type's description (nil while being written, or when it cannot be).
        var referenced: [String: String?] = [:]
        /// A field of a kind the hash has no id for.
        var failed = false

        func fields(of name: String) -> [Field]? {
            if name == "builtin_interfaces/Time" || name == "builtin_interfaces/Duration" {
                return [("sec", .primitive("int32")), ("nanosec", .primitive("uint32"))]
            }
            return schema.definitions[name]?.map { ($0.name, $0.type) }
        }

        mutating func describe(_ name: String) -> String? {
            guard let fs = fields(of: name) else { return nil }
            // rosidl gives an empty message one placeholder field.
            let list: [Field] = fs.isEmpty ? [("structure_needs_at_least_one_member", .primitive("uint8"))] : fs
            var parts: [String] = []
            for f in list { parts.append(field(f)) }
            return "{\"type_name\": \"\(fullName(name))\", \"fields\": [\(parts.joined(separator: ", "))]}"
        }

        mutating func field(_ f: Field) -> String {
            var increment = 0, capacity = 0
            var element = f.type
            switch f.type {
            case .fixedArray(let e, let n): (increment, capacity, element) = (48, n, e)
            case .sequence(let e, let bound?): (increment, capacity, element) = (96, bound, e)
            case .sequence(let e, nil): (increment, element) = (144, e)
            default: break
            }
            var id = 0
            var nested = ""
            switch element {
            case .message(let m):
                id = 1
                nested = fullName(m)
                if referenced[m] == nil {
                    referenced[m] = .some(nil)
                    referenced[m] = .some(describe(m))
                }
            case .primitive(let p):
                if let t = primitiveIds[p] { id = t } else { failed = true }
            case .fixedArray, .sequence:
                failed = true  // arrays of arrays do not exist in ROS 2 messages
            }
            return "{\"name\": \"\(f.name)\", \"type\": {\"type_id\": \(increment + id), \"capacity\": \(capacity), "
                + "\"string_capacity\": 0, \"nested_type_name\": \"\(nested)\"}}"
        }
    }

    /// "pkg/Name" -> "pkg/msg/Name".
    static func fullName(_ normalised: String) -> String {
        let parts = normalised.split(separator: "/")
        return parts.count == 2 ? "\(parts[0])/msg/\(parts[1])" : normalised
    }

    /// type_description_interfaces/msg/FieldType ids.
    static let primitiveIds: [String: Int] = [
        "int8": 2, "uint8": 3, "int16": 4, "uint16": 5, "int32": 6, "uint32": 7, "int64": 8, "uint64": 9,
        "float32": 10, "float64": 11, "char": 13, "bool": 15, "byte": 16, "string": 17, "wstring": 18,
    ]

    static func sha256Hex(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        _ = crypto_hash_sha256(&digest, bytes, UInt64(bytes.count))
        return digest.map { String(format: "%02x", $0) }.joined()
    }
}
