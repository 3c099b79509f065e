/// What a fusion filter is doing right now. Several flags can be set at once.
public struct FusionFlags: OptionSet, Sendable, Hashable, CustomStringConvertible {
    /// Bits 0-15 travel in the heading message's 16-bit `flags` (where bits 10-12 are its true-north
    /// flags, so the filters leave them clear); bits 16-31 are for magnetometer verdict reasons added
    /// later, which travel in the message's `reasons` only.
    public let rawValue: UInt32
    @inlinable public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// The filter has not converged yet (first second, or heading uncertainty still large).
    public static let initialising = FusionFlags(rawValue: 1 << 0)
    /// The sensor is at rest; the gyro bias is being learned directly.
    public static let atRest = FusionFlags(rawValue: 1 << 1)
    /// The accelerometer was not used: the specific force is not (only) gravity.
    public static let accelerationRejected = FusionFlags(rawValue: 1 << 2)
    /// The magnetometer was not used: it disagrees with the model (see the reasons below).
    public static let magnetometerRejected = FusionFlags(rawValue: 1 << 3)
    /// No magnetometer correction for a while: the heading is carried by the gyro alone.
    public static let gyroOnly = FusionFlags(rawValue: 1 << 4)
    /// Reason: field strength differs from the reference.
    public static let magneticStrengthDisturbed = FusionFlags(rawValue: 1 << 5)
    /// Reason: dip differs from the reference.
    public static let magneticDipDisturbed = FusionFlags(rawValue: 1 << 6)
    /// Reason: the compass heading moved while the gyro says the device did not turn (or vice versa).
    public static let magneticGyroInconsistent = FusionFlags(rawValue: 1 << 7)
    /// A new magnetic reference (strength and dip) was adopted at this update.
    public static let magneticReferenceChanged = FusionFlags(rawValue: 1 << 8)
    /// The state became non-finite and the filter started again at this sample (counted in `stateResets`).
    public static let filterReset = FusionFlags(rawValue: 1 << 9)
    /// The calibration owner says no accepted calibration is applied to the magnetometer yet: the
    /// compass heading can be off by any angle, and the reported accuracy says so (180 degrees).
    /// Bit 13: bits 10-12 are the heading message's true-north flags.
    public static let magnetometerUncalibrated = FusionFlags(rawValue: 1 << 13)
    /// GNSS holds the heading: a course, a dual-antenna heading or the vehicle's acceleration seen by
    /// both the receiver and the accelerometer corrected it within the last few seconds.
    public static let gnssAided = FusionFlags(rawValue: 1 << 14)
    /// The magnetometer's heading has differed from the GNSS-held heading by more than
    /// `compassDisagreementDegrees` for a while: the compass is disturbed or mis-calibrated, and does
    /// not steer the heading while GNSS holds it.
    public static let compassDisagreesWithGnss = FusionFlags(rawValue: 1 << 15)

    /// Each flag with its name, as descriptions, JSON `flag_names` and the docs spell it.
    public static let names: [(FusionFlags, String)] = [
        (.initialising, "initialising"), (.atRest, "at_rest"), (.accelerationRejected, "acceleration_rejected"),
        (.magnetometerRejected, "magnetometer_rejected"), (.gyroOnly, "gyro_only"),
        (.magneticStrengthDisturbed, "magnetic_strength"), (.magneticDipDisturbed, "magnetic_dip"),
        (.magneticGyroInconsistent, "magnetic_gyro_inconsistent"),
        (.magneticReferenceChanged, "magnetic_reference_changed"), (.filterReset, "filter_reset"),
        (.magnetometerUncalibrated, "magnetometer_uncalibrated"), (.gnssAided, "gnss_aided"),
        (.compassDisagreesWithGnss, "compass_gnss_disagree"),
    ]

    /// Flag names, separated by "|" ("" when none).
    public var description: String { Self.names.filter { contains($0.0) }.map(\.1).joined(separator: "|") }
}

/// Why the gate refuses a magnetometer reading. The one list the filters' verdict flags, the
/// interference tally, the report's labels and the wire's `reasons` field are read from: a new check
/// is its test in `MagneticDisturbanceGate`, a case and a flag (bit 16 or above) here with its name in
/// `FusionFlags.names`, and its `REASON_` constant in Heading.msg.
///
/// Append only: a case's raw value is its bit in the heading and interference messages' `reasons`
/// field, which readers of recorded bags rely on; the next case takes the next number.
public enum MagnetometerVerdictReason: Int, CaseIterable, Sendable {
    /// The field strength differs from the reference.
    case strength = 0
    /// The dip differs from the reference.
    case dip = 1
    /// The compass turned while the gyro says the device did not (or the reverse).
    case gyroInconsistent = 2

    public var flag: FusionFlags {
        switch self {
        case .strength: .magneticStrengthDisturbed
        case .dip: .magneticDipDisturbed
        case .gyroInconsistent: .magneticGyroInconsistent
        }
    }

    /// How the report's flags chart labels it.
    public var label: String {
        switch self {
        case .strength: "reason: field strength"
        case .dip: "reason: dip"
        case .gyroInconsistent: "reason: compass vs gyro"
        }
    }

    /// Every reason's flag, and the rejection they explain: a magnetometer's whole verdict.
    public static let verdictFlags = FusionFlags(allCases.map(\.flag)).union(.magnetometerRejected)

    /// The reason's bit in the wire's `reasons` field: its raw value.
    public var wireBit: UInt32 { 1 << UInt32(rawValue) }

