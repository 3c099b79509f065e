#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A quaternion of `Double`, Hamilton convention, scalar first. As an orientation it is the rotation
/// of the sensor frame relative to ENU: `v_enu = q.rotate(v_sensor)` (see Conventions.swift).
@frozen
public struct Quaternion: Sendable, Hashable, CustomStringConvertible {
    public var w: Double
    public var x: Double
    public var y: Double
    public var z: Double

    @inlinable public init(w: Double, x: Double, y: Double, z: Double) {
        self.w = w
        self.x = x
        self.y = y
        self.z = z
    }

    public static let identity = Quaternion(w: 1, x: 0, y: 0, z: 0)

    /// The rotation by `angleRadians` about `axis` (need not be unit length; a zero axis gives identity).
    @inlinable
    public init(axis: Vector3, angleRadians: Double) {
        guard let u = axis.normalized else {
            self = .identity
            return
        }
        let h = 0.5 * angleRadians
        let s = sin(h)
        self.init(w: cos(h), x: u.x * s, y: u.y * s, z: u.z * s)
    }

    /// The exponential map: the rotation whose axis is `v` and whose angle is |v| radians.
    @inlinable @inline(__always)
    public init(rotationVector v: Vector3) {
        let a2 = v.squaredNorm
        if a2 < 0.04 {
            // Angles below 0.2 rad (every gyro step and filter correction): Taylor series of cos(a/2)
            // and sin(a/2)/a in a^2, exact to rounding (the first omitted terms are below 1e-16).
            let a4 = a2 * a2
            let c = 1 - a2 / 8 + a4 / 384 - a4 * a2 / 46080 + a4 * a4 / 10_321_920
            let s = 0.5 - a2 / 48 + a4 / 3840 - a4 * a2 / 645_120 + a4 * a4 / 185_794_560
            self.init(w: c, x: v.x * s, y: v.y * s, z: v.z * s)
        } else {
            let angle = a2.squareRoot()
            let s = sin(0.5 * angle) / angle
            self.init(w: cos(0.5 * angle), x: v.x * s, y: v.y * s, z: v.z * s)
        }
    }

    /// The orientation from ROS roll/pitch/yaw in radians: R = Rz(yaw) * Ry(pitch) * Rx(roll).
    @inlinable
    public init(rollRadians roll: Double, pitchRadians pitch: Double, yawRadians yaw: Double) {
        let cr = cos(0.5 * roll), sr = sin(0.5 * roll)
        let cp = cos(0.5 * pitch), sp = sin(0.5 * pitch)
        let cy = cos(0.5 * yaw), sy = sin(0.5 * yaw)
        self.init(
            w: cy * cp * cr + sy * sp * sr,
            x: cy * cp * sr - sy * sp * cr,
            y: cy * sp * cr + sy * cp * sr,
            z: sy * cp * cr - cy * sp * sr)
    }

    /// The orientation with compass heading, pitch and roll in degrees (heading clockwise from north of
    /// the sensor x axis; pitch and roll as ROS RPY, positive pitch lowers the nose).
    @inlinable
    public init(headingDegrees: Double, pitchDegrees: Double, rollDegrees: Double) {
        self.init(
            rollRadians: rollDegrees * radiansPerDegree, pitchRadians: pitchDegrees * radiansPerDegree,
            yawRadians: (90 - headingDegrees) * radiansPerDegree)
    }

    /// The quaternion of a proper rotation matrix (Shepperd's method: stable for every rotation).
    public init(rotationMatrix m: Matrix3) {
        let trace = m.m00 + m.m11 + m.m22
        if trace > 0 {
            let s = (trace + 1).squareRoot() * 2
            self.init(w: 0.25 * s, x: (m.m21 - m.m12) / s, y: (m.m02 - m.m20) / s, z: (m.m10 - m.m01) / s)
        } else if m.m00 > m.m11 && m.m00 > m.m22 {
            let s = (1 + m.m00 - m.m11 - m.m22).squareRoot() * 2
            self.init(w: (m.m21 - m.m12) / s, x: 0.25 * s, y: (m.m01 + m.m10) / s, z: (m.m02 + m.m20) / s)
        } else if m.m11 > m.m22 {
            let s = (1 + m.m11 - m.m00 - m.m22).squareRoot() * 2
            self.init(w: (m.m02 - m.m20) / s, x: (m.m01 + m.m10) / s, y: 0.25 * s, z: (m.m12 + m.m21) / s)
        } else {
            let s = (1 + m.m22 - m.m00 - m.m11).squareRoot() * 2
            self.init(w: (m.m10 - m.m01) / s, x: (m.m02 + m.m20) / s, y: (m.m12 + m.m21) / s, z: 0.25 * s)
        }
        self = normalized.canonical
    }

    @inlinable @inline(__always)
    public static func * (a: Quaternion, b: Quaternion) -> Quaternion {
        Quaternion(
            w: a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z,
            x: a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y,
            y: a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x,
            z: a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w)
    }

