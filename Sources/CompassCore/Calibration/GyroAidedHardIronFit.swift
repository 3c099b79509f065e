#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Parameters of `GyroAidedHardIronFit`.
public struct GyroAidedFitSettings: Sendable, Equatable {
    /// Longest span of readings one fit uses, seconds. The relative rotations come from the raw gyro,
    /// so a bias b turns them by b x this: 0.005 rad/s over 4 s is 1.1 degrees, about 1 uT of a 50 uT
    /// field. Default 4.
    public var windowSeconds = 4.0
    /// Shortest span tried, seconds. Default 1.5.
    public var minimumSeconds = 1.5
    /// The turning within the span must show the field from enough directions: the smallest
    /// eigenvalue of I - M M^T, M the mean of the rotations, at least this (0 = no turning, or turning
    /// about one axis only, which leaves the offset along that axis unknown; 2/3 = every direction).
    /// Default 0.1 (about +-30 degrees about every axis).
    public var minimumRotationSpread = 0.1
    public init() {}
}

/// The hard-iron offset from a few seconds of motion, with the gyro's help: while the sensor turns,
/// the earth's field is fixed in the world and a hard-iron offset is fixed to the sensor. With R_i the
/// rotation from the sensor at reading i to the sensor at the window's start (integrated gyro) and u_i
/// the reading with the soft-iron correction applied, u_i = c + R_i^T b: c the offset (soft-iron
/// corrected), b the earth's field in the starting frame. Six unknowns, linear, solved from running
/// sums; no coverage of the sphere is needed, only turning about more than one axis.
///
/// The residual is the test that tells a new hard iron from an external disturbance: a field that
/// moves with the sensor fits this model to the noise, a field that changes with position does not.
public struct GyroAidedHardIronFit: Sendable {
    public var settings: GyroAidedFitSettings
    /// Rotation from the current sensor frame to the frame at the window's start.
    var rotation = Matrix3.identity
    public private(set) var startTime: Double?
    var latestTime = 0.0
    var count = 0.0
    var sumRotation = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
    var sumReading = Vector3.zero, sumRotatedReading = Vector3.zero, sumSquaredReading = 0.0
    /// Sum of the specific force in the starting frame, m/s^2 (its mean points up: the dip's reference).
    var sumForce = Vector3.zero
    /// How `rotation` changes with a gyro bias b: the true rotation is rotation * Exp(biasJacobian b)
    /// to first order (J <- step^T J - I dt per gyro step, as IMU preintegration has it).
    var biasJacobian = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
    /// Each reading with its rotation and bias Jacobian, when `keepsReadings` (for a solve that also
    /// finds the gyro's bias, `GyroAidedWindows`).
    public var keepsReadings = false
    var readings: [GyroAidedWindow.Reading] = []

    /// What one solve gives.
    public struct Solution: Sendable, Equatable {
        /// Offset of the soft-iron corrected readings, microtesla.
        public var correctedOffset: Vector3
        /// The earth's field, microtesla, in the window's starting frame.
        public var field: Vector3
        /// RMS residual per axis, microtesla (comparable with a sphere fit's radial RMS).
        public var rmsResidualMicrotesla: Double
        /// Smallest eigenvalue of I - M M^T (see `GyroAidedFitSettings.minimumRotationSpread`).
        public var rotationSpread: Double
        /// Dip of `field` below the mean specific force's horizontal plane, degrees; nil without force.
        public var dipDegrees: Double?
        /// Readings used.
        public var readingCount: Int
        /// Seconds of readings used.
        public var seconds: Double
    }

    public init(settings: GyroAidedFitSettings = .init()) { self.settings = settings }

    /// Seconds of readings in the window.
    public var seconds: Double { startTime.map { latestTime - $0 } ?? 0 }

    /// Starts a new window at the next reading.
    public mutating func reset() {
        let keeps = keepsReadings
        self = GyroAidedHardIronFit(settings: settings)
        keepsReadings = keeps
    }

