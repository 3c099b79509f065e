#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The hard-iron offset from ordinary handling, with the accelerometer's help: the earth's field has a
/// fixed strength B and a fixed component z along the vertical, so every reading m_i, taken with the
/// vertical u_i (sensor frame), satisfies |m_i - c| = B and (m_i - c) . u_i = z. A sensor turned about
/// the vertical only (a phone carried flat, a robot on the floor) puts the readings on a circle: the
/// sphere fit alone cannot place the centre along the circle's axis, but with the vertical component
/// and a prior on the strength it can; and the heading never depends on that axis while the turning
/// stays about it. Five unknowns (c, B, z), solved by Gauss-Newton with the strength prior as one more
/// residual. No gyro integration is involved, so a gyro bias of several degrees per second does not
/// enter (the vertical comes from the accelerometer, steadied by the gyro over a second).
public enum GravityAidedHardIronFit {
    /// One reading with the vertical at its time.
    public struct Reading: Sendable, Equatable {
        /// The field with any soft-iron correction applied (no offset removed), microtesla.
        public var field: Vector3
        /// Unit vector up (against gravity), sensor frame.
        public var up: Vector3
        public init(field: Vector3, up: Vector3) {
            self.field = field
            self.up = up
        }
    }

    /// What one fit gives.
    public struct Solution: Sendable, Equatable {
        /// Offset of the soft-iron corrected readings, microtesla.
        public var correctedOffset: Vector3
        /// Field strength, microtesla.
        public var strengthMicrotesla: Double
        /// Dip below the horizon, degrees.
        public var dipDegrees: Double
        /// RMS of the sphere and vertical residuals together, microtesla.
        public var rmsResidualMicrotesla: Double
        /// Mean resultant length of the horizontal field's directions (see the settings).
        public var horizontalResultant: Double
        /// 1-sigma heading error the offset's uncertainty causes over these readings, degrees: the
        /// offset's covariance (from the residuals and the geometry) projected, at each reading, onto
        /// the plane its vertical makes horizontal, over the horizontal field. An offset the turning
        /// leaves open along the vertical costs nothing while the device stays level, and costs as
        /// the device tilts. Includes `softIronStretch`.
        public var headingSigmaDegrees: Double
        /// The stretch e the strength residual shows at twice the horizontal angle (soft iron the fit
        /// does not model): it turns the heading by up to e radians, e / sqrt(2) RMS.
        public var softIronStretch: Double
        public var readingCount: Int
        /// The arc the horizontal field turned through about the mean vertical, degrees: 360 less the
        /// widest gap between the readings' horizontal directions.
        public var arcDegrees: Double

        /// The horizontal field's strength, microtesla (nil for a dip of 90 degrees).
        public var horizontalFieldMicrotesla: Double? {
            let h = strengthMicrotesla * cos(dipDegrees * radiansPerDegree)
            return h > 0 ? h : nil
        }
    }

    /// The per-reading noise the strength prior is weighed against, microtesla.
    static let readingNoiseMicrotesla = 1.5
    /// 1-sigma prior of the soft-iron stretch in the offset's uncertainty (see `fit`).
    static let stretchPriorSigma = 0.3

    /// `fit`, then again without the readings the fit leaves far outside its noise (a magnet passed,
    /// steel nearby: a field fixed in the world, which no hard iron explains), twice at most. The
    /// solution describes the readings kept; nil when fewer than `minimumInlierShare` of them are.
    public static func robustFit(
        _ readings: [Reading], start: Vector3? = nil, settings: GravityAidedFitSettings = .init()
    ) -> Solution? {
        guard var solution = fit(readings, start: start, settings: settings) else { return nil }
        var kept = readings
        var limit = Double.infinity
        for _ in 0..<2 {
            let misses = readings.map { miss($0, solution) }
            limit = max(3 * robustScale(misses), 2 * readingNoiseMicrotesla)
            let inliers = zip(readings, misses).filter { $0.1 <= limit }.map(\.0)
            guard inliers.count != kept.count else { break }
            guard Double(inliers.count) >= minimumInlierShare * Double(readings.count),
                let next = fit(inliers, start: solution.correctedOffset, settings: settings)
            else { return nil }
            kept = inliers
            solution = next
        }
        // Soft iron is judged on every reading, each residual clipped at the outlier limit: dropping the
        // far ends of an ellipse would make it look like a circle, clipping keeps its shape while a
        // passing magnet's readings weigh no more than any other.
        if kept.count < readings.count, let horizontal = solution.horizontalFieldMicrotesla {
            let stretch = Self.stretch(
                ellipticity(
                    readings, angles: horizontalAngles(readings, offset: solution.correctedOffset),
                    offset: solution.correctedOffset, strength: solution.strengthMicrotesla, clip: limit),
                strength: solution.strengthMicrotesla, horizontal: horizontal)
            if stretch > solution.softIronStretch {
                let sigma = solution.headingSigmaDegrees * radiansPerDegree
                let own = max(0, sigma * sigma - solution.softIronStretch * solution.softIronStretch / 2)
                solution.headingSigmaDegrees = (own + stretch * stretch / 2).squareRoot() * degreesPerRadian
                solution.softIronStretch = stretch
            }
        }
        return solution
    }

