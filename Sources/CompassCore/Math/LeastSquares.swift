/// Dense linear least squares by Householder QR, for the small calibration problems (4 to 9 unknowns,
/// a few hundred to a few thousand rows). QR avoids squaring the condition number as the normal
/// equations would, which matters for the ellipsoid fit's squared microtesla terms.
public enum LeastSquares {
    /// Why a solve was refused.
    public enum Failure: Error, Equatable, Sendable {
        /// Fewer equations than unknowns.
        case underdetermined(rows: Int, unknowns: Int)
        /// The design matrix is rank deficient: its smallest R diagonal relative to the largest.
        case rankDeficient(relativeDiagonal: Double)
        /// An input value is NaN or infinite.
        case nonFinite
    }

    /// A least-squares solution with what is needed to judge it.
    public struct Solution: Sendable {
        /// The minimiser of |A x - b|.
        public let x: [Double]
        /// Root mean square of the residual A x - b.
        public let rmsResidual: Double
        /// Smallest over largest |R_ii|: a cheap conditioning measure (1 is perfect, 0 singular).
        public let conditioning: Double
    }

    /// Solves min |A x - b| where `a` is row-major with `unknowns` columns.
    public static func solve(
        rowMajor a: [Double], unknowns n: Int, rhs b: [Double],
        minimumConditioning: Double = 1e-10
    ) -> Result<Solution, Failure> {
        let m = b.count
        guard m >= n, a.count == m * n else { return .failure(.underdetermined(rows: m, unknowns: n)) }
        guard a.allSatisfy({ $0.isFinite }), b.allSatisfy({ $0.isFinite }) else { return .failure(.nonFinite) }
        // Column-major working copy: each Householder step touches columns contiguously.
        var q = [Double](repeating: 0, count: m * n)
        for r in 0..<m { for c in 0..<n { q[c * m + r] = a[r * n + c] } }
        var rhs = b
        var diag = [Double](repeating: 0, count: n)
        for k in 0..<n {
            var normSq = 0.0
            for r in k..<m { normSq += q[k * m + r] * q[k * m + r] }
            let norm = normSq.squareRoot()
            if norm == 0 {
                diag[k] = 0
                continue
            }
            let alpha = q[k * m + k] > 0 ? -norm : norm
            q[k * m + k] -= alpha
            var vNormSq = 0.0
            for r in k..<m { vNormSq += q[k * m + r] * q[k * m + r] }
            diag[k] = alpha
            if vNormSq == 0 { continue }
            for c in (k + 1)..<max(n, k + 1) where c < n {
                var d = 0.0
                for r in k..<m { d += q[k * m + r] * q[c * m + r] }
                let f = 2 * d / vNormSq
                for r in k..<m { q[c * m + r] -= f * q[k * m + r] }
            }
            var d = 0.0
            for r in k..<m { d += q[k * m + r] * rhs[r] }
            let f = 2 * d / vNormSq
            for r in k..<m { rhs[r] -= f * q[k * m + r] }
        }
        let largest = diag.map(abs).max() ?? 0
        let smallest = diag.map(abs).min() ?? 0
        let conditioning = largest > 0 ? smallest / largest : 0
        guard conditioning > minimumConditioning else {
            return .failure(.rankDeficient(relativeDiagonal: conditioning))
        }
        var x = [Double](repeating: 0, count: n)
        for k in stride(from: n - 1, through: 0, by: -1) {
            var s = rhs[k]
            for c in (k + 1)..<max(n, k + 1) where c < n { s -= q[c * m + k] * x[c] }
            x[k] = s / diag[k]
        }
        var ss = 0.0
        for r in 0..<m {
            var pred = 0.0
            for c in 0..<n { pred += a[r * n + c] * x[c] }
            ss += (pred - b[r]) * (pred - b[r])
        }
        return .success(Solution(x: x, rmsResidual: (ss / Double(m)).squareRoot(), conditioning: conditioning))
    }
}