    /// The wire's `reasons` word for the reasons among `flags` (per message: a loop, no allocation).
    public static func wireReasons(_ flags: FusionFlags) -> UInt32 {
        var bits: UInt32 = 0
        for reason in allCases where flags.contains(reason.flag) { bits |= reason.wireBit }
        return bits
    }

    /// The flags of the reasons in a wire `reasons` word (bits of reasons this build does not know are
    /// ignored: a newer writer's).
    public static func flags(wireReasons reasons: UInt32) -> FusionFlags {
        var flags: FusionFlags = []
        for reason in allCases where reasons & reason.wireBit != 0 { flags.insert(reason.flag) }
        return flags
    }
}

/// One fused estimate.
public struct FusionOutput: Sendable, Equatable {
    /// Time of the IMU sample this estimate belongs to, seconds.
    public var timestamp: Double
    /// Orientation of the sensor relative to ENU with y = magnetic north.
    public var orientation: Quaternion
    /// Subtracted from the heading ("this direction is zero"), degrees.
    public var referenceOffsetDegrees: Double
    /// Magnetic heading of the sensor x axis, degrees clockwise from magnetic north, [0, 360), after
    /// the reference offset; nil when the x axis is vertical. Computed on access, from `orientation`.
    public var headingDegrees: Double? {
        orientation.headingDegrees.map { normalizedDegrees($0 - referenceOffsetDegrees) }
    }
    /// The filter's heading variance including its accuracy floor, degrees^2; nil while not valid.
    public var headingVarianceDegrees2: Double?
    /// An estimate of the 95 % bound of the true heading error, degrees (1.96 sigma); nil while not yet
    /// valid. Computed on access.
    public var headingAccuracyDegrees: Double? { headingVarianceDegrees2.map { 1.96 * $0.squareRoot() } }
    /// Estimated gyro bias, rad/s, sensor frame.
    public var gyroBias: Vector3
    public var flags: FusionFlags

    @inlinable
    public init(
        timestamp: Double, orientation: Quaternion, referenceOffsetDegrees: Double = 0,
        headingVarianceDegrees2: Double?,
        gyroBias: Vector3, flags: FusionFlags
    ) {
        self.timestamp = timestamp
        self.orientation = orientation
        self.referenceOffsetDegrees = referenceOffsetDegrees
        self.headingVarianceDegrees2 = headingVarianceDegrees2
        self.gyroBias = gyroBias
        self.flags = flags
    }
}

/// Why samples were skipped, counted (never silently dropped).
public struct SkippedSampleCounts: Sendable, Equatable {
    /// IMU samples with a NaN or infinite component.
    public var nonFiniteImu = 0
    /// Magnetometer samples with a NaN or infinite component (the IMU part was still used).
    public var nonFiniteMagnetometer = 0
    /// Accelerometer readings of (near) zero length.
    public var zeroSpecificForce = 0
    /// Magnetometer readings of (near) zero length.
    public var zeroMagneticField = 0
    /// Samples whose timestamp did not increase.
    public var timestampNotIncreasing = 0
    /// Gaps longer than the filter's maximum step; the step was clamped.
    public var timeGaps = 0
    /// IMU samples beyond what any IMU reports (angular rate or specific force; see `SampleValidator`).
    public var implausibleImu = 0
    /// Magnetometer samples beyond what any magnetometer reports.
    public var implausibleMagnetometer = 0
    /// Times the filter's state became non-finite and was started again from the next samples.
    public var stateResets = 0
    /// Times the time line was re-anchored after samples kept arriving behind the last accepted time
    /// (a clock reset, or one sample stamped far ahead); the samples behind are counted above too.
    public var timelineRestarts = 0
    /// Holes of more than `SampleValidator.holeSeconds` in the IMU stream and in the magnetometer
    /// readings that reach the filter, and the longest of each, seconds. Not skipped samples: time
    /// with none, which the summary names (a phone's sensors pause for seconds at a time).
    public var imuHoles = 0
    public var longestImuHoleSeconds = 0.0
    public var magnetometerHoles = 0
    public var longestMagnetometerHoleSeconds = 0.0

    public init() {}

    /// The reasons with a count, e.g. "non-finite IMU 2, implausible magnetometer 1".
    public var reasons: String {
        [
            ("non-finite IMU", nonFiniteImu), ("non-finite magnetometer", nonFiniteMagnetometer),
            ("zero specific force", zeroSpecificForce), ("zero magnetic field", zeroMagneticField),
            ("time not increasing", timestampNotIncreasing), ("implausible IMU", implausibleImu),
            ("implausible magnetometer", implausibleMagnetometer), ("time gaps clamped", timeGaps),
            ("state resets", stateResets), ("time line restarts", timelineRestarts),
        ].filter { $0.1 > 0 }.map { "\($0.0) \($0.1)" }.joined(separator: ", ")
    }

    /// The holes in the streams, e.g. "IMU 1 (longest 23.7 s), magnetometer 2 (longest 4.1 s)"; empty
    /// when there were none.
    public var holes: String {
        func one(_ name: String, _ count: Int, _ longest: Double) -> String? {
            guard count > 0 else { return nil }
            return "\(name) \(count) (longest \((longest * 10).rounded() / 10) s)"
        }
        return [
            one("IMU", imuHoles, longestImuHoleSeconds),
            one("magnetometer", magnetometerHoles, longestMagnetometerHoleSeconds),
        ].compactMap { $0 }.joined(separator: ", ")
    }

    public var total: Int {
        nonFiniteImu + nonFiniteMagnetometer + zeroSpecificForce + zeroMagneticField + timestampNotIncreasing
            + implausibleImu + implausibleMagnetometer
    }
}