    /// The stretch e from the strength residual's harmonic amplitude: |m - c| = sqrt(h^2 + z^2) moves
    /// by (h / B) dh, so e = amplitude x B / h^2.
    static func stretch(_ amplitude: Double, strength: Double, horizontal: Double) -> Double {
        horizontal > 0 ? amplitude * strength / (horizontal * horizontal) : 0
    }

    /// Share of the readings a robust fit must keep. Default 0.7: a magnet passed for a few seconds of
    /// the window, not most of it.
    public static let minimumInlierShare = 0.7

    /// How far a reading is from a solution: the RMS of its radial and vertical residuals, microtesla.
    static func miss(_ r: Reading, _ s: Solution) -> Double {
        let d = r.field - s.correctedOffset
        let radial = d.norm - s.strengthMicrotesla
        let along = d.dot(r.up) + s.strengthMicrotesla * sin(s.dipDegrees * radiansPerDegree)
        return ((radial * radial + along * along) / 2).squareRoot()
    }

    /// Fits the readings, starting from `start` (a centre estimate; nil = the readings' mean, moved
    /// down by the expected vertical component). Nil when there are too few readings or the solve
    /// fails; the caller judges the solution against the settings.
    public static func fit(
        _ readings: [Reading], start: Vector3? = nil, settings: GravityAidedFitSettings = .init()
    ) -> Solution? {
        guard readings.count >= max(8, settings.minimumReadings) else { return nil }
        // The prior as one more residual, (B - B0) scaled by a reading's noise over the prior's spread
        // (MAP with 1.5 uT per reading): it settles what the readings leave open and little else.
        let priorWeight = Self.readingNoiseMicrotesla / max(settings.strengthSigmaMicrotesla, 1e-6)
        guard
            let (c, strength, vertical) = gaussNewton(
                readings, start: start, settings: settings, priorWeight: priorWeight),
            strength > 0, c.isFinite
        else { return nil }
        return solution(readings, offset: c, strength: strength, vertical: vertical, priorWeight: priorWeight)
    }

    /// Gauss-Newton on (c, B, z) with the strength prior weighted by `priorWeight`; nil when the solve
    /// fails or the cost is not finite.
    static func gaussNewton(
        _ readings: [Reading], start: Vector3?, settings: GravityAidedFitSettings, priorWeight: Double
    ) -> (c: Vector3, strength: Double, vertical: Double)? {
        let n = Double(readings.count)
        let b0 = settings.expectedStrengthMicrotesla
        // The start: readings' mean raised by a 60-degree dip's vertical component (northern hemisphere;
        // where the turning pins the centre the solve moves it, where it does not the heading is the same).
        var c: Vector3
        if let start {
            c = start
        } else {
            let mean = readings.reduce(Vector3.zero) { $0 + $1.field } / n
            let up = (readings.reduce(Vector3.zero) { $0 + $1.up } / n).normalized ?? Vector3(0, 0, 1)
            c = mean + up * (b0 * sin(TypicalEarthField.dipDegrees * radiansPerDegree))
        }
        var strength = b0
        var vertical = readings.reduce(0.0) { $0 + ($1.field - c).dot($1.up) } / n
        var cost = Double.infinity
        var best = (c: c, strength: strength, vertical: vertical)
        for _ in 0..<30 {
            // Normal equations J^T J x = -J^T r for the parameters (c, B, z).
            var jtj = [Double](repeating: 0, count: 25), jtr = [Double](repeating: 0, count: 5)
            var sum = 0.0
            func accumulate(_ j: [Double], _ r: Double) {
                for a in 0..<5 {
                    guard j[a] != 0 else { continue }
                    jtr[a] += j[a] * r
                    for b in 0..<5 { jtj[a * 5 + b] += j[a] * j[b] }
                }
                sum += r * r
            }
            for reading in readings {
                let d = reading.field - c
                let length = d.norm
                guard length > 1e-9 else { continue }
                let g = d / length
                accumulate([-g.x, -g.y, -g.z, -1, 0], length - strength)
                let u = reading.up
                accumulate([-u.x, -u.y, -u.z, 0, -1], d.dot(u) - vertical)
            }
            // The prior (B - B0) / sigma, scaled to a reading's weight: it only settles what the readings leave open.
            let r = (strength - b0) * priorWeight
            accumulate([0, 0, 0, priorWeight, 0], r)
            guard sum.isFinite else { return nil }
            if sum >= cost {
                (c, strength, vertical) = best
                break
            }
            cost = sum
            best = (c, strength, vertical)
            // A small ridge keeps the solve defined along a direction the readings leave open.
            for a in 0..<5 { jtj[a * 5 + a] += 1e-9 * max(1, jtj[a * 5 + a]) }
            guard
                case .success(let solution) = LeastSquares.solve(
                    rowMajor: jtj, unknowns: 5, rhs: jtr.map { -$0 }, minimumConditioning: 1e-14)
            else { return nil }
            let step = solution.x
            c = c + Vector3(step[0], step[1], step[2])
            strength += step[3]
            vertical += step[4]
            if step.reduce(0, { $0 + $1 * $1 }) < 1e-12 { break }
        }
        return (c, strength, vertical)
    }

