/// What every fusion filter offers, so pipelines and tools can hold either. What only some filters
/// can do is a capability protocol of its own: `GnssAidedFilter`, `MultiMagnetometerFilter`.
public protocol OrientationFilter: Sendable {
    /// Feeds one IMU sample and optionally a magnetometer sample (microtesla). Returns nil when the
    /// sample was skipped (the reason is counted in `skipped`), or, for the offline smoother, always:
    /// its estimates come at the end (`KalmanSmoother.finish`).
    mutating func update(imu: ImuSample, magnetometer: MagnetometerSample?) -> FusionOutput?
    var skipped: SkippedSampleCounts { get }
    var gyroBias: Vector3 { get }
    var orientation: Quaternion { get }
    /// Where the latest output's heading accuracy comes from.
    var headingAccuracyParts: HeadingAccuracyParts { get }
    /// The disturbance gate: the one verdict on each magnetometer reading, and the magnetic reference.
    var magneticGate: MagneticDisturbanceGate { get }
    /// Sets the magnetic reference (the World Magnetic Model's strength and dip at the site).
    mutating func setMagneticReference(strengthMicrotesla: Double, dipDegrees: Double)
    /// The calibration applied to the readings changed.
    mutating func noteCalibration(_ notice: MagnetometerCalibrationNotice)
}

/// A filter that takes GNSS: velocities (acceleration out of gravity, alignment, course) and
/// dual-antenna headings.
public protocol GnssAidedFilter: OrientationFilter {
    /// Takes a GNSS velocity (true-north ENU) with the declination at the site (NaN: unknown, true
    /// north taken for magnetic).
    mutating func aid(velocity: GnssVelocitySample, declinationDegrees: Double)
    /// Takes a dual-antenna heading, as `aid(velocity:)`.
    mutating func aid(gnssHeading: GnssHeadingSample, declinationDegrees: Double)
    /// What GNSS gave.
    var gnssCounts: GnssAidingCounts { get }
}

/// A filter that fuses several magnetometers, each with its own gate, judged against the others.
public protocol MultiMagnetometerFilter: OrientationFilter {
    /// Adds a magnetometer besides the primary (named `primaryName` in the health); returns its index
    /// (1, 2, ...).
    mutating func addMagnetometer(named name: String, primaryName: String) -> Int
    /// A reading of an added magnetometer (microtesla, calibrated, body axes).
    mutating func add(_ sample: MagnetometerSample, toMagnetometer index: Int)
    /// The calibration of an added magnetometer changed.
    mutating func noteCalibration(_ notice: MagnetometerCalibrationNotice, magnetometer index: Int)
    /// Each magnetometer's health, the primary first; empty while there is only the primary.
    var magnetometerHealth: [MagnetometerHealth] { get }
    /// Magnetometer `index`'s gate (0: the primary's `magneticGate`).
    func magnetometerGate(_ index: Int) -> MagneticDisturbanceGate?
    /// The primary's own verdict flags at the latest sample; nil while there is only the primary (the
    /// output's flags are its verdict).
    var primaryMagnetometerFlags: FusionFlags? { get }
}

extension KalmanFilter: GnssAidedFilter, MultiMagnetometerFilter {
    public mutating func aid(velocity: GnssVelocitySample, declinationDegrees: Double) {
        setGnssDeclination(degrees: declinationDegrees)
        update(velocity: velocity)
    }

    public mutating func aid(gnssHeading: GnssHeadingSample, declinationDegrees: Double) {
        setGnssDeclination(degrees: declinationDegrees)
        update(gnssHeading: gnssHeading)
    }

    public var gnssCounts: GnssAidingCounts { aiding.counts }

    public var magnetometerHealth: [MagnetometerHealth] { agreement?.health ?? [] }

    public var primaryMagnetometerFlags: FusionFlags? { others.isEmpty ? nil : primaryMagneticFlags }

    public func magnetometerGate(_ index: Int) -> MagneticDisturbanceGate? {
        index == 0 ? magneticGate : others.indices.contains(index - 1) ? others[index - 1].gate : nil
    }
}

/// The complementary filter fuses one magnetometer and takes no GNSS.
extension ComplementaryFilter: OrientationFilter {}

/// The filters by name, as configuration files and the command line spell them.
public enum FilterKind: String, Sendable, CaseIterable {
    case kalman, complementary

    /// A filter of this kind with default settings except the common options given.
    public func make(_ options: CommonFilterOptions = .init()) -> any OrientationFilter {
        switch self {
        case .kalman:
            return KalmanFilter(settings: KalmanFilterSettings(options))
        case .complementary:
            return ComplementaryFilter(settings: ComplementaryFilterSettings(options))
        }
    }
}

