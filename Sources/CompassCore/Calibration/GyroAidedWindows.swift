/// One gyro-aided window's running sums (see `GyroAidedHardIronFit`): enough to solve for the offset
/// jointly with other windows, each window keeping its own earth field (the gyro's rotations are
/// relative to the window's start, so no rotation between windows, and no bias carried across them).
public struct GyroAidedWindow: Sendable, Equatable {
    /// Readings in the window.
    public var count: Double
    /// Sum of the rotations R_i (sensor at reading i to the window's start).
    public var sumRotation: Matrix3
    /// Sums of the readings u_i (soft-iron corrected, microtesla), of R_i u_i and of |u_i|^2.
    public var sumReading: Vector3, sumRotatedReading: Vector3, sumSquaredReading: Double
    /// Time of the window's last reading, seconds.
    public var endTime: Double
    /// The readings themselves, when kept (`GyroAidedHardIronFit.keepsReadings`).
    public var readings: [Reading] = []

    /// One reading (soft-iron corrected, microtesla) with the window's rotation at its time and how
    /// that rotation changes with a gyro bias.
    public struct Reading: Sendable, Equatable {
        public var reading: Vector3
        public var rotation: Matrix3
        public var biasJacobian: Matrix3
    }

    /// What the window says about the offset once the field is eliminated: information matrix
    /// nI - S^T S / n and vector sum u - S^T sum R u / n (S the sum of the rotations).
    var offsetInformation: (matrix: Matrix3, vector: Vector3) {
        let s = sumRotation, st = sumRotation.transposed
        return (
            Matrix3.identity * count - (st * s) * (1 / count), sumReading - st * sumRotatedReading * (1 / count)
        )
    }

    /// The window's earth field (its start frame, microtesla) given the offset `c`.
    func field(offset c: Vector3) -> Vector3 { (sumRotatedReading - sumRotation * c) * (1 / count) }

    /// RMS residual per axis, microtesla, given the offset `c` and the window's own best field.
    func rmsResidual(offset c: Vector3) -> Double {
        let b = field(offset: c)
        let rss =
            sumSquaredReading - 2 * (c.dot(sumReading) + b.dot(sumRotatedReading)) + count * c.squaredNorm
            + 2 * c.dot(sumRotation.transposed * b) + count * b.squaredNorm
        return (max(0, rss) / (3 * count)).squareRoot()
    }
}

/// The hard-iron offset from the gyro-aided windows of the last half minute solved together: one
/// offset fixed to the sensor, one earth field per window. A hand sways a phone by a few degrees about
/// each axis, too little for one window to tell the offset in every direction, but the windows turn
/// about different axes, and together they do. Short windows keep a raw gyro's bias from turning the
/// rotations they use (5 deg/s: 10 degrees in 2 s, against 20 in 4); windows that miss the offset
/// (a field that changes with position, a swing too fast for the sensors' clocks) are left out, and
/// the windows left must agree on the earth's field strength, which is the same in all of them.
public struct GyroAidedWindows: Sendable {
    public private(set) var windows: [GyroAidedWindow] = []

    /// What a joint solve gives.
    public struct Solution: Sendable, Equatable {
        /// Offset of the soft-iron corrected readings, microtesla.
        public var correctedOffset: Vector3
        /// Median earth field strength over the windows used, microtesla.
        public var strengthMicrotesla: Double
        /// RMS residual per axis over the windows used, microtesla.
        public var rmsResidualMicrotesla: Double
        /// Smallest eigenvalue of the summed information per reading (as `GyroAidedFitSettings`'s spread).
        public var rotationSpread: Double
        /// Windows and readings used.
        public var windowCount: Int
        public var readingCount: Int
        /// The gyro's bias found with the offset, rad/s, sensor frame; nil when the windows kept no
        /// readings (or it was no consumer gyro's).
        public var gyroBiasRadiansPerSecond: Vector3?
    }

    /// Largest bias per axis taken for a gyro's, rad/s: three times a consumer MEMS gyro's factory
    /// zero-rate offset limit (+-5 deg/s).
    public static let maximumBias = 0.26
    /// The bias's prior, rad/s, 1 sigma per axis: a consumer gyro's factory zero-rate offset.
    public static let biasPriorSigma = 0.03

