import CompassCore

/// The `json` wire encoding: one UTF-8 JSON object per message, field names as in the .msg files,
/// NaN and infinities as null (JSON has no NaN).
public enum JSONText {
    /// A JSON number, or null for NaN and infinities. Shortest round-tripping form.
    public static func number(_ x: Double) -> String { x.isFinite ? "\(x)" : "null" }

    /// A JSON string literal with the escapes RFC 8259 requires.
    public static func string(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    static func vector(_ v: Vector3) -> String { "{\"x\":\(number(v.x)),\"y\":\(number(v.y)),\"z\":\(number(v.z))}" }
    static func quaternion(_ q: Quaternion) -> String {
        "{\"x\":\(number(q.x)),\"y\":\(number(q.y)),\"z\":\(number(q.z)),\"w\":\(number(q.w))}"
    }
    static func array(_ c: Covariance9) -> String { "[" + c.array.map(number).joined(separator: ",") + "]" }
    static func header(_ h: RosHeader) -> String {
        "{\"stamp\":{\"sec\":\(h.stamp.sec),\"nanosec\":\(h.stamp.nanosec)},\"frame_id\":\(string(h.frameId))}"
    }
}

/// Messages that have a JSON form.
public protocol JSONRepresentable { var json: String { get } }

extension ImuMessage: JSONRepresentable {
    public var json: String {
        "{\"header\":\(JSONText.header(header)),\"orientation\":\(JSONText.quaternion(orientation)),"
            + "\"orientation_covariance\":\(JSONText.array(orientationCovariance)),"
            + "\"angular_velocity\":\(JSONText.vector(angularVelocity)),"
            + "\"angular_velocity_covariance\":\(JSONText.array(angularVelocityCovariance)),"
            + "\"linear_acceleration\":\(JSONText.vector(linearAcceleration)),"
            + "\"linear_acceleration_covariance\":\(JSONText.array(linearAccelerationCovariance))}"
    }
}

extension MagneticFieldMessage: JSONRepresentable {
    public var json: String {
        "{\"header\":\(JSONText.header(header)),\"magnetic_field\":\(JSONText.vector(magneticField)),"
            + "\"magnetic_field_covariance\":\(JSONText.array(magneticFieldCovariance))}"
    }
}

extension NavSatFixMessage: JSONRepresentable {
    public var json: String {
        "{\"header\":\(JSONText.header(header)),\"status\":{\"status\":\(status),\"service\":\(service)},"
            + "\"latitude\":\(JSONText.number(latitude)),\"longitude\":\(JSONText.number(longitude)),"
            + "\"altitude\":\(JSONText.number(altitude)),"
            + "\"position_covariance\":\(JSONText.array(positionCovariance)),"
            + "\"position_covariance_type\":\(positionCovarianceType)}"
    }
}

extension HeadingMessage: JSONRepresentable {
    public var json: String {
        "{\"header\":\(JSONText.header(header)),\"magnetic_heading\":\(JSONText.number(magneticHeading)),"
            + "\"true_heading\":\(JSONText.number(trueHeading)),"
            + "\"heading_accuracy\":\(JSONText.number(headingAccuracy)),"
            + "\"declination\":\(JSONText.number(declination)),\"orientation\":\(JSONText.quaternion(orientation)),"
            + "\"magnetic_field\":\(JSONText.vector(magneticField)),\"source\":\(source),\"flags\":\(flags),"
            + "\"reasons\":\(reasons),"
            + "\"flag_names\":\(JSONText.strings(HeadingMessage.flagNames(flags, reasons: reasons)))}"
    }
}

/// Decodes a CDR payload of a known type and renders it as JSON; nil for a type this module does
/// not know.
public func jsonFromCDR(type: String, _ data: [UInt8]) throws(CDRError) -> String? {
    try jsonFromCDR(type: type, data[...])
}

/// As above, for a payload inside a larger buffer.
public func jsonFromCDR(type: String, _ data: ArraySlice<UInt8>) throws(CDRError) -> String? {
    switch type {
    case ImuMessage.typeName: return try ImuMessage(cdrBytes: data).json
    case MagneticFieldMessage.typeName: return try MagneticFieldMessage(cdrBytes: data).json
    case NavSatFixMessage.typeName: return try NavSatFixMessage(cdrBytes: data).json
    case HeadingMessage.typeName: return try HeadingMessage(cdrBytes: data).json
    case CalibrationStatusMessage.typeName: return try CalibrationStatusMessage(cdrBytes: data).json
    case InterferenceStatusMessage.typeName: return try InterferenceStatusMessage(cdrBytes: data).json
    default:
        // Any other type the embedded interface definitions know, decoded by its definition.
        guard let schema = KnownInterfaces.schema(for: type) else { return nil }
        return try schema.decode(Array(data)).json
    }
}

extension JSONText {
    /// A JSON array of strings.
    public static func strings(_ items: [String]) -> String { "[" + items.map(string).joined(separator: ",") + "]" }
}
