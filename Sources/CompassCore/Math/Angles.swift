#if canImport(Glibc)
import Glibc
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
