/// Parameters of `MotorCurrentCompensator`.
public struct MotorCompensationSettings: Sendable, Equatable {
    /// The field the motors add per ampere drawn, microtesla per ampere, magnetometer axes (ArduPilot's
    /// compassmot, PX4's `CAL_MAG_COMP`). Fixed, or the start when learning. Default zero.
    public var coefficientsMicroteslaPerAmpere = Vector3.zero
    /// Learn the coefficients from the readings while the current varies. Default true.
    public var learn = true
    /// Span of one learning window, seconds. Within it the gyro carries the orientation: its bias b
    /// turns the frame by b x this (0.005 rad/s over 4 s is 1.1 degrees, about 1 uT of a 50 uT field),
    /// as in the gyro-aided hard-iron fit. Default 4.
    public var windowSeconds = 4.0
    /// A window teaches the coefficients only when the current varied within it: its standard deviation
    /// at least this, amperes. Default 1 (at 1 uT/A, 1 uT: above the per-axis noise of a consumer
    /// magnetometer).
    public var minimumCurrentDeviationAmperes = 1.0
    /// A window whose RMS residual per axis exceeds this, microtesla, is refused: an external
    /// disturbance or a hard iron changing within it does not fit the model. Default 1.25 (the
    /// gyro-aided fit's limit: about twice the noise of a consumer magnetometer).
    public var maximumResidualMicrotesla = 1.25
    /// Learned coefficients are applied once their standard uncertainty is at most this on every axis,
    /// microtesla per ampere. Default 0.02 (0.6 uT at 30 A).
    public var maximumUncertaintyMicroteslaPerAmpere = 0.02
    /// A current older than this, seconds, is no longer trusted for learning (the stream stopped);
    /// the last value is still applied. Default 1.
    public var maximumCurrentAgeSeconds = 1.0
    public init() {}
}

/// Removes the field a vehicle's own motors add, in proportion to the current they draw:
/// m' = m - k I, k in microtesla per ampere (magnetometer axes).
///
/// Learning needs no heading reference: within a window of a few seconds the gyro carries the
/// orientation, and each reading is u_i = c + R_i^T b + k I_i (c the hard iron, b the earth's field in
/// the window's first frame, R_i the rotation from the sensor at reading i to that frame). Nine
/// unknowns, linear; k is separable from c and b whenever the current varies, even at rest. Each
/// window's estimate comes with its uncertainty; estimates are combined by inverse variance.
public struct MotorCurrentCompensator: Sendable {
    public var settings: MotorCompensationSettings
    /// The coefficients applied, microtesla per ampere.
    public private(set) var coefficients: Vector3
    /// Standard uncertainty of the learned coefficients per axis, microtesla per ampere (infinite
    /// before a window was accepted).
    public var uncertainty: Vector3 {
        Vector3(
            information.x > 0 ? 1 / information.x.squareRoot() : .infinity,
            information.y > 0 ? 1 / information.y.squareRoot() : .infinity,
            information.z > 0 ? 1 / information.z.squareRoot() : .infinity)
    }
    /// True once learned coefficients are applied.
    public private(set) var learned = false
    /// Windows accepted and refused (current varied, but the model did not fit).
    public private(set) var windowsAccepted = 0, windowsRefused = 0
    /// The latest current drawn, amperes, and its time, seconds.
    public private(set) var currentAmperes: Double?
    var currentTime = -Double.infinity
    /// Inverse-variance sums per axis.
    var information = Vector3.zero, weightedSum = Vector3.zero
    var window = Window()

    public init(settings: MotorCompensationSettings = .init()) {
        self.settings = settings
        coefficients = settings.coefficientsMicroteslaPerAmpere
    }

    /// A new current reading: amperes drawn, at `time` seconds.
    public mutating func addCurrent(_ amperes: Double, time: Double) {
        guard amperes.isFinite, time.isFinite else { return }
        currentAmperes = amperes
        currentTime = time
    }

    /// Turns the learning window's frame by the gyro's reading (rad/s) over `dt` seconds.
    public mutating func addMotion(rate: Vector3, dt: Double) {
        guard settings.learn, rate.isFinite, dt > 0, window.count > 0 else { return }
        window.rotation = window.rotation * Quaternion(rotationVector: rate * dt).rotationMatrix
    }

    /// The reading with the motors' field removed, microtesla. `softIron` is the calibration's W: learning
    /// fits W m (the soft-iron corrected reading), so it finds W k and turns it back to k.
    public mutating func compensate(_ raw: Vector3, softIron: Matrix3 = .identity, time: Double) -> Vector3 {
        guard let amperes = currentAmperes else { return raw }
        if settings.learn && time - currentTime <= settings.maximumCurrentAgeSeconds && time.isFinite {
            learn(softIron * raw, amperes: amperes, time: time, softIron: softIron)
        }
        return raw - coefficients * amperes
    }

    mutating func learn(_ u: Vector3, amperes: Double, time: Double, softIron: Matrix3) {
        if window.count == 0 { window.start = time }
        window.add(u, amperes: amperes)
        guard time - window.start >= settings.windowSeconds else { return }
        defer { window = Window() }
        guard let estimate = window.solve(minimumCurrentDeviation: settings.minimumCurrentDeviationAmperes) else {
            return
        }
        guard estimate.rmsResidual <= settings.maximumResidualMicrotesla, let inverse = softIron.inverse else {
            windowsRefused += 1
            return
        }
        windowsAccepted += 1
        // The fit sees W k; k = W^-1 (W k). The variances are those of W k: close enough for a soft-iron
        // matrix near identity, which is what magnetometers have.
        let k = inverse * estimate.coefficients
        let w = Vector3(1 / estimate.variance.x, 1 / estimate.variance.y, 1 / estimate.variance.z)
        information += w
        weightedSum += Vector3(k.x * w.x, k.y * w.y, k.z * w.z)
        let u = uncertainty
        if max(u.x, u.y, u.z) <= settings.maximumUncertaintyMicroteslaPerAmpere {
            coefficients = Vector3(
                weightedSum.x / information.x, weightedSum.y / information.y, weightedSum.z / information.z)
            learned = true
        }
    }

