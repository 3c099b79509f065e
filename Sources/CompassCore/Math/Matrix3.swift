/// A 3x3 matrix of `Double`, row-major (`m01` is row 0, column 1).
@frozen
public struct Matrix3: Sendable, Hashable, CustomStringConvertible {
    public var m00, m01, m02: Double
    public var m10, m11, m12: Double
    public var m20, m21, m22: Double

    @inlinable
    public init(
        _ m00: Double, _ m01: Double, _ m02: Double,
        _ m10: Double, _ m11: Double, _ m12: Double,
        _ m20: Double, _ m21: Double, _ m22: Double
    ) {
        self.m00 = m00
        self.m01 = m01
        self.m02 = m02
        self.m10 = m10
        self.m11 = m11
        self.m12 = m12
        self.m20 = m20
        self.m21 = m21
        self.m22 = m22
    }

    /// The matrix whose rows are the given vectors.
    @inlinable
    public init(rows r0: Vector3, _ r1: Vector3, _ r2: Vector3) {
        self.init(r0.x, r0.y, r0.z, r1.x, r1.y, r1.z, r2.x, r2.y, r2.z)
    }

    /// The matrix whose columns are the given vectors.
    @inlinable
    public init(columns c0: Vector3, _ c1: Vector3, _ c2: Vector3) {
        self.init(c0.x, c1.x, c2.x, c0.y, c1.y, c2.y, c0.z, c1.z, c2.z)
    }

    public static let identity = Matrix3(1, 0, 0, 0, 1, 0, 0, 0, 1)

    /// A diagonal matrix.
    @inlinable public static func diagonal(_ d: Vector3) -> Matrix3 { Matrix3(d.x, 0, 0, 0, d.y, 0, 0, 0, d.z) }

    @inlinable public var row0: Vector3 { Vector3(m00, m01, m02) }
    @inlinable public var row1: Vector3 { Vector3(m10, m11, m12) }
    @inlinable public var row2: Vector3 { Vector3(m20, m21, m22) }
    @inlinable public var column0: Vector3 { Vector3(m00, m10, m20) }
    @inlinable public var column1: Vector3 { Vector3(m01, m11, m21) }
    @inlinable public var column2: Vector3 { Vector3(m02, m12, m22) }

    /// Element access by row and column index (0...2).
    @inlinable
    public subscript(row: Int, column: Int) -> Double {
        get {
            switch (row, column) {
            case (0, 0): return m00
            case (0, 1): return m01
            case (0, 2): return m02
            case (1, 0): return m10
            case (1, 1): return m11
            case (1, 2): return m12
            case (2, 0): return m20
            case (2, 1): return m21
            default: return m22
            }
        }
        set {
            switch (row, column) {
            case (0, 0): m00 = newValue
            case (0, 1): m01 = newValue
            case (0, 2): m02 = newValue
            case (1, 0): m10 = newValue
            case (1, 1): m11 = newValue
            case (1, 2): m12 = newValue
            case (2, 0): m20 = newValue
            case (2, 1): m21 = newValue
            default: m22 = newValue
            }
        }
    }

    @inlinable public var transposed: Matrix3 { Matrix3(m00, m10, m20, m01, m11, m21, m02, m12, m22) }

    @inlinable @inline(__always)
    public static func * (a: Matrix3, v: Vector3) -> Vector3 {
        Vector3(
            a.m00 * v.x + a.m01 * v.y + a.m02 * v.z,
            a.m10 * v.x + a.m11 * v.y + a.m12 * v.z,
            a.m20 * v.x + a.m21 * v.y + a.m22 * v.z)
    }

    @inlinable @inline(__always)
    public static func * (a: Matrix3, b: Matrix3) -> Matrix3 {
        Matrix3(
            rows: Vector3(a.row0.dot(b.column0), a.row0.dot(b.column1), a.row0.dot(b.column2)),
            Vector3(a.row1.dot(b.column0), a.row1.dot(b.column1), a.row1.dot(b.column2)),
            Vector3(a.row2.dot(b.column0), a.row2.dot(b.column1), a.row2.dot(b.column2)))
    }

    @inlinable @inline(__always)
    public static func * (a: Matrix3, s: Double) -> Matrix3 {
        Matrix3(a.m00 * s, a.m01 * s, a.m02 * s, a.m10 * s, a.m11 * s, a.m12 * s, a.m20 * s, a.m21 * s, a.m22 * s)
    }

    @inlinable @inline(__always)
    public static func + (a: Matrix3, b: Matrix3) -> Matrix3 {
        Matrix3(
            a.m00 + b.m00, a.m01 + b.m01, a.m02 + b.m02, a.m10 + b.m10, a.m11 + b.m11, a.m12 + b.m12,
            a.m20 + b.m20, a.m21 + b.m21, a.m22 + b.m22)
    }

    @inlinable
    public var determinant: Double {
        m00 * (m11 * m22 - m12 * m21) - m01 * (m10 * m22 - m12 * m20) + m02 * (m10 * m21 - m11 * m20)
    }

    /// The inverse, or nil when the matrix is singular relative to its scale or not finite.
    public var inverse: Matrix3? {
        let det = determinant
        let scale = Swift.max(row0.norm, row1.norm, row2.norm)
        guard det.isFinite, scale > 0, abs(det) > 1e-14 * scale * scale * scale else { return nil }
        let c = Matrix3(
            m11 * m22 - m12 * m21, m02 * m21 - m01 * m22, m01 * m12 - m02 * m11,
            m12 * m20 - m10 * m22, m00 * m22 - m02 * m20, m02 * m10 - m00 * m12,
            m10 * m21 - m11 * m20, m01 * m20 - m00 * m21, m00 * m11 - m01 * m10)
        return c * (1 / det)
    }

    /// True when every element is finite.
    public var isFinite: Bool { row0.isFinite && row1.isFinite && row2.isFinite }

    public var description: String { "[\(row0), \(row1), \(row2)]" }
}

extension Matrix3 {
    /// The outer product u v^T.
    @inlinable @inline(__always)
    public static func outer(_ u: Vector3, _ v: Vector3) -> Matrix3 {
        Matrix3(u.x * v.x, u.x * v.y, u.x * v.z, u.y * v.x, u.y * v.y, u.y * v.z, u.z * v.x, u.z * v.y, u.z * v.z)
    }

    @inlinable @inline(__always)
    public static func - (a: Matrix3, b: Matrix3) -> Matrix3 {
        Matrix3(
            a.m00 - b.m00, a.m01 - b.m01, a.m02 - b.m02, a.m10 - b.m10, a.m11 - b.m11, a.m12 - b.m12,
            a.m20 - b.m20, a.m21 - b.m21, a.m22 - b.m22)
    }

    /// Adds `s` to the diagonal.
    @inlinable
    public func addingToDiagonal(_ s: Double) -> Matrix3 {
        var m = self
        m.m00 += s
        m.m11 += s
        m.m22 += s
        return m
    }
}

extension Matrix3 {
    /// self -= k p^T for a symmetric result (k parallel to p): six products, mirrored.
    @inlinable @inline(__always)
    public mutating func subtractSymmetricOuter(_ k: Vector3, _ p: Vector3) {
        let a00 = k.x * p.x, a01 = k.x * p.y, a02 = k.x * p.z
        let a11 = k.y * p.y, a12 = k.y * p.z, a22 = k.z * p.z
        m00 -= a00
        m11 -= a11
        m22 -= a22
        m01 -= a01
        m10 = m01
        m02 -= a02
        m20 = m02
        m12 -= a12
        m21 = m12
    }
}
