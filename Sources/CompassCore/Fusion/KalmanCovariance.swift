/// The covariance of the Kalman filter's error state (a small earth-frame rotation and the gyro bias
/// error) as three 3x3 blocks: attitude (rad^2), attitude-bias (rad^2/s), bias (rad^2/s^2). Its
/// algebra is here; which measurement is applied when is `KalmanFilter`'s business.
public struct KalmanCovariance: Sendable, Equatable {
    public var attitude: Matrix3, cross: Matrix3, bias: Matrix3

    public init(attitude: Matrix3, cross: Matrix3, bias: Matrix3) {
        self.attitude = attitude
        self.cross = cross
        self.bias = bias
    }

    /// Attitude and bias uncorrelated, each axis independent: tilt and heading sigmas in radians, the
    /// bias sigma in rad/s.
    init(tiltSigma: Double, headingSigma: Double, biasSigma: Double) {
        attitude = Matrix3.diagonal(Vector3(tiltSigma * tiltSigma, tiltSigma * tiltSigma, headingSigma * headingSigma))
        cross = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
        bias = Matrix3.diagonal(Vector3(biasSigma * biasSigma, biasSigma * biasSigma, biasSigma * biasSigma))
    }

    /// Every block finite (the filter restarts otherwise).
    var isFinite: Bool { attitude.isFinite && bias.isFinite }

    /// Applies P <- F P F^T + Q for an accumulated propagation (its heading widening is applied when it
    /// happens, by `widenHeading`, not here).
    @inline(__always)
    mutating func propagate(by p: KalmanPropagation) {
        let g = p.g
        let gt = g.transposed
        let gc = g * bias
        let y = cross * gt
        // A' = A + Y + Y^T + (G C) G^T is symmetric: form its upper triangle and mirror it.
        var a = attitude
        a.m00 += 2 * y.m00 + gc.row0.dot(g.row0)
        a.m11 += 2 * y.m11 + gc.row1.dot(g.row1)
        a.m22 += 2 * y.m22 + gc.row2.dot(g.row2)
        a.m01 += y.m01 + y.m10 + gc.row0.dot(g.row1)
        a.m10 = a.m01
        a.m02 += y.m02 + y.m20 + gc.row0.dot(g.row2)
        a.m20 = a.m02
        a.m12 += y.m12 + y.m21 + gc.row1.dot(g.row2)
        a.m21 = a.m12
        cross = cross + gc
        attitude = a.addingToDiagonal(p.attitudeNoise)
        bias = bias.addingToDiagonal(p.biasNoise)
    }

    /// The heading (earth z) variance after a pending propagation, rad^2: (A + B G^T + G B^T + G C G^T
    /// + Q)_22, without forming the rest.
    @inline(__always)
    func headingVariance(pending p: KalmanPropagation) -> Double {
        let g2 = p.g.row2
        return attitude.m22 + 2 * cross.row2.dot(g2) + g2.dot(bias * g2) + p.attitudeNoise
    }

    /// 1-sigma uncertainty of the bias about the earth-frame direction `up` (a sensor-frame unit
    /// vector), rad/s: the rate at which the bias error drifts the heading.
    @inline(__always)
    func biasSigma(along up: Vector3) -> Double {
        max(0, up.dot(bias * up)).squareRoot()
    }

    /// The larger of the two tilt sigmas, rad.
    var tiltSigma: Double { max(attitude.m00, attitude.m11, 0).squareRoot() }

    /// The heading may be off by about `radians` more than thought: its variance grows by the square.
    mutating func widenHeading(byRadians radians: Double) {
        attitude.m22 += radians * radians
    }

    /// A heading found anew: its variance, uncorrelated with tilt and bias.
    mutating func resetHeading(variance: Double) {
        attitude.m02 = 0
        attitude.m20 = 0
        attitude.m12 = 0
        attitude.m21 = 0
        attitude.m22 = variance
        cross = Matrix3(cross.m00, cross.m01, cross.m02, cross.m10, cross.m11, cross.m12, 0, 0, 0)
    }

    /// One scalar measurement h . dtheta of the attitude error (h in the earth frame) with noise
    /// `variance`; the correction accumulates in `correction`.
    @inline(__always)
    mutating func measure(
        attitude h: Vector3, residual: Double, variance: Double, _ correction: inout KalmanCorrection
    ) {
        let pa = attitude * h
        let pb = cross.row0 * h.x + cross.row1 * h.y + cross.row2 * h.z
        downdate(pa: pa, pb: pb, innovationVariance: h.dot(pa) + variance, residual: residual, &correction)
    }

