#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#elseif canImport(Musl)
    import Musl
#endif

/// How far a compass whose readings nobody has calibrated yet can be off, from what the readings
/// themselves show.
///
/// An offset b fixed in the sensor (hard iron) adds 2 b.(R^T e) to the squared strength |m|^2 of the
/// raw readings: as the device turns, the strength changes unless b is small along the directions the
/// field moved through. A sphere fit of the readings, |m - b|^2 = r^2 (linear in b and r^2 - |b|^2),
/// therefore bounds b along those directions, and the heading error of an uncorrected compass is b's
/// east component over the horizontal field. Turning about the vertical, the one motion every carried
/// device makes, moves the field along east: exactly the component that matters. A device that never
/// turns leaves it unbounded, and the bound stays at 180 degrees.
///
/// The prior is "no offset" with a spread no sensor exceeds (`priorSigmaMicrotesla`), so directions
/// the turns never reached stay unknown. Readings closer than `spacingSeconds` are skipped, and the
/// residuals' remaining correlation (a field that changes with position as the device is carried
/// through it) widens the offset's spread as an AR(1) process would: such changes look like an offset
/// when the device barely turns, and the bound must not take them for evidence.
public struct UncalibratedHeadingEvidence: Sendable, Equatable {
    /// Least time between the readings that count, seconds.
    public static let spacingSeconds = 0.5
    /// Readings kept (the most recent), at `spacingSeconds` apart: ten minutes.
    static let capacity = 1200
    /// Readings needed before the residual's scatter is trusted (with four unknowns).
    static let minimumReadings = 12
    /// Prior spread of the offset per axis, microtesla: beyond the largest hard iron of a phone.
    static let priorSigmaMicrotesla = 1000.0
    /// Least scatter of a reading's strength assumed, microtesla: magnetometer noise and quantisation.
    static let strengthNoiseFloorMicrotesla = 0.2
    /// An uncalibrated sensor's axes differ in gain by up to a few percent (datasheet sensitivity
    /// tolerance), which turns the heading by up to half the difference; 2 % of gain difference: 0.01
    /// rad, added to the 95 % bound.
    static let gainMismatchRadians = 0.01
    /// Largest offset, as a fraction of the field, the readings may carry and still be bounded rather
    /// than calibrated: a quarter of the field turns the compass by up to 14 degrees.
    static let largestOffsetFraction = 0.25

    var readings: [Vector3] = []
    var next = 0
    var lastTime = -Double.infinity
    /// The offset found (microtesla, sensor frame) and its covariance (microtesla^2).
    public private(set) var offsetMicrotesla = Vector3.zero
    var offsetCovariance = Matrix3.identity * (priorSigmaMicrotesla * priorSigmaMicrotesla)
    /// Horizontal strength of the earth field in the latest counted reading, microtesla.
    var horizontalMicrotesla = 0.0
    /// Whether the fitted field's strength, and the latest reading's, are ones the earth's field has, and
    /// the offset small beside it.
    var radiusPlausible = false

    public init() {}

    /// Forgets every reading (a calibration is applied, or withdrawn and the readings start over).
    public mutating func reset() { self = .init() }

    /// Counts one raw reading (microtesla, sensor frame) taken at `time` (seconds) with the device at
    /// `rotation` (sensor to earth).
    public mutating func add(_ m: Vector3, rotation: Matrix3, at time: Double) {
        guard m.isFinite, time - lastTime >= Self.spacingSeconds || time < lastTime else { return }
        lastTime = time
        if readings.count < Self.capacity {
            readings.append(m)
        } else {
            readings[next] = m
            next = (next + 1) % Self.capacity
        }
        guard readings.count >= Self.minimumReadings else { return }
        solve()
        // The earth's horizontal field, not the reading's: an offset of hundreds of microtesla would
        // otherwise make the compass look steadier than it is.
        let earth = rotation * (m - offsetMicrotesla)
        horizontalMicrotesla = (earth.x * earth.x + earth.y * earth.y).squareRoot()
        // Readings bunched on a small patch of the sphere also fit a small sphere around themselves: only a
        // radius the earth's field can have is a fit of it. Readings far from any earth strength carry an
        // offset or a disturbance the filter cannot follow the compass through: no bound from them.
        // An offset that is a sizeable part of the field is a calibration to make, not an error to bound:
        // the strength then swings as the device turns, the gate rejects the readings and the filter no
        // longer follows the compass this bound is about.
        let plausible = TypicalEarthField.plausibleStrengthMicrotesla
        let radius = (m - offsetMicrotesla).norm
        radiusPlausible =
            plausible.contains(radius) && plausible.contains(m.norm)
            && offsetMicrotesla.norm <= Self.largestOffsetFraction * radius
    }