    /// Turns the frame by the gyro's reading (rad/s, sensor frame) over `dt` seconds; the specific
    /// force (m/s^2, sensor frame) joins the dip's reference.
    public mutating func rotate(rate: Vector3, specificForce: Vector3, dt: Double) {
        guard startTime != nil else { return }
        let r = Quaternion(rotationVector: rate * dt).rotationMatrix
        rotation = rotation * r
        sumForce += rotation * specificForce
        if keepsReadings { biasJacobian = r.transposed * biasJacobian - Matrix3.identity * dt }
    }

    /// Adds a reading with the soft-iron correction applied (W m, no offset removed), microtesla.
    public mutating func add(_ corrected: Vector3, time: Double) {
        if startTime == nil { startTime = time }
        latestTime = time
        count += 1
        sumRotation = sumRotation + rotation
        sumReading += corrected
        sumRotatedReading += rotation * corrected
        sumSquaredReading += corrected.squaredNorm
        if keepsReadings { readings.append(.init(reading: corrected, rotation: rotation, biasJacobian: biasJacobian)) }
    }

    /// The window's sums, for a solve with other windows (`GyroAidedWindows`); nil before a reading.
    public var window: GyroAidedWindow? {
        guard startTime != nil, count > 0 else { return nil }
        return GyroAidedWindow(
            count: count, sumRotation: sumRotation, sumReading: sumReading, sumRotatedReading: sumRotatedReading,
            sumSquaredReading: sumSquaredReading, endTime: latestTime, readings: readings)
    }

    /// Normal equations [[nI, S^T], [S, nI]] [c; b] = [sum u; sum R u]; the Schur complement of the
    /// first block: (nI - S S^T / n) b = sum R u - S sum u / n. This is that complement.
    var schurComplement: Matrix3 { (Matrix3.identity * count) - (sumRotation * sumRotation.transposed) * (1 / count) }

    /// How many ways the window has turned so far (see `GyroAidedFitSettings.minimumRotationSpread`);
    /// nil before 10 readings.
    public var rotationSpread: Double? { count >= 10 ? spread(of: schurComplement) : nil }

    /// The smallest eigenvalue of the complement per reading.
    func spread(of k: Matrix3) -> Double? {
        guard let eigen = SymmetricEigen3(k) else { return nil }
        return min(eigen.values.x, eigen.values.y, eigen.values.z) / count
    }

    /// The least-squares offset and field, or nil when the window is too short or turned less than
    /// `minimumSpread` (default: the settings' `minimumRotationSpread`).
    public func solve(minimumSpread: Double? = nil) -> Solution? {
        guard count >= 10, seconds >= settings.minimumSeconds else { return nil }
        let n = count
        let s = sumRotation
        let k = schurComplement
        guard let spread = spread(of: k), spread >= minimumSpread ?? settings.minimumRotationSpread,
            let kInverse = k.inverse
        else {
            return nil
        }
        let b = kInverse * (sumRotatedReading - s * sumReading * (1 / n))
        let c = (sumReading - s.transposed * b) * (1 / n)
        // RSS = sum|u|^2 - 2 x^T A^T u + x^T A^T A x.
        let rss =
            sumSquaredReading - 2 * (c.dot(sumReading) + b.dot(sumRotatedReading)) + n * c.squaredNorm
            + 2 * c.dot(s.transposed * b) + n * b.squaredNorm
        var dip: Double?
        if let up = sumForce.normalized, let f = b.normalized {
            dip = -asin(min(1, max(-1, up.dot(f)))) * degreesPerRadian
        }
        return Solution(
            correctedOffset: c, field: b, rmsResidualMicrotesla: (max(0, rss) / (3 * n)).squareRoot(),
            rotationSpread: spread, dipDegrees: dip, readingCount: Int(n), seconds: seconds)
    }
}
