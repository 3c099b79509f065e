import Testing
import Foundation
import WireFormat
@testable import Pipeline

@Suite("Text rows")
struct TextRowTests {
    /// Random values across magnitudes and signs, halves and near-halves at each precision (where a
    /// rounding done on the product instead of the exact value goes wrong), zeros, and the guard edges.
    static func values() -> [Double] {
        var generator = SystemRandomNumberGenerator()
        var out: [Double] = [0, -0.0, 0.5, 1.5, 2.5, -2.5, 359.99995, 179.99995, 0.00005, -0.00005, 1e-300, 8.99e11]
        for decimals in 0...9 {
            let step = pow(10, -Double(decimals))
            for k in 0..<2000 {
                let half = (Double(k) + 0.5) * step * Double.random(in: 1...1000, using: &generator).rounded()
                out += [half, half.nextUp, half.nextDown, -half]
            }
        }
        for _ in 0..<100_000 {
            let exponent = Double.random(in: -12...12, using: &generator)
            out.append((Bool.random(using: &generator) ? 1 : -1) * pow(10, exponent))
            out.append(Double.random(in: 0..<360, using: &generator))
        }
        return out
    }

    @Test("fixed decimals are C's %.Nf, byte for byte, at every precision")
    func fixedDecimals() {
        var row = TextRow()
        var differences: [String] = []
        for x in Self.values() {
            for decimals in [0, 1, 2, 4, 6, 9] {
                row.clear()
                row.append(x, decimals: decimals)
                let expected = format(x, decimals)
                let got = String(decoding: row.bytes, as: UTF8.self)
                if got != expected, differences.count < 10 {
                    differences.append("\(x) %.\(decimals)f: \(got) != \(expected)")
                }
            }
        }
        #expect(differences.isEmpty, "\(differences)")
    }

    @Test("stamps and doubles are what stampText and interpolation give")
    func stampsAndDoubles() {
        var row = TextRow()
        for (sec, nanosec) in [
            (1_700_000_000, 0), (1_700_000_000, 9_999_999), (0, 1), (-5, 999_999_999), (7, 1_500_000_000),
        ] {
            let t = RosTime(sec: Int32(sec), nanosec: UInt32(nanosec))
            row.clear()
            row.append(stamp: t)
            #expect(String(decoding: row.bytes, as: UTF8.self) == stampText(t))
        }
        for x in [0.5304951455496748, -1e-300, 1.0, 12345.678, -0.0] {
            row.clear()
            row.append(x)
            #expect(String(decoding: row.bytes, as: UTF8.self) == "\(x)")
        }
    }
}
