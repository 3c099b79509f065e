#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A 3-vector of `Double`. Plain stored properties: measured faster than `SIMD3<Double>` on this
/// toolchain, and by far in debug builds. The unit is whatever the API using it names.
@frozen
public struct Vector3: Sendable, Hashable, CustomStringConvertible {
    public var x: Double
    public var y: Double
    public var z: Double

    @inlinable public init(_ x: Double, _ y: Double, _ z: Double) {
        self.x = x
        self.y = y
        self.z = z
    }
    @inlinable public init(x: Double, y: Double, z: Double) {
        self.x = x
        self.y = y
        self.z = z
    }

    public static let zero = Vector3(0, 0, 0)
    public static let unitX = Vector3(1, 0, 0)
    public static let unitY = Vector3(0, 1, 0)
    public static let unitZ = Vector3(0, 0, 1)

    @inlinable public static func + (a: Vector3, b: Vector3) -> Vector3 { Vector3(a.x + b.x, a.y + b.y, a.z + b.z) }
    @inlinable public static func - (a: Vector3, b: Vector3) -> Vector3 { Vector3(a.x - b.x, a.y - b.y, a.z - b.z) }
    @inlinable public static prefix func - (a: Vector3) -> Vector3 { Vector3(-a.x, -a.y, -a.z) }
    @inlinable public static func * (a: Vector3, s: Double) -> Vector3 { Vector3(a.x * s, a.y * s, a.z * s) }
    @inlinable public static func * (s: Double, a: Vector3) -> Vector3 { Vector3(a.x * s, a.y * s, a.z * s) }
    @inlinable public static func / (a: Vector3, s: Double) -> Vector3 { Vector3(a.x / s, a.y / s, a.z / s) }
    @inlinable public static func += (a: inout Vector3, b: Vector3) { a = a + b }
    @inlinable public static func -= (a: inout Vector3, b: Vector3) { a = a - b }
    @inlinable public static func *= (a: inout Vector3, s: Double) { a = a * s }

    @inlinable public func dot(_ b: Vector3) -> Double { x * b.x + y * b.y + z * b.z }
    @inlinable public func cross(_ b: Vector3) -> Vector3 {
        Vector3(y * b.z - z * b.y, z * b.x - x * b.z, x * b.y - y * b.x)
    }
    @inlinable public var squaredNorm: Double { x * x + y * y + z * z }
    @inlinable public var norm: Double { squaredNorm.squareRoot() }
    /// True when no component is NaN or infinite.
    @inlinable public var isFinite: Bool { x.isFinite && y.isFinite && z.isFinite }

    /// The unit vector in this direction, or nil for a zero or non-finite vector.
    @inlinable public var normalized: Vector3? {
        let n = norm
        guard n > 0, n.isFinite, isFinite else { return nil }
        return self / n
    }

    /// Component-wise product.
    @inlinable public func scaled(by s: Vector3) -> Vector3 { Vector3(x * s.x, y * s.y, z * s.z) }

    public var description: String { "(\(x), \(y), \(z))" }
}
