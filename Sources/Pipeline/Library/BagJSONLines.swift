import Bags
import WireFormat

/// A bag's messages as JSON lines {"topic", "type", "log_time" (ns), "message"}, as `fusion-node bag
/// echo` prints them and the library's `read_bag` reads them: the known types through their decoders,
/// others through the definition the bag carries (or a known one: older sqlite3 bags carry none), and
/// types without a definition as {"bytes": size}.
public struct BagJSONLines {
    let bag: BagReader
    var schemas: [String: MessageSchema?] = [:]

    public init(bag: BagReader) { self.bag = bag }

    /// One message's line; throws when its payload does not decode.
    public mutating func line(_ m: BagMessage) throws -> String {
        let body: String
        if let known = try jsonFromCDR(type: m.type, m.data) {
            body = "\"message\":" + known
        } else if m.encoding == "cdr", let s = schema(for: m) {
            body = "\"message\":" + (try s.decode(m.data)).json
        } else {
            body = "\"bytes\":\(m.data.count)"
        }
        return "{\"topic\":\(JSONText.string(m.topic)),\"type\":\(JSONText.string(m.type)),\"log_time\":\(m.logTime),"
            + "\(body)}"
    }

    mutating func schema(for m: BagMessage) -> MessageSchema? {
        if let cached = schemas[m.topic] { return cached }
        let text =
            bag.schema(forTopic: m.topic).flatMap { $0.encoding == "ros2msg" ? $0.text : nil }
            ?? KnownInterfaces.definition(for: m.type)
        let s = text.flatMap { try? MessageSchema(name: m.type, text: $0) }
        schemas[m.topic] = s
        return s
    }
}
