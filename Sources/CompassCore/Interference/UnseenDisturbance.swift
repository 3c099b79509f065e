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

    /// The compass heading's noise per radian turned, for `SensorFixedDisturbance`'s regression: about
    /// the steady-state heading error of the filters (a degree), so only a variation well above it
    /// counts as seen.
    public static let compassNoiseRadians = 1 * radiansPerDegree

    /// The unseen disturbance's heading variance, degrees^2: the share of the expected disturbance
    /// turning has not exposed, plus the error the exposed part showed (`SensorFixedDisturbance`).
    /// The arctangent is recomputed only when the dip changes: the filters form their output every
    /// sample, and an arctangent per sample would cost about 10 %.
    struct Variance: Sendable {
        private(set) var degrees2 = 0.0
        private(set) var sensorFixed = SensorFixedDisturbance()
        private var priorDegrees2 = 0.0
        private var dip = Double.nan
        private var notedSinceRefresh = false

        @inline(__always)
        mutating func noteTrusted(eastRow: Vector3, headingInnovation: Double, radians: Double) {
            sensorFixed.noteTrusted(eastRow: eastRow, headingInnovation: headingInnovation, radians: radians)
            notedSinceRefresh = true
        }

        /// Forgets the orientations seen: the field they were judged against has changed.
        mutating func forgetTurns() {
            sensorFixed = SensorFixedDisturbance()
            notedSinceRefresh = true
        }

        @inline(__always)
        mutating func refresh(fraction: Double, dipDegrees: Double) {
            guard dipDegrees != dip || notedSinceRefresh else { return }
            notedSinceRefresh = false
            if dipDegrees != dip {
                dip = dipDegrees
                let sigma = UnseenDisturbance.headingSigmaDegrees(fraction: fraction, dipDegrees: dipDegrees)
                priorDegrees2 = sigma * sigma
            }
            if sensorFixed.refreshDue { refreshSensorFixed() }
            let share = sensorFixed.unexposedShare, seen = sensorFixed.seenErrorRadians * degreesPerRadian
            degrees2 = priorDegrees2 * share * share + seen * seen
        }

        /// Solves the regression with every reading noted so far: every 16 readings in real time, and
        /// once more for the smoother when the recording has ended.
        mutating func refreshSensorFixed() {
            sensorFixed.refresh(
                priorSigmaRadians: priorDegrees2.squareRoot() * radiansPerDegree,
                noiseSigmaRadians: UnseenDisturbance.compassNoiseRadians)
        }

        /// The variance at an orientation with east row `eastRow`, from what has been seen so far
        /// (the smoother asks this of every smoothed orientation once the recording has ended).
        func degrees2(eastRow: Vector3) -> Double {
            let share = sensorFixed.unexposedShare
            let seen = sensorFixed.seenErrorRadians(eastRow: eastRow) * degreesPerRadian
            return priorDegrees2 * share * share + seen * seen
        }
    }
}
