#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Degrees per radian.
public let degreesPerRadian = 180.0 / Double.pi
/// Radians per degree.
public let radiansPerDegree = Double.pi / 180.0

/// Wraps an angle in degrees into [0, 360).
@inlinable
public func normalizedDegrees(_ degrees: Double) -> Double {
    var a = degrees.truncatingRemainder(dividingBy: 360)
    if a < 0 { a += 360 }
    // -1e-15 + 360 rounds to 360.0 exactly; keep the half-open range honest.
    return a >= 360 ? 0 : a
}

/// Wraps an angle in degrees into [-180, 180): the signed shortest turn.
@inlinable
public func signedDegrees(_ degrees: Double) -> Double {
    let a = normalizedDegrees(degrees + 180) - 180
    return a
}

/// Wraps an angle in radians into [-pi, pi).
@inlinable
public func signedRadians(_ radians: Double) -> Double {
    var a = (radians + .pi).truncatingRemainder(dividingBy: 2 * .pi)
    if a < 0 { a += 2 * .pi }
    return a - .pi
}

/// Wraps an angle in radians that is already within (-3 pi, 3 pi) into [-pi, pi), without `fmod`.
@inlinable
public func wrappedRadians(_ radians: Double) -> Double {
    var a = radians
    if a >= .pi { a -= 2 * .pi } else if a < -.pi { a += 2 * .pi }
    return a
}

/// atan(x) / x, for the rotation angle of a small tilt: a series for |x| < 0.1 (relative error below
/// 1e-10), libm beyond.
@inlinable @inline(__always)
public func atanOverX(_ x: Double) -> Double {
    let x2 = x * x
    if x2 < 0.01 {
        return 1 - x2 * (1.0 / 3 - x2 * (1.0 / 5 - x2 * (1.0 / 7 - x2 * (1.0 / 9))))
    }
    return atan(x) / x
}

/// atan2(y, x) with a series when |y| is small against a positive x (heading innovations), libm
/// otherwise. Identical to libm within 1e-10 relative.
@inlinable @inline(__always)
public func atan2Small(_ y: Double, _ x: Double) -> Double {
    if x > 0 && abs(y) < 0.1 * x {
        let r = y / x
        return r * atanOverX(r)
    }
    return atan2(y, x)
}

/// atan2 by a degree-11 odd polynomial on [-1, 1] with octant reflection: absolute error below
/// 1e-5 rad (0.0006 degrees). For gating quantities (magnetic dip) compared against tolerances of
/// degrees, where libm's exactness buys nothing.
@inlinable @inline(__always)
public func approximateAtan2(_ y: Double, _ x: Double) -> Double {
    let ax = abs(x), ay = abs(y)
    guard ax > 0 || ay > 0 else { return 0 }
    let swap = ay > ax
    let t = swap ? ax / ay : ay / ax
    let t2 = t * t
    var r =
        t
        * (0.99997726 + t2
            * (-0.33262347 + t2 * (0.19354346 + t2 * (-0.11643287 + t2 * (0.05265332 + t2 * -0.01172120)))))
    if swap { r = .pi / 2 - r }
    if x < 0 { r = .pi - r }
    return y < 0 ? -r : r
}

/// For a unit vector u: the angle between u and +z divided by the length of u's horizontal part,
/// atan2(s, u_z) / s with s = |(u_x, u_y)|. Multiplying (u_y, -u_x, 0) by it gives the rotation
/// vector that takes u onto +z. A series without square roots for tilts below about 5.7 degrees.
@inlinable @inline(__always)
public func tiltAngleOverSine(_ u: Vector3) -> Double {
    let s2 = u.x * u.x + u.y * u.y
    if u.z > 0 {
        let x2 = s2 / (u.z * u.z)
        if x2 < 0.01 { return (1 - x2 * (1.0 / 3 - x2 * (1.0 / 5 - x2 * (1.0 / 7 - x2 * (1.0 / 9))))) / u.z }
    }
    let s = s2.squareRoot()
    return s > 1e-12 ? atan2(s, u.z) / s : 1
}
