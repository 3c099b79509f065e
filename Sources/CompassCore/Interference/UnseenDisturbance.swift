#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The heading error no check can see. A steel structure, or a phone lying beside the sensor from
/// the start, adds a steady field that changes strength and dip too little to be caught (and the
/// gate learns its reference with it), yet turns the horizontal field. A disturbance of a given
/// fraction of the field strength turns the heading by up to atan(fraction / cos(dip)): the same
/// disturbance costs three times as many degrees at a dip of 70 degrees (Berlin) as at 20 (Singapore),
/// because only the horizontal component points north.
public enum UnseenDisturbance {
    /// Steeper than this the horizontal field is too weak for a compass anyway; the bound stays finite.
    public static let steepestDipDegrees = 87.0

    /// 1-sigma heading error, degrees, of an unseen disturbance whose 1-sigma strength is `fraction`
    /// of the field, where the field dips `dipDegrees` below the horizon.
    @inlinable
    public static func headingSigmaDegrees(fraction: Double, dipDegrees: Double) -> Double {
        let dip = min(abs(dipDegrees), steepestDipDegrees) * radiansPerDegree
        return atan(fraction / cos(dip)) * degreesPerRadian
    }

    /// `headingSigmaDegrees` squared, recomputed only when the dip changes: the filters form their
    /// output every sample, and an arctangent per sample would cost about 10 %.
    struct Variance: Sendable {
        private(set) var degrees2 = 0.0
        private var dip = Double.nan

        @inline(__always)
        mutating func refresh(fraction: Double, dipDegrees: Double) {
            guard dipDegrees != dip else { return }
            dip = dipDegrees
            let sigma = UnseenDisturbance.headingSigmaDegrees(fraction: fraction, dipDegrees: dipDegrees)
            degrees2 = sigma * sigma
        }
    }
}