extension KalmanFilterSettings {
    /// Defaults except the common options given (for the filter and the smoother alike).
    public init(_ options: CommonFilterOptions) {
        self.init()
        sensorLatencySeconds = options.sensorLatencySeconds
        referenceOffsetDegrees = options.referenceOffsetDegrees
    }
}

extension ComplementaryFilterSettings {
    /// Defaults except the common options given.
    public init(_ options: CommonFilterOptions) {
        self.init()
        sensorLatencySeconds = options.sensorLatencySeconds
        referenceOffsetDegrees = options.referenceOffsetDegrees
    }
}

/// Settings every filter has, as the command line and pipeline configuration set them.
public struct CommonFilterOptions: Sendable, Equatable {
    /// See `KalmanFilterSettings.sensorLatencySeconds`. Default 0.
    public var sensorLatencySeconds = 0.0
    /// See `KalmanFilterSettings.referenceOffsetDegrees`. Default 0.
    public var referenceOffsetDegrees = 0.0
    public init(sensorLatencySeconds: Double = 0, referenceOffsetDegrees: Double = 0) {
        self.sensorLatencySeconds = sensorLatencySeconds
        self.referenceOffsetDegrees = referenceOffsetDegrees
    }
}

/// Pairs magnetometer samples with IMU samples, whatever order they arrive in. It holds back one IMU
/// sample until its magnetometer partner (same stamp, or the newest one not used yet, no older than
/// `maximumAgeSeconds`) or a later IMU sample arrives: sensors that sample both together pair one to
/// one even when the magnetometer message comes second; slower magnetometers pair with the first
/// IMU sample at or after their stamp. Costs one IMU period of latency. Magnetometer samples that
/// arrive ahead of their IMU sample (a network transport that retransmits one topic and not the
/// other) wait in a short queue, so the pairs are the same as in stamp order.
public struct SampleAligner: Sendable {
    /// Oldest magnetometer sample still paired, seconds. Default 0.1.
    public var maximumAgeSeconds: Double
    var held: ImuSample?
    /// Magnetometer samples not used yet, in arrival order (rarely more than one).
    var pending: [MagnetometerSample] = []
    /// Tolerance for "same stamp", seconds.
    static let sameStamp = 1e-6
    /// Samples kept waiting for an IMU sample at most: about a second of a 1 kHz magnetometer (a
    /// bound on memory, not a tuning knob; in stamp order the queue holds one sample).
    static let queueLimit = 1024

    public init(maximumAgeSeconds: Double = 0.1) { self.maximumAgeSeconds = maximumAgeSeconds }

    /// Takes an IMU sample; returns the previously held one, ready for the filter, if any.
    public mutating func imu(_ sample: ImuSample) -> (imu: ImuSample, magnetometer: MagnetometerSample?)? {
        let out = held.map { ($0, takePending(for: $0)) }
        held = sample
        return out
    }

    /// Takes a magnetometer sample; returns the held IMU sample if this is its partner.
    public mutating func magnetometer(_ sample: MagnetometerSample) -> (
        imu: ImuSample, magnetometer: MagnetometerSample?
    )? {
        pending.append(sample)
        if pending.count > Self.queueLimit { pending.removeFirst(pending.count - Self.queueLimit) }
        guard let h = held, sample.timestamp <= h.timestamp + Self.sameStamp else { return nil }
        held = nil
        return (h, takePending(for: h))
    }

    /// Pairs `sample` at once with the newest magnetometer sample given (through `magnetometer(_:)`)
    /// not after it: the pair `imu(_:)` makes when each magnetometer sample comes before its IMU
    /// sample, without the one-sample hold. For callers that give both streams in time order; do not
    /// mix with `imu(_:)`.
    public mutating func pairNow(_ sample: ImuSample) -> (imu: ImuSample, magnetometer: MagnetometerSample?) {
        (sample, takePending(for: sample))
    }

    /// The held IMU sample at the end of the stream.
    public mutating func finish() -> (imu: ImuSample, magnetometer: MagnetometerSample?)? {
        defer { held = nil }
        return held.map { ($0, takePending(for: $0)) }
    }

    /// The newest sample that arrived and is not after `imu` (with every sample that arrived before
    /// it, which it supersedes); samples after `imu` wait for a later IMU sample.
    mutating func takePending(for imu: ImuSample) -> MagnetometerSample? {
        guard let i = pending.lastIndex(where: { $0.timestamp <= imu.timestamp + Self.sameStamp }) else { return nil }
        let m = pending[i]
        pending.removeFirst(i + 1)
        return imu.timestamp - m.timestamp <= maximumAgeSeconds ? m : nil
    }
}
