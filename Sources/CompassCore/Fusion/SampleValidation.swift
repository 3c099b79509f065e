/// The checks every filter applies before a sample may touch its state, and the time step they imply.
public struct SampleValidator: Sendable, Equatable {
    /// Longest step integrated as is, seconds; longer gaps are clamped and counted. Default 0.1.
    public var maximumStepSeconds: Double
    /// Physical limits: a reading beyond what any IMU or magnetometer reports is skipped, not fused
    /// (one absurd sample must not poison the state). Angular rate 70 rad/s (4000 deg/s, the widest
    /// MEMS gyro range), specific force 2000 m/s^2 (about 200 g, high-g accelerometers), magnetic
    /// field 10,000 uT (10 mT, twice the widest consumer magnetometer range).
    public var maximumAngularRateRadiansPerSecond = 70.0
    public var maximumSpecificForceMetresPerSecond2 = 2000.0
    public var maximumFieldMicrotesla = 10_000.0
    public private(set) var lastTimestamp: Double?
    /// Samples in a row whose time did not increase, and the latest of them: when they keep
    /// increasing among themselves, the clock (or one earlier sample) jumped, and after
    /// `timelineSamples` of them the filter follows the new timeline instead of skipping forever.
    var behindStreak = 0
    var lastBehind: Double?
    /// Consecutive increasing samples behind the last accepted time that re-anchor the time. Default 5.
    public var timelineSamples = 5
    /// Time of the last magnetometer sample used, seconds.
    public private(set) var lastMagneticTimestamp: Double?
    public private(set) var skipped = SkippedSampleCounts()

    public init(maximumStepSeconds: Double = 0.1) { self.maximumStepSeconds = maximumStepSeconds }

    /// A stream without a sample for longer than this, seconds, has a hole worth naming: longer than
    /// any sensor's sample interval or a scheduler's hiccup, long enough for a gyro bias of degrees per
    /// second to turn the heading by as much.
    public static let holeSeconds = 1.0

    /// The validated step for an IMU sample: nil when it must be skipped (the reason is counted);
    /// 0 for the very first sample.
    public mutating func step(for imu: ImuSample) -> Double? {
        guard imu.timestamp.isFinite, imu.angularVelocity.isFinite, imu.specificForce.isFinite else {
            skipped.nonFiniteImu += 1
            return nil
        }
        guard imu.specificForce.squaredNorm > 1e-12 else {
            skipped.zeroSpecificForce += 1
            return nil
        }
        guard
            imu.angularVelocity.squaredNorm <= maximumAngularRateRadiansPerSecond * maximumAngularRateRadiansPerSecond,
            imu.specificForce.squaredNorm <= maximumSpecificForceMetresPerSecond2 * maximumSpecificForceMetresPerSecond2
        else {
            skipped.implausibleImu += 1
            return nil
        }
        guard let last = lastTimestamp else {
            lastTimestamp = imu.timestamp
            return 0
        }
        let dt = imu.timestamp - last
        guard dt > 0 else {
            skipped.timestampNotIncreasing += 1
            behindStreak = lastBehind.map { imu.timestamp > $0 } == true ? behindStreak + 1 : 1
            lastBehind = imu.timestamp
            if behindStreak >= timelineSamples {
                // A new timeline: the clock went back (or the sample before the streak jumped ahead).
                skipped.timelineRestarts += 1
                lastTimestamp = imu.timestamp
                behindStreak = 0
                lastBehind = nil
            }
            return nil
        }
        behindStreak = 0
        lastBehind = nil
        lastTimestamp = imu.timestamp
        if dt > Self.holeSeconds {
            skipped.imuHoles += 1
            skipped.longestImuHoleSeconds = Swift.max(skipped.longestImuHoleSeconds, dt)
        }
        if dt > maximumStepSeconds {
            skipped.timeGaps += 1
            return maximumStepSeconds
        }
        return dt
    }

    /// Seconds since the previous magnetometer sample (clamped to the maximum step), `fallback` for the
    /// first; remembers `timestamp` as the latest.
    public mutating func magneticStep(at timestamp: Double, fallback: Double) -> Double {
        defer { lastMagneticTimestamp = timestamp }
        if let last = lastMagneticTimestamp, timestamp - last > Self.holeSeconds {
            skipped.magnetometerHoles += 1
            skipped.longestMagnetometerHoleSeconds = Swift.max(skipped.longestMagnetometerHoleSeconds, timestamp - last)
        }
        return lastMagneticTimestamp.map { Swift.min(maximumStepSeconds, Swift.max(0, timestamp - $0)) } ?? fallback
    }

    /// The magnetometer reading if usable (finite, non-zero), else nil with the reason counted.
    public mutating func field(of mag: MagnetometerSample?) -> Vector3? {
        guard let mag else { return nil }
        guard mag.fieldMicrotesla.isFinite, mag.timestamp.isFinite else {
            skipped.nonFiniteMagnetometer += 1
            return nil
        }
        guard mag.fieldMicrotesla.squaredNorm > 1e-12 else {
            skipped.zeroMagneticField += 1
            return nil
        }
        guard mag.fieldMicrotesla.squaredNorm <= maximumFieldMicrotesla * maximumFieldMicrotesla else {
            skipped.implausibleMagnetometer += 1
            return nil
        }
        return mag.fieldMicrotesla
    }
}

extension SampleValidator {
    /// Counts a reset of a filter whose state became non-finite.
    mutating func countReset() { skipped.stateResets += 1 }
}

extension SampleValidator {
    /// True when an IMU reading is finite and within the default physical limits (for stages that
    /// learn from readings before any filter sees them: rest detection, calibration).
    public static func isPlausible(angularVelocity w: Vector3, specificForce f: Vector3) -> Bool {
        let limits = SampleValidator()
        return w.isFinite && f.isFinite
            && w.squaredNorm <= limits.maximumAngularRateRadiansPerSecond * limits.maximumAngularRateRadiansPerSecond
            && f.squaredNorm <= limits.maximumSpecificForceMetresPerSecond2
                * limits.maximumSpecificForceMetresPerSecond2
    }

    /// True when a magnetometer reading (microtesla) is finite, non-zero and within the default limit.
    public static func isPlausible(fieldMicrotesla m: Vector3) -> Bool {
        let limit = SampleValidator().maximumFieldMicrotesla
        return m.isFinite && m.squaredNorm > 1e-12 && m.squaredNorm <= limit * limit
    }
}
