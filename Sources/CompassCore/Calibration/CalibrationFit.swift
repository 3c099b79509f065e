#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why a calibration fit was refused. Every case says what about the readings is wrong.
public enum CalibrationFitError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooFewReadings(count: Int, minimum: Int)
    case nonFiniteReading(index: Int)
    /// The readings lie on (nearly) one line: the sensor hardly turned.
    case collinearReadings
    /// The readings lie in (nearly) one plane: the sensor turned about one axis only.
    case coplanarReadings
    /// The readings cover one side of the sphere only (mean resultant length of their directions
    /// from the fitted centre, 0 = all round, 1 = one point).
    case oneSided(meanResultantLength: Double, maximum: Double)
    /// The least-squares problem is too ill-conditioned to trust.
    case illConditioned(conditioning: Double)
    /// The fitted quadric is not a sphere or ellipsoid (negative radius or axis).
    case notAnEllipsoid

    public var description: String {
        switch self {
        case .tooFewReadings(let c, let m): return "too few readings: \(c), need at least \(m)"
        case .nonFiniteReading(let i): return "reading \(i) has a NaN or infinite component"
        case .collinearReadings: return "readings are collinear: turn the sensor in every direction"
        case .coplanarReadings: return "readings are coplanar: the sensor turned about one axis only"
        case .oneSided(let r, let m):
            return "readings cover one side only (mean resultant length \(r), at most \(m) allowed)"
        case .illConditioned(let c): return "fit is ill-conditioned (conditioning \(c))"
        case .notAnEllipsoid: return "the readings do not describe an ellipsoid"
        }
    }
}

/// A calibration together with the evidence for it.
public struct CalibrationFit: Sendable, Equatable {
    /// sphere: hard iron and radius; ellipsoid: soft iron too; gyroAided: a new hard iron from a few
    /// seconds of turning (`GyroAidedHardIronFit`), the soft iron kept; gravityAided: hard iron and
    /// strength from readings with their verticals (`GravityAidedHardIronFit`), the soft iron kept;
    /// asIs: no correction, the readings being calibrated already (a fit explained them no better than
    /// the readings as they come, and those lie on a sphere of a plausible strength).
    public enum Model: String, Sendable {
        case sphere, ellipsoid, gyroAided = "gyro-aided", gravityAided = "gravity-aided", asIs = "as-is"
    }
    public var model: Model
    public var calibration: MagnetometerCalibration
    /// RMS of |calibrated| - radius over the readings, microtesla.
    public var rmsResidualMicrotesla: Double
    /// Mean resultant length of the calibrated directions (0 = surrounding the centre evenly).
    public var meanResultantLength: Double
    /// Fraction of 32 evenly spread directions that have a reading within 40 degrees (0...1).
    public var directionCoverage: Double
    public var readingCount: Int
}

/// Settings shared by the sphere and ellipsoid fits.
public struct CalibrationFitSettings: Sendable, Equatable {
    /// Refuse readings whose directions from the fitted centre have a mean resultant length above
    /// this (a uniform hemisphere has 0.5). Default 0.6.
    public var maximumMeanResultantLength: Double = 0.6
    /// Refuse scatter whose smallest/largest eigenvalue ratio is below this. Default 1e-6.
    public var minimumScatterRatio: Double = 1e-6
    public init() {}
}

/// Hard- and soft-iron calibration by linear least squares.
public enum CalibrationFitter {
    /// Minimum readings for the sphere fit (4 unknowns, twice over).
    public static let minimumSphereReadings = 8
    /// Minimum readings for the ellipsoid fit (9 unknowns, twice over).
    public static let minimumEllipsoidReadings = 18

