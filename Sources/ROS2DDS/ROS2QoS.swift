import CCycloneDDS
import Foundation

/// The QoS a ROS 2 topic is published or subscribed with: the policies ROS 2 exposes, with its two
/// everyday profiles. A reader matches a writer only when the writer offers at least what the reader
/// asks: a reliable reader never hears a best-effort writer, a transient-local reader never a
/// volatile one.
public struct ROS2QoS: Sendable, Equatable, CustomStringConvertible {
    public enum Reliability: String, Sendable, CaseIterable { case reliable, bestEffort = "best_effort" }
    public enum Durability: String, Sendable, CaseIterable { case volatile, transientLocal = "transient_local" }
    public enum History: Sendable, Equatable {
        /// The newest `depth` samples are kept; older ones are overwritten (by design, not loss).
        case keepLast(Int)
        /// Every sample until taken (reliable writers then block instead of overwriting).
        case keepAll
    }

    public var reliability: Reliability
    public var durability: Durability
    public var history: History

    public init(reliability: Reliability, durability: Durability = .volatile, history: History) {
        self.reliability = reliability
        self.durability = durability
        self.history = history
    }

    /// rmw_qos_profile_default: reliable, volatile, keep last 10.
    public static let rosDefault = ROS2QoS(reliability: .reliable, history: .keepLast(10))
    /// rmw_qos_profile_sensor_data: best effort, volatile, keep last 5.
    public static let sensorData = ROS2QoS(reliability: .bestEffort, history: .keepLast(5))
    /// The profiles by the names pipeline files use.
    public static let profiles: [String: ROS2QoS] = ["default": rosDefault, "sensor_data": sensorData]

    /// How pipeline files and the command line write a QoS.
    public static let syntax =
        "sensor_data | default, then optionally reliable | best_effort, volatile | transient_local, keep_all | depth N"

    /// A QoS written as `sensor_data` or `default` (ROS 2's profiles), optionally followed by
    /// changes, or the policies alone: "reliable, keep_all", "default, depth 100",
    /// "best_effort, volatile, keep_last 5". Unnamed policies keep ROS 2's default profile.
    public init(parsing text: String) throws(ParseError) {
        self = .rosDefault
        for (i, raw) in text.split(separator: ",").enumerated() {
            let item = raw.trimmingCharacters(in: .whitespaces).lowercased().replacingOccurrences(of: "-", with: "_")
            let words = item.split(whereSeparator: { $0 == " " || $0 == ":" || $0 == "=" }).map(String.init)
            switch words.first ?? "" {
            case "sensor_data" where i == 0: self = .sensorData
            case "default" where i == 0: self = .rosDefault
            case "reliable": reliability = .reliable
            case "best_effort": reliability = .bestEffort
            case "volatile": durability = .volatile
            case "transient_local": durability = .transientLocal
            case "keep_all": history = .keepAll
            case "depth", "keep_last":
                guard words.count == 2, let n = Int(words[1]), (1...1_000_000).contains(n) else {
                    throw ParseError(item: item, problem: "depth needs a whole number from 1 to 1000000")
                }
                history = .keepLast(n)
            default:
                throw ParseError(item: item, problem: "not a QoS profile or policy (\(Self.syntax))")
            }
        }
    }

    /// A QoS text that does not parse, with the item at fault.
    public struct ParseError: Error, CustomStringConvertible {
        public let item: String, problem: String
        public var description: String { "'\(item)': \(problem)" }
    }

    public var description: String {
        let h: String
        switch history {
        case .keepLast(let n): h = "keep last \(n)"
        case .keepAll: h = "keep all"
        }
        return "\(reliability.rawValue), \(durability.rawValue), \(h)"
    }

    /// A Cyclone QoS object with these policies (and `userData`, as rmw puts its type hash there);
    /// the caller deletes it.
    func makeQoS(userData: String? = nil) -> OpaquePointer {
        let qos = dds_create_qos()!
        switch reliability {
        case .reliable: dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, 100_000_000)  // 100 ms max blocking
        case .bestEffort: dds_qset_reliability(qos, DDS_RELIABILITY_BEST_EFFORT, 0)
        }
        dds_qset_durability(qos, durability == .volatile ? DDS_DURABILITY_VOLATILE : DDS_DURABILITY_TRANSIENT_LOCAL)
        switch history {
        case .keepLast(let n): dds_qset_history(qos, DDS_HISTORY_KEEP_LAST, Int32(clamping: max(1, n)))
        case .keepAll: dds_qset_history(qos, DDS_HISTORY_KEEP_ALL, -1)
        }
        if let userData {
            let bytes = Array(userData.utf8)
            bytes.withUnsafeBytes { dds_qset_userdata(qos, $0.baseAddress, $0.count) }
        }
        return qos
    }

    /// The reliability and durability another endpoint announced (from discovery).
    static func announced(_ qos: OpaquePointer?) -> (Reliability, Durability)? {
        guard let qos else { return nil }
        var kind = DDS_RELIABILITY_BEST_EFFORT
        var blocking: dds_duration_t = 0
        var durability = DDS_DURABILITY_VOLATILE
        guard dds_qget_reliability(qos, &kind, &blocking), dds_qget_durability(qos, &durability) else { return nil }
        return (
            kind == DDS_RELIABILITY_RELIABLE ? .reliable : .bestEffort,
            durability == DDS_DURABILITY_VOLATILE ? .volatile : .transientLocal
        )
    }

    /// Why a writer offering `offered` cannot serve a reader asking `self`, or nil when it can; the
    /// sentence names the two sides as `writer` and `reader` (the reader's view by default).
    public func mismatch(
        offered: (Reliability, Durability), writer: String = "it publishes", reader: String = "this reader asks for"
    ) -> String? {
        var problems: [String] = []
        if reliability == .reliable && offered.0 == .bestEffort {
            problems.append("\(writer) best_effort and \(reader) reliable")
        }
        if durability == .transientLocal && offered.1 == .volatile {
            problems.append("\(writer) volatile and \(reader) transient_local")
        }
        return problems.isEmpty ? nil : problems.joined(separator: "; ")
    }
}