    /// The running normal equations of one window: unknowns x = [c, b, k], rows A_i = [I, R_i^T, I_i I].
    struct Window: Sendable {
        var start = 0.0
        var count = 0
        var rotation = Matrix3.identity
        var normal = [Double](repeating: 0, count: 81)
        var rhs = [Double](repeating: 0, count: 9)
        var sumSquares = 0.0
        var currentSum = 0.0, currentSquares = 0.0

        mutating func add(_ u: Vector3, amperes i: Double) {
            count += 1
            currentSum += i
            currentSquares += i * i
            sumSquares += u.squaredNorm
            let r = rotation, rt = r.transposed
            // A_i^T A_i blocks: [[I, R^T, i I], [R, I, i R], [i I, i R^T, i^2 I]]; A_i^T u = [u, R u, i u].
            addBlock(0, 0, .identity)
            addBlock(0, 1, rt)
            addBlock(0, 2, .identity * i)
            addBlock(1, 0, r)
            addBlock(1, 1, .identity)
            addBlock(1, 2, r * i)
            addBlock(2, 0, .identity * i)
            addBlock(2, 1, rt * i)
            addBlock(2, 2, .identity * (i * i))
            addRight(0, u)
            addRight(1, r * u)
            addRight(2, u * i)
        }

        mutating func addBlock(_ bi: Int, _ bj: Int, _ m: Matrix3) {
            let base = 27 * bi + 3 * bj
            normal[base] += m.m00
            normal[base + 1] += m.m01
            normal[base + 2] += m.m02
            normal[base + 9] += m.m10
            normal[base + 10] += m.m11
            normal[base + 11] += m.m12
            normal[base + 18] += m.m20
            normal[base + 19] += m.m21
            normal[base + 20] += m.m22
        }

        mutating func addRight(_ bi: Int, _ v: Vector3) {
            rhs[3 * bi] += v.x
            rhs[3 * bi + 1] += v.y
            rhs[3 * bi + 2] += v.z
        }

        struct Estimate {
            var coefficients: Vector3
            var variance: Vector3
            var rmsResidual: Double
        }

        /// The coefficients with their variances, or nil when the current hardly varied.
        func solve(minimumCurrentDeviation: Double) -> Estimate? {
            guard count >= 20 else { return nil }
            let n = Double(count)
            let mean = currentSum / n
            guard (currentSquares / n - mean * mean).squareRoot() >= minimumCurrentDeviation else { return nil }
            // At rest c and b enter only as their sum: a faint ridge on both splits it without touching k.
            var a = normal
            for j in 0..<6 { a[j * 9 + j] += 1e-6 * n }
            guard let factor = Cholesky9(a) else { return nil }
            let x = factor.solve(rhs)
            // RSS = sum |u|^2 - 2 x.rhs + x^T N x (N without the ridge).
            var quadratic = 0.0
            for r in 0..<9 {
                var row = 0.0
                for c in 0..<9 { row += normal[r * 9 + c] * x[c] }
                quadratic += x[r] * row
            }
            var dot = 0.0
            for j in 0..<9 { dot += x[j] * rhs[j] }
            let rss = max(0, sumSquares - 2 * dot + quadratic)
            let sigma2 = rss / max(1, 3 * n - 9)
            var variance = [0.0, 0.0, 0.0]
            for axis in 0..<3 {
                var e = [Double](repeating: 0, count: 9)
                e[6 + axis] = 1
                variance[axis] = sigma2 * factor.solve(e)[6 + axis]
            }
            guard variance.allSatisfy({ $0 > 0 && $0.isFinite }) else { return nil }
            return Estimate(
                coefficients: Vector3(x[6], x[7], x[8]), variance: Vector3(variance[0], variance[1], variance[2]),
                rmsResidual: (rss / (3 * n)).squareRoot())
        }
    }
}

/// Cholesky factor of a symmetric positive-definite 9 x 9 matrix (row-major), for the window's
/// normal equations.
struct Cholesky9 {
    var l = [Double](repeating: 0, count: 81)

    init?(_ a: [Double]) {
        for i in 0..<9 {
            for j in 0...i {
                var s = a[i * 9 + j]
                for k in 0..<j { s -= l[i * 9 + k] * l[j * 9 + k] }
                if i == j {
                    guard s > 1e-12 else { return nil }
                    l[i * 9 + i] = s.squareRoot()
                } else {
                    l[i * 9 + j] = s / l[j * 9 + j]
                }
            }
        }
    }

    func solve(_ b: [Double]) -> [Double] {
        var y = b
        for i in 0..<9 {
            for k in 0..<i { y[i] -= l[i * 9 + k] * y[k] }
            y[i] /= l[i * 9 + i]
        }
        for i in stride(from: 8, through: 0, by: -1) {
            for k in (i + 1)..<9 { y[i] -= l[k * 9 + i] * y[k] }
            y[i] /= l[i * 9 + i]
        }
        return y
    }
}
