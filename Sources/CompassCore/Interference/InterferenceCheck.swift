#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Flags raised by the strength/dip interference check.
public struct InterferenceFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    @inlinable public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// Field strength differs from the expected strength by more than the tolerance.
    public static let strength = InterferenceFlags(rawValue: 1 << 0)
    /// Dip differs from the expected dip by more than the tolerance.
    public static let dip = InterferenceFlags(rawValue: 1 << 1)
    /// The reading could not be assessed (non-finite or zero vectors).
    public static let invalid = InterferenceFlags(rawValue: 1 << 2)
}

/// The outcome of one interference check.
public struct InterferenceAssessment: Sendable, Equatable {
    /// Measured strength over expected strength (1 = nominal); nil when not assessable.
    public var strengthRatio: Double?
    /// Measured dip in degrees (positive below the horizon); nil when not assessable.
    public var dipDegrees: Double?
    /// What is wrong; empty for a trustworthy reading.
    public var flags: InterferenceFlags
    /// True when no flag is raised.
    public var isClean: Bool { flags.isEmpty }

    @inlinable
    public init(strengthRatio: Double?, dipDegrees: Double?, flags: InterferenceFlags) {
        self.strengthRatio = strengthRatio
        self.dipDegrees = dipDegrees
        self.flags = flags
    }
}

/// Compares a calibrated reading's strength and dip with what the local earth field should give.
///
/// These two checks catch most magnets and steel, but not a disturbance that happens to keep both
/// (a small field mostly along the horizontal): that needs the gyro (see the fusion filters).
public struct InterferenceCheck: Sendable, Equatable {
    /// Expected field strength, microtesla (from calibration radius or the World Magnetic Model).
    public var expectedStrengthMicrotesla: Double
    /// Expected dip in degrees, positive below the horizon.
    public var expectedDipDegrees: Double
    /// Allowed relative strength deviation; default that of the fusion filters' magnetic gate (0.1).
    public var strengthTolerance: Double
    /// Allowed dip deviation in degrees; default that of the magnetic gate (5).
    public var dipToleranceDegrees: Double

    public init(
        expectedStrengthMicrotesla: Double, expectedDipDegrees: Double,
        strengthTolerance: Double = MagneticGateSettings().strengthTolerance,
        dipToleranceDegrees: Double = MagneticGateSettings().dipToleranceDegrees
    ) {
        self.expectedStrengthMicrotesla = expectedStrengthMicrotesla
        self.expectedDipDegrees = expectedDipDegrees
        self.strengthTolerance = strengthTolerance
        self.dipToleranceDegrees = dipToleranceDegrees
    }

    /// Assesses one reading. `fieldMicrotesla` calibrated, sensor frame; `specificForce` m/s^2.
    @inlinable
    public func assess(fieldMicrotesla field: Vector3, specificForce: Vector3) -> InterferenceAssessment {
        guard field.isFinite, specificForce.isFinite, let down = (-specificForce).normalized,
            expectedStrengthMicrotesla > 0
        else {
            return InterferenceAssessment(strengthRatio: nil, dipDegrees: nil, flags: .invalid)
        }
        let strength = field.norm
        guard strength > 0 else {
            return InterferenceAssessment(strengthRatio: 0, dipDegrees: nil, flags: [.invalid, .strength])
        }
        let ratio = strength / expectedStrengthMicrotesla
        let dip = asin(Swift.max(-1, Swift.min(1, down.dot(field) / strength))) * degreesPerRadian
        let flags = Self.deviations(
            strengthMicrotesla: strength, dipDegrees: dip, expectedStrengthMicrotesla: expectedStrengthMicrotesla,
            expectedDipDegrees: expectedDipDegrees, strengthTolerance: strengthTolerance,
            dipToleranceDegrees: dipToleranceDegrees)
        return InterferenceAssessment(strengthRatio: ratio, dipDegrees: dip, flags: flags)
    }

    /// The one strength and dip comparison: this check applies it to a reading, the fusion filters'
    /// magnetic gate to its low-passed strength and dip.
    @inlinable
    public static func deviations(
        strengthMicrotesla strength: Double, dipDegrees dip: Double, expectedStrengthMicrotesla expected: Double,
        expectedDipDegrees expectedDip: Double, strengthTolerance: Double, dipToleranceDegrees: Double
    ) -> InterferenceFlags {
        var flags: InterferenceFlags = []
        if abs(strength - expected) > strengthTolerance * expected { flags.insert(.strength) }
        if abs(dip - expectedDip) > dipToleranceDegrees { flags.insert(.dip) }
        return flags
    }
}