    /// The solution at (c, B, z): residuals, dip, and the heading's uncertainty from the information
    /// of the parameters and of a soft-iron stretch the fit leaves out.
    static func solution(
        _ readings: [Reading], offset c: Vector3, strength: Double, vertical: Double, priorWeight: Double
    ) -> Solution {
        let n = Double(readings.count)
        var squares = 0.0, horizontalSum = Vector3.zero
        // The information of (c, B, z) and of a soft-iron stretch the fit leaves out (the strength
        // residual's harmonic at twice the horizontal angle, amplitudes a and b): over part of a turn
        // an ellipse's arc is matched by a circle with another centre, and the offset's marginal
        // uncertainty then says so.
        var information = SquareMatrix(size: 7)
        let angles = horizontalAngles(readings, offset: c)
        for (reading, theta) in zip(readings, angles) {
            let d = reading.field - c
            let radial = d.norm - strength, along = d.dot(reading.up) - vertical
            squares += radial * radial + along * along
            let horizontal = d - reading.up * d.dot(reading.up)
            if let h = horizontal.normalized { horizontalSum += h }
            if let g = d.normalized {
                information.addOuter([-g.x, -g.y, -g.z, -1, 0, -cos(2 * theta), -sin(2 * theta)])
                information.addOuter([-reading.up.x, -reading.up.y, -reading.up.z, 0, -1, 0, 0])
            }
        }
        information.addOuter([0, 0, 0, priorWeight, 0, 0, 0])
        let dip = -asin(min(1, max(-1, vertical / strength))) * degreesPerRadian
        let variance = squares / max(1, 2 * n - 5)
        let horizontalField = (strength * strength - vertical * vertical).squareRoot()
        // The stretch's prior: up to a third either way (amplitude e h^2 / B), far wider than any real
        // device's, so that only the turning, not the prior, can settle it.
        let stretchPrior =
            readingNoiseMicrotesla / max(1e-6, Self.stretchPriorSigma * horizontalField * horizontalField / strength)
        information.addOuter([0, 0, 0, 0, 0, stretchPrior, 0])
        information.addOuter([0, 0, 0, 0, 0, 0, stretchPrior])
        var headingVariance = Double.infinity
        if let inverse = information.inverse, horizontalField > 0 {
            // Offset covariance (top-left 3x3) projected per reading onto its horizontal plane.
            let sigma =
                Matrix3(
                    inverse[0], inverse[1], inverse[2], inverse[7], inverse[8], inverse[9], inverse[14], inverse[15],
                    inverse[16]) * variance
            var sum = 0.0
            for reading in readings {
                let u = reading.up
                let projection = Matrix3.identity - Matrix3.outer(u, u)
                let p = projection * sigma * projection
                sum += (p.m00 + p.m11 + p.m22) / 2
            }
            headingVariance = sum / n / (horizontalField * horizontalField)
        }
        // Soft iron the fit does not model stretches the circle into an ellipse: the strength residual
        // then follows twice the horizontal angle, and the heading errs by up to the stretch e (rad),
        // e / sqrt(2) RMS over the turn. The amplitude of that harmonic gives e.
        let stretch = Self.stretch(
            ellipticity(readings, angles: angles, offset: c, strength: strength, clip: .infinity),
            strength: strength, horizontal: horizontalField)
        headingVariance += stretch * stretch / 2
        return Solution(
            correctedOffset: c, strengthMicrotesla: strength, dipDegrees: dip,
            rmsResidualMicrotesla: (squares / (2 * n)).squareRoot(), horizontalResultant: horizontalSum.norm / n,
            headingSigmaDegrees: headingVariance.squareRoot() * degreesPerRadian, softIronStretch: stretch,
            readingCount: readings.count, arcDegrees: arc(angles))
    }

