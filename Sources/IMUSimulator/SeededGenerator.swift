#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// xoshiro256** seeded through SplitMix64: fast, and the same sequence on every machine for a seed
/// (unlike `SystemRandomNumberGenerator`).
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var s0, s1, s2, s3: UInt64
    private var spareNormal: Double?

    public init(seed: UInt64) {
        var sm = seed
        func splitMix(_ x: inout UInt64) -> UInt64 {
            x &+= 0x9E37_79B9_7F4A_7C15
            var z = x
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        s0 = splitMix(&sm)
        s1 = splitMix(&sm)
        s2 = splitMix(&sm)
        s3 = splitMix(&sm)
    }

    public mutating func next() -> UInt64 {
        let result = ((s1 &* 5) << 7 | (s1 &* 5) >> 57) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = (s3 << 45) | (s3 >> 19)
        return result
    }

    /// Uniform in [0, 1) with 53 random bits.
    public mutating func nextUniform() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    /// Standard normal by the Box-Muller transform (pairs cached).
    public mutating func nextNormal() -> Double {
        if let z = spareNormal {
            spareNormal = nil
            return z
        }
        var u1 = nextUniform()
        while u1 <= 0 { u1 = nextUniform() }
        let u2 = nextUniform()
        let r = (-2 * log(u1)).squareRoot()
        spareNormal = r * sin(2 * .pi * u2)
        return r * cos(2 * .pi * u2)
    }
}
