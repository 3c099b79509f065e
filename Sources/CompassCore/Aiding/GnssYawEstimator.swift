#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Parameters of `GnssYawEstimator`.
public struct GnssYawEstimatorSettings: Sendable, Equatable {
    /// Yaw hypotheses, spread evenly round the circle. Each one's filter is linearised about its own
    /// yaw, which holds within about half the spacing: 8 leaves every heading within 22.5 degrees of
    /// one of them. Default 8.
    public var hypotheses = 8
    /// Error of the horizontal specific force each hypothesis integrates, m/s^2 per root hertz: the
    /// accelerometer's noise and vibration, and the tilt error's share of gravity (a degree of tilt is
    /// 0.17 m/s^2). Default 0.2.
    public var forceNoiseDensity = 0.2
    /// How fast the true heading can leave the filter's gyro-carried heading, rad/s per root hertz:
    /// the gyro bias the filter has not learned (0.3 deg/s is 0.005 rad/s). Default 0.01.
    public var yawNoiseDensity = 0.01
    /// Least standard error of a receiver velocity, m/s: what its reported accuracy leaves out, its
    /// latency (100 ms at 3 m/s^2 is 0.3 m/s) and the antenna's lever arm on a turning vehicle.
    /// Default 0.3.
    public var minimumVelocitySigma = 0.3
    /// A hypothesis's weight never falls below this share of an even one, so that a hypothesis the
    /// evidence left behind can come back if the vehicle's motion was misread. Default 1e-4.
    public var weightFloor = 1e-4

    public init() {}
}

/// The heading from GNSS velocity and the accelerometer, without a magnetometer: a bank of yaw
/// hypotheses, each a small Kalman filter of the horizontal velocity and its own heading. Between
/// receiver epochs each hypothesis turns the specific force the attitude filter integrated (in its
/// earth frame) by its heading offset and adds it to its velocity; at each epoch the receiver's
/// velocity corrects it, and its weight is multiplied by the likelihood of that velocity. A wrong heading
/// predicts a wrong velocity change whenever the vehicle accelerates or turns, so the weight gathers
/// on the right one; while the vehicle cruises or stands, nothing separates them and the spread stays.
/// The heading is the weighted circular mean, and its variance the weighted spread plus each
/// hypothesis's own: wide while ambiguous, honest once one hypothesis dominates.
///
/// Each hypothesis keeps its heading as an offset from the attitude filter's: the gyro turns both
/// alike, so the bank needs no rate of its own, and a correction of the attitude filter's heading is
/// passed on with `noteHeadingCorrection`. The Gaussian-sum approach is the one PX4's and ArduPilot's
/// yaw estimators take; this one shares the attitude filter's tilt instead of running one per hypothesis.
public struct GnssYawEstimator: Sendable {
    public var settings: GnssYawEstimatorSettings

    /// One hypothesis: velocity east and north (m/s), heading offset from the attitude filter's
    /// (radians, clockwise), their covariance's upper triangle (state order east, north, offset), and its
    /// weight.
    struct Hypothesis {
        var velocity = (east: 0.0, north: 0.0)
        var offset = 0.0
        var p00 = 0.0, p01 = 0.0, p02 = 0.0, p11 = 0.0, p12 = 0.0, p22 = 0.0
        var weight = 0.0
        /// The likelihood of the latest receiver velocity under this hypothesis.
        var likelihood = 0.0
    }
    var bank: [Hypothesis] = []
    /// Receiver epochs taken since the bank was last started.
    public private(set) var epochs = 0

    public init(settings: GnssYawEstimatorSettings = .init()) { self.settings = settings }

    /// True once the bank has been started from a receiver velocity.
    public var isRunning: Bool { !bank.isEmpty }

    /// Starts the bank afresh from the receiver's velocity (east, north, m/s, the attitude filter's
    /// frame) and its variance per axis (m^2/s^2): every heading equally likely.
    public mutating func start(velocity: Vector3, variance: Double) {
        let n = max(settings.hypotheses, 2)
        let spacing = 2 * Double.pi / Double(n)
        let r = velocityVariance(variance)
        // Each hypothesis stands for the arc around it: a uniform spread over the spacing has a variance
        // of spacing^2 / 12.
        let yawVariance = spacing * spacing / 12
        bank = (0..<n).map { i in
            var h = Hypothesis()
            h.velocity = (velocity.x, velocity.y)
            h.offset = wrappedRadians(Double(i) * spacing)
            (h.p00, h.p11, h.p22) = (r, r, yawVariance)
            h.weight = 1 / Double(n)
            return h
        }
        epochs = 0
    }

    /// Forgets everything (an outage: the next velocity starts the bank again).
    public mutating func stop() {
        bank.removeAll()
        epochs = 0
    }

    /// The attitude filter turned its heading by `-radians` (a correction dtheta_z): each offset keeps
    /// pointing at the same true heading.
    public mutating func noteHeadingCorrection(radians: Double) {
        for i in bank.indices { bank[i].offset = wrappedRadians(bank[i].offset + radians) }
    }

