#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
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

    /// The heading innovation's noise per independent reading, for `SensorFixedDisturbance`'s
    /// regression: about the steady-state attitude error of the filters (a degree), so only a variation
    /// well above it counts as seen (and where the residuals are larger, the regression says so and
    /// believes the evidence less). An attitude error of that size moves the earth-frame field by as much of the
    /// whole field, so the north and up components' noise is this over cos(dip) in units of H.
    public static let compassNoiseRadians = 1 * radiansPerDegree

    /// How far apart in time the compass and the gyro-carried attitude may see the same motion,
    /// seconds: about the group delay of a consumer magnetometer's internal filter at a 50 to 100 Hz
    /// output rate (BROAD's 2.5 ms lag is one part of it). While the sensor turns at w rad/s it adds
    /// about w times this to a reading's heading and field errors. Default 0.0175: as much as
    /// `compassNoiseRadians` at 1 rad/s.
    public static let compassTimingSeconds = 0.0175

    /// The share of a full reading's evidence one taken while turning at `rate` rad/s is worth: its
    /// noise is `compassNoiseRadians` and the timing error added in quadrature, so its weight falls
    /// by their ratio (one half at 1 rad/s, a tenth at 3).
    @inlinable
    public static func readingWorth(rateRadiansPerSecond rate: Double) -> Double {
        let timing = rate * compassTimingSeconds, noise = compassNoiseRadians
        return noise * noise / (noise * noise + timing * timing)
    }

    /// The unseen disturbance's heading variance, degrees^2: what a disturbance fixed to the sensor may
    /// cost the filter's heading, given what turning has shown (`SensorFixedDisturbance`), as a
    /// variance whose 95 % bound covers the bias seen plus what is still unknown.
    /// The arctangent is recomputed only when the dip changes: the filters form their output every
    /// sample, and an arctangent per sample would cost about 10 %.
    struct Variance: Sendable {
        private(set) var degrees2 = 0.0
        private(set) var sensorFixed = SensorFixedDisturbance()
        private var priorDegrees2 = 0.0
        private var dip = Double.nan
        /// The east row the filter's heading error follows: the filter corrects its heading by a share
        /// of each innovation, so its error is the compass's (r . g) averaged the same way, and
        /// `followedEastRow . g` is it. Between corrections it stays (the gyro carries an earth-frame
        /// heading error unchanged).
        private(set) var followedEastRow = Vector3(1, 0, 0)
        private var hasFollowed = false
        /// Time-weighted east rows of the readings awaiting the next heading correction.
        private var pendingEastRowSum = Vector3.zero
        private var pendingSeconds = 0.0
        private var notedSinceRefresh = false

        /// Notes one trusted reading, taken after turning `radians` at `rate` rad/s over `seconds`.
        @inline(__always)
        mutating func noteTrusted(
            rotation: Matrix3, earthField: Vector3, headingInnovation: Double, radians: Double, rate: Double,
            seconds: Double
        ) {
            sensorFixed.noteTrusted(
                rotation: rotation, earthField: earthField, headingInnovation: headingInnovation,
                followedEastRow: hasFollowed ? followedEastRow : rotation.row0,
                radians: radians * UnseenDisturbance.readingWorth(rateRadiansPerSecond: rate))
            pendingEastRowSum += rotation.row0 * seconds
            pendingSeconds += seconds
        }

        /// The filter moved its heading `gain` (0 to 1) of the way to the readings' mean since the last
        /// correction.
        @inline(__always)
        mutating func noteHeadingCorrection(gain: Double) {
            guard pendingSeconds > 0 else { return }
            let mean = pendingEastRowSum * (1 / pendingSeconds)
            followedEastRow += (mean - followedEastRow) * (hasFollowed ? min(max(gain, 0), 1) : 1)
            hasFollowed = true
            pendingEastRowSum = .zero
            pendingSeconds = 0
            notedSinceRefresh = true
        }

        /// Forgets the orientations seen: the field they were judged against has changed.
        mutating func forgetTurns() {
            sensorFixed = SensorFixedDisturbance()
            dip = .nan  // the prior is set again at the next refresh
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
                refreshSensorFixed()
            } else if sensorFixed.refreshDue {
                refreshSensorFixed()
            }
            degrees2 = degrees2(eastRow: followedEastRow)
        }

        /// Solves the regression with every reading noted so far: every 16 readings in real time, and
        /// once more for the smoother when the recording has ended.
        mutating func refreshSensorFixed() {
            let noise = UnseenDisturbance.compassNoiseRadians
            let steepest = UnseenDisturbance.steepestDipDegrees
            let cosDip = cos(min(abs(dip.isFinite ? dip : TypicalEarthField.dipDegrees), steepest) * radiansPerDegree)
            sensorFixed.refresh(
                priorSigmaRadians: priorDegrees2.squareRoot() * radiansPerDegree,
                headingNoiseRadians: noise, fieldNoiseRadians: noise / cosDip)
        }

        /// At an orientation with east row `eastRow`, degrees: the error turning has shown (a bias),
        /// the 1-sigma part still unknown, and the prior's 1 sigma (`HeadingAccuracyParts`).
        func partsDegrees(eastRow r: Vector3) -> (seen: Double, unknown: Double, prior: Double) {
            let prior = priorDegrees2.squareRoot()
            guard let unknown = sensorFixed.unseenSigmaRadians(eastRow: r) else { return (0, prior, prior) }
            return (abs(sensorFixed.seenErrorRadians(eastRow: r)) * degreesPerRadian, unknown * degreesPerRadian, prior)
        }

        /// Where the reported accuracy comes from, with the filter's own 1-sigma heading uncertainty.
        func accuracyParts(filterSigmaDegrees: Double, eastRow r: Vector3) -> HeadingAccuracyParts {
            let parts = partsDegrees(eastRow: r)
            return HeadingAccuracyParts(
                filterSigmaDegrees: filterSigmaDegrees, disturbanceSeenDegrees: parts.seen,
                disturbanceUnknownSigmaDegrees: parts.unknown, disturbancePriorSigmaDegrees: parts.prior,
                fitInconsistency: sensorFixed.inconsistency, turnedRadians: sensorFixed.radians)
        }

        /// The variance at an orientation with east row `eastRow`, from what has been seen so far
        /// (the smoother asks this of every smoothed orientation once the recording has ended).
        @inline(__always)
        func degrees2(eastRow: Vector3) -> Double {
            (sensorFixed.reportedVarianceRadians2(eastRow: eastRow) ?? priorDegrees2 * radiansPerDegree
                * radiansPerDegree)
                * degreesPerRadian * degreesPerRadian
        }
    }
}
