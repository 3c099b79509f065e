import Foundation
import WireFormat

/// Fixed-point text for reports and console lines: `format(3.14159, 2)` is "3.14".
public func format(_ x: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", x) }

/// Seconds with all nine nanosecond digits, exactly as stamped.
public func stampText(_ t: RosTime) -> String {
    let ns = String(t.nanosec)
    return "\(t.sec).\(String(repeating: "0", count: 9 - ns.count))\(ns)"
}
