/// Detects rest: low-passed gyro rate and accelerometer deviation both small for a while.
/// Used to learn the gyro bias directly and to flag `atRest`.
public struct RestDetector: Sendable, Equatable {
    /// Largest angular rate at rest, rad/s. Default 0.035 (2 deg/s).
    public var maximumRate: Double
    /// Largest deviation of the specific force from its low-passed value at rest, m/s^2. Default 0.5.
    public var maximumAccelerationDeviation: Double
    /// How long both must hold before rest is declared, seconds. Default 1.5.
    public var minimumSeconds: Double
    /// Low-pass time constant for the rate and specific force, seconds. Default 0.5.
    public var filterSeconds: Double

    public private(set) var lowPassedRate = Vector3.zero
    public private(set) var lowPassedForce = Vector3.zero
    public private(set) var restSeconds = 0.0
    private var primed = false
    private var weight = LowPassWeight()

    public init(
        maximumRate: Double = 0.035, maximumAccelerationDeviation: Double = 0.5, minimumSeconds: Double = 1.5,
        filterSeconds: Double = 0.5
    ) {
        self.maximumRate = maximumRate
        self.maximumAccelerationDeviation = maximumAccelerationDeviation
        self.minimumSeconds = minimumSeconds
        self.filterSeconds = filterSeconds
    }

    /// True once the sensor has been still for `minimumSeconds`.
    @inlinable public var isAtRest: Bool { restSeconds >= minimumSeconds }

    /// Feeds one sample (rates uncorrected for bias: a bias larger than `maximumRate` hides rest,
    /// which is the safe side). Returns `isAtRest`.
    public mutating func update(rate: Vector3, specificForce: Vector3, dt: Double) -> Bool {
        if !primed {
            lowPassedRate = rate
            lowPassedForce = specificForce
            primed = true
        }
        let a = weight(dt, tau: filterSeconds)
        lowPassedRate += (rate - lowPassedRate) * a
        lowPassedForce += (specificForce - lowPassedForce) * a
        let still =
            (rate - lowPassedRate).squaredNorm < maximumRate * maximumRate * 4
            && lowPassedRate.squaredNorm < maximumRate * maximumRate
            && (specificForce - lowPassedForce).squaredNorm < maximumAccelerationDeviation
                * maximumAccelerationDeviation
        restSeconds = still ? restSeconds + dt : 0
        return isAtRest
    }
}
