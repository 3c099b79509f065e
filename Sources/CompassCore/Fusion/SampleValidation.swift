/// The checks every filter applies before a sample may touch its state, and the time step they imply.
public struct SampleValidator: Sendable, Equatable {
    /// Longest step integrated as is, seconds; longer gaps are clamped and counted. Default 0.1.
    public var maximumStepSeconds: Double
    public private(set) var lastTimestamp: Double?
    /// Time of the last magnetometer sample used, seconds.
    public private(set) var lastMagneticTimestamp: Double?
    public private(set) var skipped = SkippedSampleCounts()

    public init(maximumStepSeconds: Double = 0.1) { self.maximumStepSeconds = maximumStepSeconds }

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
        guard let last = lastTimestamp else {
            lastTimestamp = imu.timestamp
            return 0
        }
        let dt = imu.timestamp - last
        guard dt > 0 else {
            skipped.timestampNotIncreasing += 1
            return nil
        }
        lastTimestamp = imu.timestamp
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
        return mag.fieldMicrotesla
    }
}