    @inlinable public var conjugate: Quaternion { Quaternion(w: w, x: -x, y: -y, z: -z) }
    @inlinable public var norm: Double { (w * w + x * x + y * y + z * z).squareRoot() }
    @inlinable public var vector: Vector3 { Vector3(x, y, z) }
    @inlinable public var isFinite: Bool { w.isFinite && x.isFinite && y.isFinite && z.isFinite }

    /// This quaternion scaled to unit length (identity for a zero quaternion).
    @inlinable
    public var normalized: Quaternion {
        let n = norm
        guard n > 0 else { return .identity }
        let s = 1 / n
        return Quaternion(w: w * s, x: x * s, y: y * s, z: z * s)
    }

    /// Back to unit length for a quaternion already within about 1e-6 of it (after products of unit
    /// quaternions): one Newton step of 1/sqrt, no square root or division, error second order in the
    /// deviation.
    @inlinable @inline(__always)
    public var renormalized: Quaternion {
        let k = 1.5 - 0.5 * (w * w + x * x + y * y + z * z)
        return Quaternion(w: w * k, x: x * k, y: y * k, z: z * k)
    }

    /// The same rotation with w >= 0 (q and -q are the same rotation).
    @inlinable public var canonical: Quaternion { w < 0 ? Quaternion(w: -w, x: -x, y: -y, z: -z) : self }

    /// Rotates `v` by this unit quaternion: q * v * conj(q).
    @inlinable @inline(__always)
    public func rotate(_ v: Vector3) -> Vector3 {
        // t = 2 q_vec x v; v' = v + w t + q_vec x t
        let qv = Vector3(x, y, z)
        let t = qv.cross(v) * 2
        return v + t * w + qv.cross(t)
    }

    /// Rotates `v` by the inverse of this unit quaternion: conj(q) * v * q (earth to sensor).
    @inlinable
    public func inverseRotate(_ v: Vector3) -> Vector3 { conjugate.rotate(v) }

    /// The rotation matrix R with v_enu = R * v_sensor.
    @inlinable @inline(__always)
    public var rotationMatrix: Matrix3 {
        let ww = w * w, xx = x * x, yy = y * y, zz = z * z
        let xy = x * y, xz = x * z, yz = y * z, wx = w * x, wy = w * y, wz = w * z
        return Matrix3(
            ww + xx - yy - zz, 2 * (xy - wz), 2 * (xz + wy),
            2 * (xy + wz), ww - xx + yy - zz, 2 * (yz - wx),
            2 * (xz - wy), 2 * (yz + wx), ww - xx - yy + zz)
    }

    /// The logarithm map: rotation vector (axis times angle in radians, angle in [0, pi]).
    @inlinable
    public var rotationVector: Vector3 {
        let q = canonical
        let s = q.vector.norm
        if s < 1e-12 { return q.vector * 2 }
        let angle = 2 * atan2(s, q.w)
        return q.vector * (angle / s)
    }

    /// The rotation angle in radians, in [0, pi].
    @inlinable public var angleRadians: Double { 2 * atan2(vector.norm, abs(w)) }

    /// Compass heading of the sensor x axis in degrees clockwise from north, [0, 360); nil when the
    /// x axis points straight up or down (heading undefined).
    @inlinable
    public var headingDegrees: Double? {
        let forward = rotate(.unitX)
        let horizontal = (forward.x * forward.x + forward.y * forward.y).squareRoot()
        guard horizontal > 1e-12 else { return nil }
        return normalizedDegrees(atan2(forward.x, forward.y) * degreesPerRadian)
    }

    /// ROS yaw (rotation about the ENU z axis) in radians, from the Rz*Ry*Rx decomposition.
    @inlinable
    public var yawRadians: Double { atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)) }

    /// Spherical linear interpolation from `self` (s = 0) to `other` (s = 1), shortest path.
    public func slerp(to other: Quaternion, fraction s: Double) -> Quaternion {
        var b = other
        var d = w * b.w + x * b.x + y * b.y + z * b.z
        if d < 0 {
            b = Quaternion(w: -b.w, x: -b.x, y: -b.y, z: -b.z)
            d = -d
        }
        if d > 0.9995 {
            return Quaternion(w: w + (b.w - w) * s, x: x + (b.x - x) * s, y: y + (b.y - y) * s, z: z + (b.z - z) * s)
                .normalized
        }
        let theta = acos(min(1, d))
        let k0 = sin((1 - s) * theta) / sin(theta)
        let k1 = sin(s * theta) / sin(theta)
        return Quaternion(w: w * k0 + b.w * k1, x: x * k0 + b.x * k1, y: y * k0 + b.y * k1, z: z * k0 + b.z * k1)
    }

    /// This orientation carried `seconds` further at the sensor-frame angular rate `rate` (rad/s).
    @inlinable
    public func predicted(rate: Vector3, seconds: Double) -> Quaternion {
        seconds > 0 ? self * Quaternion(rotationVector: rate * seconds) : self
    }

    /// The angle in radians of the rotation that takes `self` to `other`.
    @inlinable
    public func angularDistance(to other: Quaternion) -> Double { (conjugate * other).angleRadians }

    public var description: String { "Quaternion(w: \(w), x: \(x), y: \(y), z: \(z))" }
}