    func velocityVariance(_ reported: Double) -> Double {
        let floor = settings.minimumVelocitySigma * settings.minimumVelocitySigma
        return reported.isFinite ? max(reported, floor) : floor
    }

    /// One receiver epoch: `forceIntegral` the specific force integrated in the attitude filter's earth
    /// frame since the previous epoch (m/s, over `seconds`), `velocity` the receiver's (east, north,
    /// m/s, same frame) with its variance per axis (m^2/s^2).
    public mutating func update(forceIntegral: Vector3, seconds: Double, velocity: Vector3, variance: Double) {
        guard isRunning, seconds > 0, forceIntegral.isFinite, velocity.isFinite else { return }
        let r = velocityVariance(variance)
        let qv = settings.forceNoiseDensity * settings.forceNoiseDensity * seconds
        let qy = settings.yawNoiseDensity * settings.yawNoiseDensity * seconds
        for i in bank.indices {
            var h = bank[i]
            bank[i].likelihood = 0
            // The integrated force turned clockwise by the offset: the velocity change this heading predicts.
            let c = cos(h.offset), s = sin(h.offset)
            let dvx = forceIntegral.x * c + forceIntegral.y * s
            let dvy = -forceIntegral.x * s + forceIntegral.y * c
            h.velocity.east += dvx
            h.velocity.north += dvy
            // F = [[1, 0, dvy], [0, 1, -dvx], [0, 0, 1]]: d(dv)/d(offset).
            let (j0, j1) = (dvy, -dvx)
            let p02 = h.p02 + j0 * h.p22, p12 = h.p12 + j1 * h.p22
            let p00 = h.p00 + 2 * j0 * h.p02 + j0 * j0 * h.p22 + qv
            let p11 = h.p11 + 2 * j1 * h.p12 + j1 * j1 * h.p22 + qv
            let p01 = h.p01 + j0 * h.p12 + j1 * h.p02 + j0 * j1 * h.p22
            let p22 = h.p22 + qy
            // The receiver's velocity: H = [I2 0].
            let nx = velocity.x - h.velocity.east, ny = velocity.y - h.velocity.north
            let s00 = p00 + r, s01 = p01, s11 = p11 + r
            let det = s00 * s11 - s01 * s01
            guard det > 0 else { continue }
            let i00 = s11 / det, i01 = -s01 / det, i11 = s00 / det
            let mahalanobis = nx * (i00 * nx + i01 * ny) + ny * (i01 * nx + i11 * ny)
            h.likelihood = exp(-0.5 * mahalanobis) / (2 * Double.pi * det.squareRoot())
            // K = P H^T S^-1 (3x2).
            let k00 = p00 * i00 + p01 * i01, k01 = p00 * i01 + p01 * i11
            let k10 = p01 * i00 + p11 * i01, k11 = p01 * i01 + p11 * i11
            let k20 = p02 * i00 + p12 * i01, k21 = p02 * i01 + p12 * i11
            h.velocity.east += k00 * nx + k01 * ny
            h.velocity.north += k10 * nx + k11 * ny
            h.offset = wrappedRadians(h.offset + k20 * nx + k21 * ny)
            // P - K H P, with H P the first two rows of P.
            let n00 = p00 - (k00 * p00 + k01 * p01), n01 = p01 - (k00 * p01 + k01 * p11)
            let n02 = p02 - (k00 * p02 + k01 * p12), n11 = p11 - (k10 * p01 + k11 * p11)
            let n12 = p12 - (k10 * p02 + k11 * p12), n22 = p22 - (k20 * p02 + k21 * p12)
            (h.p00, h.p01, h.p02, h.p11, h.p12, h.p22) = (n00, n01, n02, n11, n12, max(n22, 1e-12))
            bank[i] = h
        }
        epochs += 1
        // Weights by likelihood; an epoch no hypothesis explains (an outlier) changes nothing.
        let total = bank.reduce(0) { $0 + $1.weight * $1.likelihood }
        guard total > 0, total.isFinite else { return }
        let floor = settings.weightFloor / Double(bank.count)
        var sum = 0.0
        for i in bank.indices {
            bank[i].weight = max(bank[i].weight * bank[i].likelihood / total, floor)
            sum += bank[i].weight
        }
        for i in bank.indices { bank[i].weight /= sum }
    }

    /// The heading offset from the attitude filter's heading (radians, clockwise: true heading minus
    /// the filter's) and its variance (rad^2); nil before the bank is started.
    public var offset: (radians: Double, variance: Double)? {
        guard isRunning else { return nil }
        var sx = 0.0, sy = 0.0
        for h in bank {
            sx += h.weight * cos(h.offset)
            sy += h.weight * sin(h.offset)
        }
        let mean = atan2(sy, sx)
        var variance = 0.0
        for h in bank {
            let d = wrappedRadians(h.offset - mean)
            variance += h.weight * (h.p22 + d * d)
        }
        return (mean, variance)
    }

    /// The largest weight: near 1 when one hypothesis explains the motion.
    public var largestWeight: Double { bank.map(\.weight).max() ?? 0 }
}