    /// Hard-iron calibration: the sphere |m - c| = r fitted as the linear problem
    /// |m|^2 = 2 c.m + (r^2 - |c|^2) in the unknowns (c, k). Readings in microtesla.
    public static func fitSphere(_ readings: [Vector3], settings: CalibrationFitSettings = .init())
        -> Result<CalibrationFit, CalibrationFitError>
    {
        switch prepare(readings, minimum: minimumSphereReadings, settings: settings) {
        case .failure(let e): return .failure(e)
        case .success(let mean):
            var a = [Double]()
            a.reserveCapacity(readings.count * 4)
            var b = [Double]()
            b.reserveCapacity(readings.count)
            for r in readings {
                let p = r - mean  // centring keeps the columns well scaled
                a.append(2 * p.x)
                a.append(2 * p.y)
                a.append(2 * p.z)
                a.append(1)
                b.append(p.squaredNorm)
            }
            guard case .success(let s) = LeastSquares.solve(rowMajor: a, unknowns: 4, rhs: b) else {
                return .failure(.illConditioned(conditioning: 0))
            }
            let c = Vector3(s.x[0], s.x[1], s.x[2])
            let r2 = s.x[3] + c.squaredNorm
            guard r2 > 0, r2.isFinite else { return .failure(.notAnEllipsoid) }
            let cal = MagnetometerCalibration(
                hardIronOffsetMicrotesla: c + mean, fieldRadiusMicrotesla: r2.squareRoot())
            return assess(cal, model: .sphere, readings: readings, settings: settings)
        }
    }

    /// Hard- and soft-iron calibration: the general quadric
    /// A x^2 + B y^2 + C z^2 + 2D xy + 2E xz + 2F yz + 2G x + 2H y + 2I z = 1
    /// fitted to the centred readings, then turned into a centre and the symmetric matrix that maps the
    /// ellipsoid to a sphere of the same volume (radius = geometric mean of the semi-axes).
    public static func fitEllipsoid(_ readings: [Vector3], settings: CalibrationFitSettings = .init())
        -> Result<CalibrationFit, CalibrationFitError>
    {
        switch prepare(readings, minimum: minimumEllipsoidReadings, settings: settings) {
        case .failure(let e): return .failure(e)
        case .success(let mean):
            // Scale to unit size so the squared terms stay comparable with the linear ones.
            var scale = 0.0
            for r in readings { scale = Swift.max(scale, (r - mean).norm) }
            var a = [Double]()
            a.reserveCapacity(readings.count * 9)
            for r in readings {
                let p = (r - mean) / scale
                a.append(p.x * p.x)
                a.append(p.y * p.y)
                a.append(p.z * p.z)
                a.append(2 * p.x * p.y)
                a.append(2 * p.x * p.z)
                a.append(2 * p.y * p.z)
                a.append(2 * p.x)
                a.append(2 * p.y)
                a.append(2 * p.z)
            }
            let b = [Double](repeating: 1, count: readings.count)
            let solution: LeastSquares.Solution
            switch LeastSquares.solve(rowMajor: a, unknowns: 9, rhs: b, minimumConditioning: 1e-9) {
            case .success(let s): solution = s
            case .failure(.rankDeficient(let c)): return .failure(.illConditioned(conditioning: c))
            case .failure: return .failure(.illConditioned(conditioning: 0))
            }
            let k = solution.x
            let m = Matrix3(k[0], k[3], k[4], k[3], k[1], k[5], k[4], k[5], k[2])
            guard let mInverse = m.inverse else { return .failure(.notAnEllipsoid) }
            let v = Vector3(k[6], k[7], k[8])
            let centre = -(mInverse * v)
            let gain = 1 + centre.dot(m * centre)
            guard gain > 0 else { return .failure(.notAnEllipsoid) }
            let shape = m * (1 / gain)  // (p - c)^T shape (p - c) = 1
            guard let eig = SymmetricEigen3(shape), eig.values.x > 0 else { return .failure(.notAnEllipsoid) }
            let radiusUnit = pow(eig.values.x * eig.values.y * eig.values.z, -1.0 / 6.0)
            let correction = eig.applying { $0.squareRoot() } * radiusUnit
            let cal = MagnetometerCalibration(
                hardIronOffsetMicrotesla: centre * scale + mean,
                softIronCorrection: correction,
                fieldRadiusMicrotesla: radiusUnit * scale)
            return assess(cal, model: .ellipsoid, readings: readings, settings: settings)
        }
    }

