/// Where a reported heading accuracy comes from at one moment: its parts, 1-sigma degrees, so a
/// user can tell a filter unsure of its own state from a bound held open by a disturbance that
/// turning has not exposed (docs/filters.md). The reported 95 % bound is
/// 1.96 sqrt(filter^2 + (seen / 1.96 + unknown)^2), which `boundDegrees` recomputes.
public struct HeadingAccuracyParts: Sendable, Equatable {
    /// The filter's own heading uncertainty, 1 sigma, degrees: the state covariance (Kalman), or the
    /// compass's noise and the drift since it was last trusted (complementary).
    public var filterSigmaDegrees: Double
    /// The error a disturbance fixed to the sensor has shown as the sensor turned, degrees, bounded as
    /// a bias (`SensorFixedDisturbance`).
    public var disturbanceSeenDegrees: Double
    /// What is still unknown of that disturbance's error, 1 sigma, degrees.
    public var disturbanceUnknownSigmaDegrees: Double
    /// The same before anything was seen (the prior, `unseenDisturbanceFraction` at the reference
    /// dip), 1 sigma, degrees.
    public var disturbancePriorSigmaDegrees: Double
    /// The regression's residuals over its noise (the Birge ratio, at least 1): the evidence counts
    /// this many times less.
    public var fitInconsistency: Double
    /// Trusted magnetometer readings' turning the evidence is weighted by, radians (fast turns count
    /// for less).
    public var turnedRadians: Double

    @inlinable
    public init(
        filterSigmaDegrees: Double, disturbanceSeenDegrees: Double, disturbanceUnknownSigmaDegrees: Double,
        disturbancePriorSigmaDegrees: Double, fitInconsistency: Double, turnedRadians: Double
    ) {
        self.filterSigmaDegrees = filterSigmaDegrees
        self.disturbanceSeenDegrees = disturbanceSeenDegrees
        self.disturbanceUnknownSigmaDegrees = disturbanceUnknownSigmaDegrees
        self.disturbancePriorSigmaDegrees = disturbancePriorSigmaDegrees
        self.fitInconsistency = fitInconsistency
        self.turnedRadians = turnedRadians
    }

    /// The 95 % bound these parts make, degrees.
    public var boundDegrees: Double {
        let disturbance = disturbanceSeenDegrees / 1.96 + disturbanceUnknownSigmaDegrees
        return 1.96 * (filterSigmaDegrees * filterSigmaDegrees + disturbance * disturbance).squareRoot()
    }
}
