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

/// Rows of text built as bytes, for sinks that write one row per sample: the same characters as
/// `stampText`, `format` and string interpolation give, without a String per field.
public struct TextRow {
    public private(set) var bytes: [UInt8] = []

    public init() { bytes.reserveCapacity(160) }

    public mutating func clear() { bytes.removeAll(keepingCapacity: true) }

    public mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }

    public mutating func append(byte: UInt8) { bytes.append(byte) }

    /// `stampText(t)`.
    public mutating func append(stamp t: RosTime) {
        let sec = Int64(t.sec) + Int64(t.nanosec / 1_000_000_000)
        bytes.append(contentsOf: String(sec).utf8)
        bytes.append(UInt8(ascii: "."))
        var ns = t.nanosec % 1_000_000_000
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { d in
            for i in stride(from: 8, through: 0, by: -1) {
                d[i] = UInt8(ascii: "0") + UInt8(ns % 10)
                ns /= 10
            }
            bytes.append(contentsOf: d)
        }
    }

    /// `\(x)`: Swift's shortest text that reads back as the same Double.
    public mutating func append(_ x: Double) { bytes.append(contentsOf: x.description.utf8) }

    /// `format(x, decimals)`: C's "%.Nf", the exact binary value rounded half to even, computed
    /// here without a formatter: x 10^N is exact as hi + lo (an FMA gives lo), so the rounding can be
    /// decided on the exact value. Values beyond 2^53 / 10^N (and decimals beyond 9) take `format`.
    public mutating func append(_ x: Double, decimals: Int) {
        guard (0...9).contains(decimals), x.isFinite else { return append(format(x, decimals)) }
        let scale = Self.powersOfTen[decimals]
        let magnitude = abs(x)
        let hi = magnitude * scale
        guard hi < 9.0e15 else { return append(format(x, decimals)) }
        let lo = (-hi).addingProduct(magnitude, scale)  // magnitude * scale - hi, exactly
        let whole = hi.rounded(.down)
        let fraction = hi - whole  // exact: both within one binade of hi's integer part
        var units = UInt64(whole)
        // |lo| is at most half an ulp of hi and the fraction a whole number of them, so lo only
        // decides an exact half.
        if fraction > 0.5 || (fraction == 0.5 && (lo > 0 || (lo == 0 && units % 2 == 1))) { units += 1 }
        if x.sign == .minus { bytes.append(UInt8(ascii: "-")) }
        let divisor = UInt64(Self.powersOfTen[decimals])
        bytes.append(contentsOf: String(units / divisor).utf8)
        guard decimals > 0 else { return }
        bytes.append(UInt8(ascii: "."))
        var rest = units % divisor
        let start = bytes.count
        for _ in 0..<decimals {
            bytes.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        }
        bytes[start...].reverse()
    }

    static let powersOfTen: [Double] = (0...9).map { pow(10, Double($0)) }
}
