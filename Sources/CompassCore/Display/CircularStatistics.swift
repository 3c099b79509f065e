#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Statistics on angles done on the circle: headings either side of north average to north.
public enum CircularStatistics {
    /// The circular mean in degrees [0, 360), or nil when empty, non-finite or the angles cancel
    /// (mean resultant length below 1e-9, e.g. 0 and 180).
    public static func meanDegrees<S: Sequence>(_ angles: S) -> Double? where S.Element == Double {
        var s = 0.0, c = 0.0, n = 0
        for a in angles {
            guard a.isFinite else { return nil }
            s += sin(a * radiansPerDegree)
            c += cos(a * radiansPerDegree)
            n += 1
        }
        guard n > 0, (s * s + c * c).squareRoot() / Double(n) > 1e-9 else { return nil }
        return normalizedDegrees(atan2(s, c) * degreesPerRadian)
    }

    /// Mean resultant length in [0, 1]: 1 when all angles agree, 0 when spread evenly. nil when empty.
    public static func meanResultantLength<S: Sequence>(_ angles: S) -> Double? where S.Element == Double {
        var s = 0.0, c = 0.0, n = 0
        for a in angles where a.isFinite {
            s += sin(a * radiansPerDegree)
            c += cos(a * radiansPerDegree)
            n += 1
        }
        return n > 0 ? (s * s + c * c).squareRoot() / Double(n) : nil
    }
}

/// Exponential smoothing of a heading on the circle (smooths the unit vector, not the number).
public struct CircularSmoother: Sendable, Equatable {
    /// Weight of each new sample, (0, 1]; 1 passes headings through unchanged.
    public var weight: Double
    private var sine = 0.0, cosine = 0.0, primed = false

    /// - Parameter weight: weight of each new sample in (0, 1]; values outside are clamped.
    public init(weight: Double) { self.weight = Swift.min(1, Swift.max(1e-6, weight)) }

    /// Feeds a heading in degrees and returns the smoothed heading in [0, 360). Non-finite input is
    /// ignored; returns nil only until the first valid heading.
    @discardableResult
    public mutating func update(_ degrees: Double) -> Double? {
        if degrees.isFinite {
            let s = sin(degrees * radiansPerDegree), c = cos(degrees * radiansPerDegree)
            if primed {
                sine += weight * (s - sine)
                cosine += weight * (c - cosine)
            } else {
                sine = s
                cosine = c
                primed = true
            }
        }
        return value
    }

    /// The current smoothed heading, or nil before the first sample or when the average cancels.
    public var value: Double? {
        guard primed, sine * sine + cosine * cosine > 1e-18 else { return nil }
        return normalizedDegrees(atan2(sine, cosine) * degreesPerRadian)
    }
}
