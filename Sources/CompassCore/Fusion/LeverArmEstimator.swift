/// The rotation's share of the specific force. An accelerometer a distance r from the point the
/// sensor turns about (a wrist or an elbow for a handheld, the turning centre of a vehicle) feels
///
///     a = ω̇ × r + ω × (ω × r)
///
/// on top of gravity and the pivot's own acceleration, r in the sensor frame. The centripetal part
/// does not average out: while the sensor swings about a pivot it points at the pivot every time, so
/// a low-passed specific force leans towards it (at 3 rad/s and 15 cm, 1.4 m/s^2, 8 degrees of tilt
/// if nothing else averaged it). With the filter's attitude taking gravity out of the reading, what
/// is left is regressed on ω and ω̇ by exponentially weighted least squares, and the fitted a is taken
/// out of the force before it is low-passed. Slow turning gives the fit nothing (a shrinks with ω^2),
/// and a prior on r keeps it near zero then; translation that does not follow the turning averages
/// out of the fit. A hand-held sensor swung about the wrist, elbow or shoulder (r of 10 to 30 cm) is
/// the case it is for.
public struct LeverArmEstimator: Sendable, Equatable {
    /// The lever arm from the pivot to the sensor, sensor frame, metres (zero until fitted).
    public private(set) var leverArmMeters = Vector3.zero

    /// Time-weighted means of M^T M and M^T a, M = [ω]x^2 + [ω̇]x the map from r to a.
    var normalMatrix = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
    var normalVector = Vector3.zero
    var smoothedRate = Vector3.zero
    var started = false
    var samplesSinceSolve = 0
    var weight = LowPassWeight()
    var rateWeight = LowPassWeight()

    /// The angular rate is low-passed this much before it is differentiated, seconds: about a consumer
    /// accelerometer's own bandwidth (a 50 to 100 Hz digital low-pass), so ω̇ is no noisier than the
    /// force it explains and the same at any sample rate.
    static let rateSmoothingSeconds = 0.005
    /// Samples between solves of the 3x3 normal equations (the means change slowly).
    static let samplesPerSolve = 8

    public init() {}

    /// What the fit needs of the filter's settings; three numbers rather than the whole settings,
    /// which a per-sample call would otherwise copy.
    public struct Parameters: Sendable {
        /// `KalmanFilterSettings.leverArmSeconds`: the fit's memory, seconds (0: off).
        public var memorySeconds: Double
        /// `KalmanFilterSettings.pivotAccelerationNoiseDensity`, m/s^2/sqrt(Hz).
        public var pivotAccelerationNoiseDensity: Double
        /// `KalmanFilterSettings.leverArmPriorMeters`, m.
        public var priorMeters: Double

        @inline(__always)
        public init(_ settings: KalmanFilterSettings) {
            memorySeconds = settings.leverArmSeconds
            pivotAccelerationNoiseDensity = settings.pivotAccelerationNoiseDensity
            priorMeters = settings.leverArmPriorMeters
        }
    }

    /// The rotation's share of `specificForce` now, sensor frame, m/s^2, with the fit updated by this
    /// sample: `rate` the bias-corrected angular rate, rad/s, and `gravity` the specific force gravity
    /// alone would give at the filter's attitude, sensor frame.
    @inline(__always)
    public mutating func rotationalAcceleration(
        rate: Vector3, specificForce: Vector3, gravity: Vector3, dt: Double, parameters: Parameters
    ) -> Vector3 {
        guard parameters.memorySeconds > 0 else { return .zero }
        guard started else {
            smoothedRate = rate
            started = true
            return .zero
        }
        let previous = smoothedRate
        smoothedRate += (rate - smoothedRate) * rateWeight(dt, tau: Self.rateSmoothingSeconds)
        let w = smoothedRate, wDot = (smoothedRate - previous) * (1 / dt)
        // [ω]x^2 = ω ω^T - |ω|^2 I, plus the skew matrix of ω̇.
        let w2 = w.squaredNorm
        let m = Matrix3(
            w.x * w.x - w2, w.x * w.y - wDot.z, w.x * w.z + wDot.y,
            w.y * w.x + wDot.z, w.y * w.y - w2, w.y * w.z - wDot.x,
            w.z * w.x - wDot.y, w.z * w.y + wDot.x, w.z * w.z - w2)
        let mT = m.transposed
        let k = weight(dt, tau: parameters.memorySeconds)
        normalMatrix = normalMatrix + (mT * m - normalMatrix) * k
        normalVector += (mT * (specificForce - gravity) - normalVector) * k
        samplesSinceSolve += 1
        if samplesSinceSolve >= Self.samplesPerSolve {
            samplesSinceSolve = 0
            solve(parameters)
        }
        return m * leverArmMeters
    }

    /// The posterior mean of r: the means above are the evidence of `leverArmSeconds` of data whose
    /// unexplained force has density `pivotAccelerationNoiseDensity`; the prior is r ~ N(0, prior^2).
    mutating func solve(_ parameters: Parameters) {
        let noise = parameters.pivotAccelerationNoiseDensity, prior = parameters.priorMeters
        let ridge = noise * noise / (prior * prior * parameters.memorySeconds)
        guard let inverse = normalMatrix.addingToDiagonal(ridge).inverse else { return }
        let r = inverse * normalVector
        if r.isFinite { leverArmMeters = r }
    }
}