    /// Checks count, finiteness and spread; returns the mean reading.
    static func prepare(_ readings: [Vector3], minimum: Int, settings: CalibrationFitSettings)
        -> Result<Vector3, CalibrationFitError>
    {
        if let bad = readings.firstIndex(where: { !$0.isFinite }) { return .failure(.nonFiniteReading(index: bad)) }
        guard readings.count >= minimum else {
            return .failure(.tooFewReadings(count: readings.count, minimum: minimum))
        }
        var mean = Vector3.zero
        for r in readings { mean += r }
        mean = mean / Double(readings.count)
        var s = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
        for r in readings {
            let p = r - mean
            s.m00 += p.x * p.x
            s.m01 += p.x * p.y
            s.m02 += p.x * p.z
            s.m11 += p.y * p.y
            s.m12 += p.y * p.z
            s.m22 += p.z * p.z
        }
        guard let eig = SymmetricEigen3(s), eig.values.z > 0 else { return .failure(.collinearReadings) }
        if eig.values.y / eig.values.z < settings.minimumScatterRatio { return .failure(.collinearReadings) }
        if eig.values.x / eig.values.z < settings.minimumScatterRatio { return .failure(.coplanarReadings) }
        return .success(mean)
    }

    /// Residual, spread and coverage of a candidate calibration; refuses one-sided data.
    static func assess(
        _ cal: MagnetometerCalibration, model: CalibrationFit.Model, readings: [Vector3],
        settings: CalibrationFitSettings
    ) -> Result<CalibrationFit, CalibrationFitError> {
        guard cal.hardIronOffsetMicrotesla.isFinite, cal.softIronCorrection.isFinite,
            cal.fieldRadiusMicrotesla.isFinite, cal.fieldRadiusMicrotesla > 0
        else { return .failure(.notAnEllipsoid) }
        var ss = 0.0
        var resultant = Vector3.zero
        var hit = [Bool](repeating: false, count: coverageDirections.count)
        let cosLimit = cos(40 * radiansPerDegree)
        for r in readings {
            let c = cal.apply(r)
            let n = c.norm
            ss += (n - cal.fieldRadiusMicrotesla) * (n - cal.fieldRadiusMicrotesla)
            guard n > 0 else { continue }
            let u = c / n
            resultant += u
            for (i, d) in coverageDirections.enumerated() where !hit[i] && d.dot(u) >= cosLimit { hit[i] = true }
        }
        let count = Double(readings.count)
        let mrl = resultant.norm / count
        if mrl > settings.maximumMeanResultantLength {
            return .failure(.oneSided(meanResultantLength: mrl, maximum: settings.maximumMeanResultantLength))
        }
        let coverage = Double(hit.filter { $0 }.count) / Double(hit.count)
        return .success(
            CalibrationFit(
                model: model, calibration: cal, rmsResidualMicrotesla: (ss / count).squareRoot(),
                meanResultantLength: mrl, directionCoverage: coverage,
                readingCount: readings.count))
    }

    /// 32 near-uniform unit directions (Fibonacci sphere), for the coverage figure.
    /// The index of the coverage direction nearest to the unit vector `u`.
    @inlinable
    public static func nearestDirection(to u: Vector3) -> Int {
        var best = 0, bestDot = -2.0
        for (i, d) in coverageDirections.enumerated() {
            let dot = d.dot(u)
            if dot > bestDot {
                bestDot = dot
                best = i
            }
        }
        return best
    }

    public static let coverageDirections: [Vector3] = (0..<32).map { i in
        let golden = Double.pi * (3 - 5.0.squareRoot())
        let z = 1 - (Double(i) + 0.5) * 2 / 32
        let r = (1 - z * z).squareRoot()
        let phi = golden * Double(i)
        return Vector3(r * cos(phi), r * sin(phi), z)
    }
}
