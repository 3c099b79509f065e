#if canImport(Glibc)
    import Glibc
#endif
import CompassCore

/// gyrocompass_msgs/msg/Heading (definition in gyrocompass_msgs/msg/Heading.msg, embedded below).
public struct HeadingMessage: RosMessage, Equatable {
    public static let typeName = "gyrocompass_msgs/msg/Heading"
    public enum Source: UInt8, Sendable { case fusion = 0, compass = 1, gpsCourse = 2 }

    public var header: RosHeader
    /// Degrees clockwise from magnetic north, [0, 360).
    public var magneticHeading: Double
    /// Degrees clockwise from true north, or NaN when no declination is known.
    public var trueHeading: Double
    /// 95 % bound of the heading error, degrees, or NaN when not valid.
    public var headingAccuracy: Double
    /// Declination used, degrees east, or NaN.
    public var declination: Double
    /// Sensor frame relative to ENU (y = magnetic north).
    public var orientation: Quaternion
    /// Calibrated field, tesla, sensor frame.
    public var magneticField: Vector3
    public var source: UInt8
    /// Bits 0-15 of the `FusionFlags`, plus the true-north bits below.
    public var flags: UInt16
    /// `MagnetometerVerdictReason` bits (`wireBit`): why the magnetometer was refused. A version 1
    /// message (without the field) gives the reasons its flags hold.
    public var reasons: UInt32

    /// No position is known, so there is no declination and true_heading is NaN.
    public static let flagNoPosition: UInt16 = 1024
    /// The position or date is outside the World Magnetic Model's validity: true_heading is NaN.
    public static let flagModelOutOfRange: UInt16 = 2048
    /// Near a magnetic pole (horizontal field below 6000 nT): declination and true_heading degrade.
    public static let flagModelCautionZone: UInt16 = 4096

    /// The true-north bits of `flags`.
    public static let northFlags = flagNoPosition | flagModelOutOfRange | flagModelCautionZone

    /// The filter's flags: `flags` without the true-north bits, with the flags of every reason in
    /// `reasons` (including those the 16-bit word has no room for).
    public var fusionFlags: FusionFlags { Self.fusionFlags(flags, reasons: reasons) }

    static func fusionFlags(_ flags: UInt16, reasons: UInt32) -> FusionFlags {
        FusionFlags(rawValue: UInt32(flags & ~northFlags)).union(MagnetometerVerdictReason.flags(wireReasons: reasons))
    }

    /// The `reasons` a 16-bit `flags` word holds: what a version 1 message (no `reasons` field) says.
    public static func reasons(inFlags flags: UInt16) -> UInt32 {
        MagnetometerVerdictReason.wireReasons(FusionFlags(rawValue: UInt32(flags)))
    }

    /// The 16-bit `flags` word and the `reasons` word for a filter's flags and the true-north bits.
    public static func wireFlags(_ flags: FusionFlags, north: UInt16 = 0) -> (flags: UInt16, reasons: UInt32) {
        (UInt16(truncatingIfNeeded: flags.rawValue) & ~northFlags | north, MagnetometerVerdictReason.wireReasons(flags))
    }

    /// The names of the flags set in `flags` and `reasons` (fusion flags, then the true-north bits).
    public static func flagNames(_ flags: UInt16, reasons: UInt32 = 0) -> [String] {
        let fusion = fusionFlags(flags, reasons: reasons)
        return FusionFlags.names.filter { fusion.contains($0.0) }.map(\.1)
            + [
                (flagNoPosition, "no_position"), (flagModelOutOfRange, "model_out_of_range"),
                (flagModelCautionZone, "model_caution_zone"),
            ].filter { flags & $0.0 != 0 }.map(\.1)
    }