    /// Solves |m|^2 = 2 m.b + c (c = r^2 - |b|^2, eliminated by centring) over the kept readings, in
    /// time order, with the prior; then widens the covariance by the residuals' lag-one correlation.
    mutating func solve() {
        let n = Double(readings.count)
        var mean = Vector3.zero, meanY = 0.0
        for m in readings {
            mean += m
            meanY += m.squaredNorm
        }
        mean = mean / n
        meanY /= n
        var spread = Matrix3.identity * 0, cross = Vector3.zero
        for m in readings {
            let u = m - mean, y = m.squaredNorm - meanY
            spread = spread + Matrix3.outer(u, u) * 4
            cross += u * (2 * y)
        }
        let floor = 2 * mean.norm * Self.strengthNoiseFloorMicrotesla
        let priorPrecision = 1 / (Self.priorSigmaMicrotesla * Self.priorSigmaMicrotesla)
        // First with the floor's variance, then with the residuals' own.
        var variance = floor * floor, inflation = 1.0
        for _ in 0..<2 {
            guard let eigen = SymmetricEigen3(spread * (1 / variance) + Matrix3.identity * priorPrecision) else {
                return
            }
            let covariance = eigen.applying { 1 / Swift.max($0, priorPrecision) }
            let b = covariance * (cross * (1 / variance))
            offsetMicrotesla = b
            offsetCovariance = covariance * inflation
            (variance, inflation) = residualScatter(offset: b, mean: mean, meanY: meanY, floor: floor)
        }
    }

    /// The residuals' variance (at least `floor`^2) and the factor (1 + rho) / (1 - rho) an AR(1)
    /// correlation rho of successive residuals multiplies an average's variance by.
    func residualScatter(offset b: Vector3, mean: Vector3, meanY: Double, floor: Double) -> (Double, Double) {
        let n = readings.count
        var sum2 = 0.0, lag = 0.0, previous: Double?
        for k in 0..<n {
            let m = readings[(next + k) % n]
            let r = (m.squaredNorm - meanY) - 2 * (m - mean).dot(b)
            sum2 += r * r
            if let p = previous { lag += r * p }
            previous = r
        }
        let variance = Swift.max(sum2 / Double(n - 4), floor * floor)
        let rho = sum2 > 0 ? Swift.min(Swift.max(lag / sum2, 0), 0.95) : 0
        return (variance, (1 + rho) / (1 - rho))
    }

    /// The 95 % bound on the heading error of readings used uncorrected, radians in [0, pi], with the
    /// device's east axis `eastRow` (row 0 of the sensor-to-earth rotation): pi until enough readings
    /// count or when the turns seen leave the east offset unknown.
    public func headingBoundRadians(eastRow: Vector3) -> Double {
        guard readings.count >= Self.minimumReadings, radiusPlausible, horizontalMicrotesla > 1 else { return .pi }
        let along = eastRow.dot(offsetMicrotesla)
        let sigma = Swift.max(eastRow.dot(offsetCovariance * eastRow), 0).squareRoot()
        // The 95 % quantile of |N(along, sigma^2)|, within 1 % of the exact one.
        let offset = Swift.max(1.96 * sigma, abs(along) + 1.645 * sigma)
        // An offset as large as the horizontal field can point the compass anywhere.
        guard offset.isFinite, offset < horizontalMicrotesla else { return .pi }
        return Swift.min(asin(offset / horizontalMicrotesla) + Self.gainMismatchRadians, .pi)
    }
}