    public init() {}

    /// Keeps a finished window.
    public mutating func append(_ window: GyroAidedWindow) {
        guard window.count >= 10, window.sumRotation.isFinite, window.sumRotatedReading.isFinite else { return }
        windows.append(window)
    }

    /// Forgets windows that ended before `time`.
    public mutating func removeWindows(endingBefore time: Double) { windows.removeAll { $0.endTime < time } }

    public mutating func removeAll() { windows.removeAll() }

    /// The joint offset from the windows whose residual is at most `maximumResidual` (microtesla) and
    /// whose field strength lies within `strengthTolerance` (a fraction) of the median of theirs and
    /// in `plausibleStrength`; nil when the windows left turned less than `minimumSpread` together.
    public func solve(
        maximumResidual: Double, strengthTolerance: Double, plausibleStrength: ClosedRange<Double>,
        minimumSpread: Double
    ) -> Solution? {
        var used = windows
        // Solve, drop the windows the solution does not explain, solve again: a disturbance that
        // bends a few windows must not bend the offset the others agree on.
        for _ in 0..<3 {
            guard let c = Self.offset(used) else { return nil }
            let strengths = used.map { $0.field(offset: c).norm }
            let middle = finiteMedian(strengths)
            let kept = zip(used, strengths).filter { window, strength in
                window.rmsResidual(offset: c) <= maximumResidual && plausibleStrength.contains(strength)
                    && abs(strength / middle - 1) <= strengthTolerance
            }.map(\.0)
            if kept.count == used.count { break }
            used = kept
        }
        guard let c = Self.offset(used) else { return nil }
        let n = used.reduce(0.0) { $0 + $1.count }
        let information = used.reduce(Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)) { $0 + $1.offsetInformation.matrix }
        guard let eigen = SymmetricEigen3(information), eigen.values.x / n >= minimumSpread else { return nil }
        let strengths = used.map { $0.field(offset: c).norm }
        let squares = used.reduce(0.0) {
            let r = $1.rmsResidual(offset: c)
            return $0 + r * r * $1.count
        }
        var solution = Solution(
            correctedOffset: c, strengthMicrotesla: finiteMedian(strengths),
            rmsResidualMicrotesla: (squares / n).squareRoot(),
            rotationSpread: eigen.values.x / n, windowCount: used.count, readingCount: Int(n),
            gyroBiasRadiansPerSecond: nil)
        // With the readings kept, the gyro's bias is found too; a bias no consumer gyro has (beyond
        // `maximumBias`) is the linearisation failing, and the offset-only solution stands.
        if let withBias = Self.offsetAndBias(used, offset: c),
            max(abs(withBias.bias.x), abs(withBias.bias.y), abs(withBias.bias.z)) <= Self.maximumBias
        {
            let strengths = withBias.fields.map(\.norm)
            if strengths.allSatisfy({ plausibleStrength.contains($0) }) {
                solution.correctedOffset = withBias.offset
                solution.strengthMicrotesla = finiteMedian(strengths)
                solution.rmsResidualMicrotesla = withBias.rms
                solution.gyroBiasRadiansPerSecond = withBias.bias
            }
        }
        guard solution.rmsResidualMicrotesla <= maximumResidual else { return nil }
        return solution
    }

    /// The offset and the gyro's bias together from the windows' kept readings, starting from the
    /// offset `c0` found without a bias: u_i = c + R_i^T f + [R_i^T f0]x J_i b to first order in b (J_i
    /// the rotation's bias Jacobian, f0 the window's field at the previous step), the windows' fields
    /// eliminated, relinearised twice. A raw phone gyro's bias of 5 deg/s turns a 2-s window by 10
    /// degrees, which an offset-only fit takes into its offset (7 uT on a simulated phone). Returns
    /// nil when a window kept no readings or the system is singular; the RMS residual per axis is over
    /// every reading.
    static func offsetAndBias(_ windows: [GyroAidedWindow], offset c0: Vector3)
        -> (offset: Vector3, bias: Vector3, fields: [Vector3], rms: Double)?
    {
        guard !windows.isEmpty, windows.allSatisfy({ !$0.readings.isEmpty }) else { return nil }
        let zero = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
        var fields = windows.map { $0.field(offset: c0) }
        var c = c0, b = Vector3.zero
        for _ in 0..<3 {
            var a11 = zero, a12 = zero, a22 = zero, v1 = Vector3.zero, v2 = Vector3.zero
            var blocks: [(q1: Matrix3, q2: Matrix3, r2: Vector3, n: Double)] = []
            for (k, w) in windows.enumerated() {
                var p12 = zero, p22 = zero, q1 = zero, q2 = zero
                var r1a = Vector3.zero, r1b = Vector3.zero, r2 = Vector3.zero
                for x in w.readings {
                    let rt = x.rotation.transposed
                    let m = Self.skew(rt * fields[k]) * x.biasJacobian
                    let mt = m.transposed
                    p12 = p12 + m
                    p22 = p22 + mt * m
                    q1 = q1 + rt
                    q2 = q2 + mt * rt
                    r1a += x.reading
                    r1b += mt * x.reading
                    r2 += x.rotation * x.reading
                }
                let n = Double(w.readings.count)
                a11 = a11 + Matrix3.identity * n - q1 * q1.transposed * (1 / n)
                a12 = a12 + p12 - q1 * q2.transposed * (1 / n)
                a22 = a22 + p22 - q2 * q2.transposed * (1 / n)
                v1 += r1a - q1 * r2 * (1 / n)
                v2 += r1b - q2 * r2 * (1 / n)
                blocks.append((q1, q2, r2, n))
            }
            // Rotation about the field does not change the readings: the bias along the field is not
            // seen, and a prior of `biasPriorSigma` (the readings' noise taken as 1 uT) keeps it at 0.
            a22 = a22 + Matrix3.identity * (1 / (Self.biasPriorSigma * Self.biasPriorSigma))
            let rows =
                [a11.row0, a11.row1, a11.row2].enumerated().map { i, r in [r.x, r.y, r.z] + Self.row(a12, i) }
                + (0..<3).map { i in Self.row(a12.transposed, i) + Self.row(a22, i) }
            guard
                case .success(let solution) = LeastSquares.solve(
                    rowMajor: rows.flatMap { $0 }, unknowns: 6, rhs: [v1.x, v1.y, v1.z, v2.x, v2.y, v2.z],
                    minimumConditioning: 1e-12)
            else { return nil }
            c = Vector3(solution.x[0], solution.x[1], solution.x[2])
            b = Vector3(solution.x[3], solution.x[4], solution.x[5])
            fields = blocks.map { ($0.r2 - $0.q1.transposed * c - $0.q2.transposed * b) * (1 / $0.n) }
        }
        var squares = 0.0, count = 0.0
        for (k, w) in windows.enumerated() {
            for x in w.readings {
                let rt = x.rotation.transposed
                let e = x.reading - c - Self.skew(rt * fields[k]) * x.biasJacobian * b - rt * fields[k]
                squares += e.squaredNorm
                count += 3
            }
        }
        guard c.isFinite, b.isFinite else { return nil }
        return (c, b, fields, (squares / count).squareRoot())
    }

    static func skew(_ v: Vector3) -> Matrix3 { Matrix3(0, -v.z, v.y, v.z, 0, -v.x, -v.y, v.x, 0) }

    static func row(_ m: Matrix3, _ i: Int) -> [Double] {
        let r = i == 0 ? m.row0 : i == 1 ? m.row1 : m.row2
        return [r.x, r.y, r.z]
    }

    /// The least-squares offset of `windows` together; nil when there are none or their information
    /// is singular.
    static func offset(_ windows: [GyroAidedWindow]) -> Vector3? {
        guard !windows.isEmpty else { return nil }
        var matrix = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
        var vector = Vector3.zero
        for w in windows {
            let i = w.offsetInformation
            matrix = matrix + i.matrix
            vector += i.vector
        }
        guard let inverse = matrix.inverse else { return nil }
        let c = inverse * vector
        return c.isFinite ? c : nil
    }
}
