#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// How a sensor is mounted: the rotation from its own axes to the body frame (REP-103: x forward,
/// y left, z up), `v_body = matrix * v_sensor`.
///
/// Two ways to say it, each in its own community's convention:
/// - a name from ArduPilot's `Rotation` list (`yaw_90`, `roll_180_yaw_90`, `pitch_270`, ...), lower case
///   without the prefix. ArduPilot's angles are about its own body axes (x forward, y right, z down), so
///   `yaw_90` is a quarter turn clockwise seen from above: a sensor whose x axis points right.
/// - `[roll, pitch, yaw]` in degrees as ROS and URDF write a child frame's orientation: about the fixed
///   x, y, z axes of REP-103 in that order (R = Rz(yaw) Ry(pitch) Rx(roll)), counter-clockwise positive.
///   So `[0, 0, -90]` is the same mounting as `yaw_90`.
public struct MountingRotation: Sendable, Hashable, CustomStringConvertible {
    /// Sensor axes to body axes.
    public let matrix: Matrix3
    /// As the user gave it: a name, or "roll,pitch,yaw" in degrees.
    public let description: String

    public static let none = MountingRotation(matrix: .identity, description: "none")

    public var isIdentity: Bool { matrix == .identity }

    init(matrix: Matrix3, description: String) {
        self.matrix = matrix
        self.description = description
    }

    /// ArduPilot's rotations, each as (roll, pitch, yaw) in degrees about its forward-right-down body
    /// axes (the numbering of its enum is kept in the order). `roll_90_pitch_68_yaw_293` is the one whose
    /// name rounds its angles: ArduPilot defines it as roll 90, pitch 68.8, yaw 293.3.
    public static let namedAngles: [(name: String, roll: Double, pitch: Double, yaw: Double)] = [
        ("none", 0, 0, 0), ("yaw_45", 0, 0, 45), ("yaw_90", 0, 0, 90), ("yaw_135", 0, 0, 135),
        ("yaw_180", 0, 0, 180), ("yaw_225", 0, 0, 225), ("yaw_270", 0, 0, 270), ("yaw_315", 0, 0, 315),
        ("roll_180", 180, 0, 0), ("roll_180_yaw_45", 180, 0, 45), ("roll_180_yaw_90", 180, 0, 90),
        ("roll_180_yaw_135", 180, 0, 135), ("pitch_180", 0, 180, 0), ("roll_180_yaw_225", 180, 0, 225),
        ("roll_180_yaw_270", 180, 0, 270), ("roll_180_yaw_315", 180, 0, 315), ("roll_90", 90, 0, 0),
        ("roll_90_yaw_45", 90, 0, 45), ("roll_90_yaw_90", 90, 0, 90), ("roll_90_yaw_135", 90, 0, 135),
        ("roll_270", 270, 0, 0), ("roll_270_yaw_45", 270, 0, 45), ("roll_270_yaw_90", 270, 0, 90),
        ("roll_270_yaw_135", 270, 0, 135), ("pitch_90", 0, 90, 0), ("pitch_270", 0, 270, 0),
        ("pitch_180_yaw_90", 0, 180, 90), ("pitch_180_yaw_270", 0, 180, 270), ("roll_90_pitch_90", 90, 90, 0),
        ("roll_180_pitch_90", 180, 90, 0), ("roll_270_pitch_90", 270, 90, 0), ("roll_90_pitch_180", 90, 180, 0),
        ("roll_270_pitch_180", 270, 180, 0), ("roll_90_pitch_270", 90, 270, 0), ("roll_180_pitch_270", 180, 270, 0),
        ("roll_270_pitch_270", 270, 270, 0), ("roll_90_pitch_180_yaw_90", 90, 180, 90),
        ("roll_90_yaw_270", 90, 0, 270), ("roll_90_pitch_68_yaw_293", 90, 68.8, 293.3), ("pitch_315", 0, 315, 0),
        ("roll_90_pitch_315", 90, 315, 0), ("pitch_7", 0, 7, 0), ("roll_45", 45, 0, 0), ("roll_315", 315, 0, 0),
    ]

    public static var names: [String] { namedAngles.map(\.name) }

