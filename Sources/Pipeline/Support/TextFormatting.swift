import Foundation
import WireFormat

/// Fixed-point text for reports and console lines: `format(3.14159, 2)` is "3.14".
public func format(_ x: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", x) }

/// Seconds with all nine nanosecond digits, exactly as stamped. A nanosecond field of a second or more
/// (outside the message's range, but on the wire it can be) is carried into the seconds.
public func stampText(_ t: RosTime) -> String {
    let sec = Int64(t.sec) + Int64(t.nanosec / 1_000_000_000)
    let ns = String(t.nanosec % 1_000_000_000)
    return "\(sec).\(String(repeating: "0", count: 9 - ns.count))\(ns)"
}