    public init(
        header: RosHeader, magneticHeading: Double, trueHeading: Double, headingAccuracy: Double, declination: Double,
        orientation: Quaternion, magneticField: Vector3, source: UInt8, flags: UInt16, reasons: UInt32? = nil
    ) {
        self.header = header
        self.magneticHeading = magneticHeading
        self.trueHeading = trueHeading
        self.headingAccuracy = headingAccuracy
        self.declination = declination
        self.orientation = orientation
        self.magneticField = magneticField
        self.source = source
        self.flags = flags
        self.reasons = reasons ?? Self.reasons(inFlags: flags)
    }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        header = try RosHeader(&r)
        magneticHeading = try r.float64("magnetic_heading")
        trueHeading = try r.float64("true_heading")
        headingAccuracy = try r.float64("heading_accuracy")
        declination = try r.float64("declination")
        let x = try r.float64("orientation.x"), y = try r.float64("orientation.y"), z = try r.float64("orientation.z"),
            w = try r.float64("orientation.w")
        orientation = Quaternion(w: w, x: x, y: y, z: z)
        magneticField = Vector3(
            try r.float64("magnetic_field.x"), try r.float64("magnetic_field.y"), try r.float64("magnetic_field.z"))
        source = try r.uint8("source")
        flags = try r.uint16("flags")
        // Version 1 ends here.
        reasons =
            try r.appendedUInt32("reasons")
            ?? Self.reasons(inFlags: flags)
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 160)
        header.encode(&w)
        w.float64(magneticHeading)
        w.float64(trueHeading)
        w.float64(headingAccuracy)
        w.float64(declination)
        w.float64(orientation.x)
        w.float64(orientation.y)
        w.float64(orientation.z)
        w.float64(orientation.w)
        w.float64(magneticField.x)
        w.float64(magneticField.y)
        w.float64(magneticField.z)
        w.uint8(source)
        w.uint16(flags)
        w.uint32(reasons)
        return w.take()
    }

    /// The .msg text (the file in gyrocompass_msgs/msg/, comments removed) with its dependencies, as
    /// MCAP schemas carry it. A test checks it against the file.
    public static let definitionText = """
        uint8 SOURCE_FUSION=0
        uint8 SOURCE_COMPASS=1
        uint8 SOURCE_GPS_COURSE=2
        uint16 FLAG_INITIALISING=1
        uint16 FLAG_AT_REST=2
        uint16 FLAG_ACCELERATION_REJECTED=4
        uint16 FLAG_MAGNETOMETER_REJECTED=8
        uint16 FLAG_GYRO_ONLY=16
        uint16 FLAG_MAGNETIC_STRENGTH=32
        uint16 FLAG_MAGNETIC_DIP=64
        uint16 FLAG_MAGNETIC_GYRO_INCONSISTENT=128
        uint16 FLAG_MAGNETIC_REFERENCE_CHANGED=256
        uint16 FLAG_FILTER_RESET=512
        uint16 FLAG_NO_POSITION=1024
        uint16 FLAG_WMM_OUT_OF_RANGE=2048
        uint16 FLAG_WMM_CAUTION_ZONE=4096
        uint16 FLAG_MAGNETOMETER_UNCALIBRATED=8192
        uint16 FLAG_GNSS_AIDED=16384
        uint16 FLAG_COMPASS_GNSS_DISAGREE=32768
        uint32 REASON_STRENGTH=1
        uint32 REASON_DIP=2
        uint32 REASON_GYRO_INCONSISTENT=4
        std_msgs/Header header
        float64 magnetic_heading
        float64 true_heading
        float64 heading_accuracy
        float64 declination
        geometry_msgs/Quaternion orientation
        geometry_msgs/Vector3 magnetic_field
        uint8 source
        uint16 flags
        uint32 reasons
        """
}

extension HeadingMessage {
    /// The reported field in the earth frame the reported orientation gives: strength (microtesla) and
    /// dip (degrees, positive below the horizon); NaN when the field is not known.
    public var fieldStrengthAndDip: (strengthMicrotesla: Double, dipDegrees: Double) {
        let earth = orientation.rotate(magneticField * 1e6)
        let horizontal = (earth.x * earth.x + earth.y * earth.y).squareRoot()
        return (earth.norm, atan2(-earth.z, horizontal) * degreesPerRadian)
    }
}