    /// Each reading's horizontal direction from `c`, rad, about the readings' mean vertical.
    static func horizontalAngles(_ readings: [Reading], offset c: Vector3) -> [Double] {
        let (e1, e2) = horizontalBasis(readings)
        return readings.map { r in
            let d = r.field - c
            return atan2(d.dot(e2), d.dot(e1))
        }
    }

    /// 360 degrees less the widest gap between the horizontal directions (`horizontalAngles`).
    static func arc(_ radians: [Double]) -> Double {
        let angles = radians.map { $0 * degreesPerRadian }.sorted()
        guard let first = angles.first, let last = angles.last else { return 0 }
        var gap = first + 360 - last
        for (a, b) in zip(angles, angles.dropFirst()) { gap = max(gap, b - a) }
        return 360 - gap
    }

    /// Two unit vectors spanning the plane perpendicular to the readings' mean vertical.
    static func horizontalBasis(_ readings: [Reading]) -> (Vector3, Vector3) {
        let meanUp = readings.reduce(Vector3.zero) { $0 + $1.up }.normalized ?? Vector3(0, 0, 1)
        let seed = abs(meanUp.x) < 0.9 ? Vector3(1, 0, 0) : Vector3(0, 1, 0)
        let e1 = (seed - meanUp * seed.dot(meanUp)).normalized ?? Vector3(1, 0, 0)
        return (e1, meanUp.cross(e1))
    }

    /// Amplitude of the strength residual's component at twice the horizontal angle, microtesla (least
    /// squares on 1, cos 2 theta, sin 2 theta; theta measured about the mean vertical).
    static func ellipticity(
        _ readings: [Reading], angles: [Double], offset c: Vector3, strength: Double, clip: Double
    ) -> Double {
        var rows: [Double] = [], rhs: [Double] = []
        for (r, theta) in zip(readings, angles) {
            let d = r.field - c
            rows += [1, cos(2 * theta), sin(2 * theta)]
            rhs.append(min(clip, max(-clip, d.norm - strength)))
        }
        guard
            case .success(let s) = LeastSquares.solve(rowMajor: rows, unknowns: 3, rhs: rhs, minimumConditioning: 1e-6)
        else { return 0 }
        return (s.x[1] * s.x[1] + s.x[2] * s.x[2]).squareRoot()
    }
}

/// The vertical in the sensor frame from the gyro and the accelerometer (a complementary filter): the
/// gyro turns it, the specific force pulls it over `timeConstant` seconds while its strength is within
/// a fifth of g (a step's or a swing's acceleration beyond that says nothing about up).
public struct VerticalTracker: Sendable, Equatable {
    public private(set) var up: Vector3?
    public init() {}

    public mutating func update(rate: Vector3, specificForce f: Vector3, dt: Double, timeConstant: Double) {
        guard let measured = f.normalized else { return }
        guard var u = up else {
            up = measured
            return
        }
        // A direction fixed in the world, seen from a frame turning at `rate`: du/dt = u x rate.
        u = u + u.cross(rate) * dt
        let g = f.norm
        if abs(g - standardGravity) < 0.2 * standardGravity {
            u = u + (measured - u) * min(1, dt / max(timeConstant, dt))
        }
        up = u.normalized ?? measured
    }
}

/// A symmetric square matrix built from outer products, row-major (the fit's information matrix).
struct SquareMatrix {
    let size: Int
    var values: [Double]

    init(size: Int) {
        self.size = size
        values = [Double](repeating: 0, count: size * size)
    }

    mutating func addOuter(_ j: [Double]) {
        for a in 0..<size where j[a] != 0 { for b in 0..<size { values[a * size + b] += j[a] * j[b] } }
    }

    /// The inverse by Gauss-Jordan with partial pivoting, row-major; nil when singular.
    var inverse: [Double]? {
        let n = size
        var a = values
        var inv = [Double](repeating: 0, count: n * n)
        for i in 0..<n { inv[i * n + i] = 1 }
        let scale = values.map(abs).max() ?? 0
        guard scale > 0 else { return nil }
        for col in 0..<n {
            var pivot = col
            for r in col..<n where abs(a[r * n + col]) > abs(a[pivot * n + col]) { pivot = r }
            guard abs(a[pivot * n + col]) > 1e-13 * scale else { return nil }
            if pivot != col {
                for k in 0..<n {
                    a.swapAt(pivot * n + k, col * n + k)
                    inv.swapAt(pivot * n + k, col * n + k)
                }
            }
            let d = a[col * n + col]
            for k in 0..<n {
                a[col * n + k] /= d
                inv[col * n + k] /= d
            }
            for r in 0..<n where r != col {
                let f = a[r * n + col]
                guard f != 0 else { continue }
                for k in 0..<n {
                    a[r * n + k] -= f * a[col * n + k]
                    inv[r * n + k] -= f * inv[col * n + k]
                }
            }
        }
        return inv
    }
}