    /// One scalar measurement of one error-state component.
    @inline(__always)
    mutating func measure(
        _ component: KalmanErrorComponent, residual: Double, variance: Double, _ correction: inout KalmanCorrection
    ) {
        let pa: Vector3, pb: Vector3, pii: Double
        switch component {
        case .tiltEast:
            pa = attitude.column0
            pb = cross.row0
            pii = attitude.m00
        case .tiltNorth:
            pa = attitude.column1
            pb = cross.row1
            pii = attitude.m11
        case .heading:
            pa = attitude.column2
            pb = cross.row2
            pii = attitude.m22
        case .biasX:
            pa = cross.column0
            pb = bias.column0
            pii = bias.m00
        case .biasY:
            pa = cross.column1
            pb = bias.column1
            pii = bias.m11
        case .biasZ:
            pa = cross.column2
            pb = bias.column2
            pii = bias.m22
        }
        downdate(pa: pa, pb: pb, innovationVariance: pii + variance, residual: residual, &correction)
    }

    /// The gain and downdate of one scalar measurement, given P H^T split into its attitude (`pa`) and
    /// bias (`pb`) parts and H P H^T + R. The diagonal blocks stay exactly symmetric: their downdate
    /// p p^T / s is formed once per pair.
    @inline(__always)
    mutating func downdate(
        pa: Vector3, pb: Vector3, innovationVariance: Double, residual: Double, _ correction: inout KalmanCorrection
    ) {
        let inv = 1 / innovationVariance
        let ka = pa * inv, kb = pb * inv
        correction.attitude += ka * residual
        correction.bias += kb * residual
        attitude.subtractSymmetricOuter(ka, pa)
        cross = cross - Matrix3.outer(ka, pb)
        bias.subtractSymmetricOuter(kb, pb)
    }
}

/// One component of the error state: the earth-frame attitude error about east, north and up (the
/// heading), and the sensor-frame gyro bias error.
enum KalmanErrorComponent: Sendable {
    case tiltEast, tiltNorth, heading, biasX, biasY, biasZ
}

/// The error-state correction gathered over one measurement update: an earth-frame rotation (rad)
/// and a gyro bias change (rad/s), injected into the state at the end of the update.
struct KalmanCorrection: Sendable {
    var attitude = Vector3.zero
    var bias = Vector3.zero
}

/// The propagation over one measurement interval: F = [[I, G], [0, I]], Q = diag(attitude noise,
/// bias noise) (rad^2 and rad^2/s^2 per axis). F composes by adding the G's and the noises add, so a
/// whole interval is applied at once (exact but for G Q_b G^T terms within one interval, below
/// 1e-18 rad^2).
struct KalmanPropagation: Sendable {
    var g: Matrix3
    var attitudeNoise: Double, biasNoise: Double
    /// The heading's widening within the interval (a calibration renewed, a start taken back), rad^2,
    /// on the earth z axis only. It commutes with F (it touches the attitude block alone), so when it
    /// happened within the interval does not matter.
    var headingWidening = 0.0
    static let none = KalmanPropagation(g: Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0), attitudeNoise: 0, biasNoise: 0)

    /// Adds one gyro step: F = [[I, -R dt], [0, I]] (earth-frame attitude error, sensor-frame bias),
    /// the gyro's white noise growing with the rate (scale-factor error), the bias's random walk (the
    /// `KalmanFilterSettings` of the same names; numbers rather than the settings, which a per-sample
    /// call would otherwise copy).
    @inline(__always)
    mutating func accumulate(
        rotation r: Matrix3, dt: Double, rate: Double, gyroNoiseDensity: Double, gyroRateNoise: Double,
        gyroBiasRandomWalk: Double
    ) {
        g = g - r * dt
        let rateNoise = gyroRateNoise * rate
        attitudeNoise += (gyroNoiseDensity * gyroNoiseDensity + rateNoise * rateNoise) * dt
        biasNoise += gyroBiasRandomWalk * gyroBiasRandomWalk * dt
    }

    /// The same propagation without its motion and noise (once they are applied), the heading
    /// widening kept for the record.
    var applied: KalmanPropagation {
        KalmanPropagation(
            g: Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0), attitudeNoise: 0, biasNoise: 0, headingWidening: headingWidening)
    }
}
