/// Eigen-decomposition of a symmetric 3x3 matrix by cyclic Jacobi rotations.
public struct SymmetricEigen3: Sendable {
    /// Eigenvalues in ascending order.
    public let values: Vector3
    /// Orthonormal eigenvectors as the columns of this matrix, in the order of `values`.
    public let vectors: Matrix3

    /// Decomposes `a`, which must be symmetric (only the upper triangle is read). Returns nil for a
    /// non-finite matrix.
    public init?(_ a: Matrix3) {
        guard a.isFinite else { return nil }
        var m = a
        m.m10 = m.m01
        m.m20 = m.m02
        m.m21 = m.m12
        var v = Matrix3.identity
        for _ in 0..<64 {
            let off = m.m01 * m.m01 + m.m02 * m.m02 + m.m12 * m.m12
            let scale = m.m00 * m.m00 + m.m11 * m.m11 + m.m22 * m.m22
            if off <= 1e-30 * Swift.max(scale, 1e-300) { break }
            for (p, q) in [(0, 1), (0, 2), (1, 2)] {
                let apq = m[p, q]
                if apq == 0 { continue }
                let theta = (m[q, q] - m[p, p]) / (2 * apq)
                let t = (theta >= 0 ? 1.0 : -1.0) / (abs(theta) + (theta * theta + 1).squareRoot())
                let c = 1 / (t * t + 1).squareRoot()
                let s = t * c
                // m <- J^T m J with the Jacobi rotation J in the (p, q) plane.
                for k in 0..<3 {
                    let mkp = m[k, p], mkq = m[k, q]
                    m[k, p] = c * mkp - s * mkq
                    m[k, q] = s * mkp + c * mkq
                }
                for k in 0..<3 {
                    let mpk = m[p, k], mqk = m[q, k]
                    m[p, k] = c * mpk - s * mqk
                    m[q, k] = s * mpk + c * mqk
                }
                for k in 0..<3 {
                    let vkp = v[k, p], vkq = v[k, q]
                    v[k, p] = c * vkp - s * vkq
                    v[k, q] = s * vkp + c * vkq
                }
            }
        }
        var order = [(m.m00, 0), (m.m11, 1), (m.m22, 2)]
        order.sort { $0.0 < $1.0 }
        values = Vector3(order[0].0, order[1].0, order[2].0)
        let cols = [v.column0, v.column1, v.column2]
        vectors = Matrix3(columns: cols[order[0].1], cols[order[1].1], cols[order[2].1])
    }

    /// f(A) = V diag(f(lambda)) V^T for a function of the eigenvalues (e.g. the square root).
    public func applying(_ f: (Double) -> Double) -> Matrix3 {
        let d = Matrix3.diagonal(Vector3(f(values.x), f(values.y), f(values.z)))
        return vectors * d * vectors.transposed
    }
}