    /// R = Rz(yaw) Ry(pitch) Rx(roll), angles in degrees, in whatever axes they are given.
    public static func matrix(rollDegrees: Double, pitchDegrees: Double, yawDegrees: Double) -> Matrix3 {
        func snapped(_ x: Double) -> Double { abs(x) < 1e-15 ? 0 : x }
        let (r, p, y) = (rollDegrees * radiansPerDegree, pitchDegrees * radiansPerDegree, yawDegrees * radiansPerDegree)
        let (cr, sr, cp, sp, cy, sy) = (cos(r), sin(r), cos(p), sin(p), cos(y), sin(y))
        return Matrix3(
            snapped(cy * cp), snapped(cy * sp * sr - sy * cr), snapped(cy * sp * cr + sy * sr),
            snapped(sy * cp), snapped(sy * sp * sr + cy * cr), snapped(sy * sp * cr - cy * sr),
            snapped(-sp), snapped(cp * sr), snapped(cp * cr))
    }

    /// A named ArduPilot rotation, or nil for an unknown name. Its forward-right-down matrix F becomes
    /// T F T with T = diag(1, -1, -1): the same physical rotation written in REP-103 axes.
    public static func named(_ name: String) -> MountingRotation? {
        guard let a = namedAngles.first(where: { $0.name == name }) else { return nil }
        let f = matrix(rollDegrees: a.roll, pitchDegrees: a.pitch, yawDegrees: a.yaw)
        let t = Matrix3.diagonal(Vector3(1, -1, -1))
        return MountingRotation(matrix: t * f * t, description: name)
    }

    /// `[roll, pitch, yaw]` in degrees, ROS/URDF convention (fixed REP-103 axes, counter-clockwise).
    public static func rollPitchYaw(degrees roll: Double, _ pitch: Double, _ yaw: Double) -> MountingRotation {
        MountingRotation(
            matrix: matrix(rollDegrees: roll, pitchDegrees: pitch, yawDegrees: yaw),
            description: "[\(roll), \(pitch), \(yaw)] deg")
    }

    /// A name, or "roll,pitch,yaw" in degrees; nil when it is neither.
    public static func parse(_ text: String) -> MountingRotation? {
        if let rotation = named(text) { return rotation }
        let parts = text.split(separator: ",").map { Double(String($0.filter { $0 != " " })) }
        guard parts.count == 3, let r = parts[0], let p = parts[1], let y = parts[2], r.isFinite, p.isFinite,
            y.isFinite
        else { return nil }
        return rollPitchYaw(degrees: r, p, y)
    }

    /// A rotation taken from a robot's transforms (tf), `chain` the frames from the sensor's up to the
    /// base; described by its [roll, pitch, yaw] in degrees (URDF convention).
    public init(tf matrix: Matrix3, chain: [String]) {
        let pitch = asin(max(-1, min(1, -matrix.m20)))
        var roll = atan2(matrix.m21, matrix.m22), yaw = atan2(matrix.m10, matrix.m00)
        if abs(matrix.m20) > 1 - 1e-9 {  // pitch +-90: only roll and yaw together are defined; roll 0
            roll = 0
            yaw = atan2(-matrix.m01, matrix.m11)
        }
        func d(_ x: Double) -> String {
            let r = (x / radiansPerDegree * 100).rounded() / 100
            if r == 0 { return "0" }  // also -0
            return r == r.rounded() ? "\(Int(r))" : "\(r)"
        }
        self.init(
            matrix: matrix,
            description: "[\(d(roll)), \(d(pitch)), \(d(yaw))] deg (\(chain.joined(separator: " -> ")))")
    }

    /// The opposite turn, body axes to sensor axes.
    public var inverse: MountingRotation {
        isIdentity ? self : MountingRotation(matrix: matrix.transposed, description: "inverse of \(description)")
    }

    /// A vector from sensor axes to body axes.
    @inlinable public func apply(_ v: Vector3) -> Vector3 { matrix * v }

    /// A covariance (row-major 3x3) from sensor axes to body axes: R C R^T.
    @inlinable public func apply(covariance c: Matrix3) -> Matrix3 { matrix * c * matrix.transposed }
}
