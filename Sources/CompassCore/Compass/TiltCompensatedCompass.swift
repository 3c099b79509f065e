#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a single magnetometer + accelerometer reading says, tilt compensated.
public struct CompassReading: Sendable, Equatable {
    /// Magnetic heading of the sensor x axis, degrees clockwise from magnetic north, [0, 360).
    public var headingDegrees: Double
    /// Magnetic dip (inclination) in degrees, positive when the field points below the horizon.
    public var dipDegrees: Double
    /// Field strength in the unit of the input (microtesla by convention).
    public var fieldStrength: Double
    /// Orientation of the sensor relative to ENU (y = magnetic north) that these two vectors imply.
    public var orientation: Quaternion

    @inlinable
    public init(headingDegrees: Double, dipDegrees: Double, fieldStrength: Double, orientation: Quaternion) {
        self.headingDegrees = headingDegrees
        self.dipDegrees = dipDegrees
        self.fieldStrength = fieldStrength
        self.orientation = orientation
    }
}

/// The tilt-compensated compass: heading from the magnetic field and the direction of gravity.
public enum TiltCompensatedCompass {
    /// The smallest angle between field and vertical for which a heading is given, degrees.
    public static let minimumFieldToVerticalDegrees = 0.5

    /// Computes heading, dip and the implied orientation.
    ///
    /// - Parameters:
    ///   - field: magnetic field in the sensor frame (microtesla, or any unit: only strength scales).
    ///   - specificForce: accelerometer reading in the sensor frame, m/s^2 (points up at rest).
    /// The construction is east = down x field, north = east x down, with down = -specificForce.
    @inlinable
    public static func reading(field: Vector3, specificForce: Vector3) -> Result<CompassReading, CompassError> {
        guard field.isFinite else { return .failure(.nonFinite(input: "magnetic field")) }
        guard specificForce.isFinite else { return .failure(.nonFinite(input: "specific force")) }
        guard let down = (-specificForce).normalized else { return .failure(.zeroVector(input: "specific force")) }
        let strength = field.norm
        guard strength > 0 else { return .failure(.zeroVector(input: "magnetic field")) }
        let eastRaw = down.cross(field)
        let sinAngle = eastRaw.norm / strength
        guard sinAngle > sin(minimumFieldToVerticalDegrees * radiansPerDegree) else {
            return .failure(.fieldParallelToGravity(angleDegrees: minimumFieldToVerticalDegrees))
        }
        let east = eastRaw / eastRaw.norm
        let north = east.cross(down)
        let up = -down
        let heading = normalizedDegrees(atan2(east.x, north.x) * degreesPerRadian)
        let dip = asin(Swift.max(-1, Swift.min(1, down.dot(field) / strength))) * degreesPerRadian
        // Rows of the sensor-to-ENU matrix are the earth axes expressed in the sensor frame.
        let orientation = Quaternion(rotationMatrix: Matrix3(rows: east, north, up))
        return .success(
            CompassReading(
                headingDegrees: heading, dipDegrees: dip, fieldStrength: strength,
                orientation: orientation))
    }

    /// The orientation to start a filter from: the compass's when the field is usable, otherwise level
    /// from gravity alone with an arbitrary heading (`headingKnown` false). nil for unusable gravity.
    public static func initialOrientation(specificForce: Vector3, field: Vector3?) -> (
        orientation: Quaternion, headingKnown: Bool
    )? {
        if let f = field, case .success(let reading) = reading(field: f, specificForce: specificForce) {
            return (reading.orientation, true)
        }
        guard let up = specificForce.normalized else { return nil }
        let axis = up.cross(.unitZ)
        return (Quaternion(axis: axis, angleRadians: atan2(axis.norm, up.z)), false)
    }

    /// Tilt-compensated heading in degrees clockwise from magnetic north, or nil for invalid input.
    @inlinable
    public static func headingDegrees(field: Vector3, specificForce: Vector3) -> Double? {
        try? reading(field: field, specificForce: specificForce).get().headingDegrees
    }
}

/// The flat-device formula, heading = atan2(m_y, m_x) in the FLU sensor frame. Correct only when the
/// sensor is level; kept to show what tilt compensation buys (and for devices with no accelerometer).
public enum FlatCompass {
    /// Heading in degrees clockwise from magnetic north, or nil for a non-finite or vertical field.
    @inlinable
    public static func headingDegrees(field: Vector3) -> Double? {
        guard field.isFinite, field.x != 0 || field.y != 0 else { return nil }
        return normalizedDegrees(atan2(field.y, field.x) * degreesPerRadian)
    }
}
