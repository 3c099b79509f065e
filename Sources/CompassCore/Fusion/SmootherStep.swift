/// One backward step of `KalmanSmoother` (Rauch-Tung-Striebel), in 3x3 blocks: S = P⁻ₖ₊₁,
/// L = Pₖ⁺ Fᵀ, gain C = L S⁻¹.
struct SmootherStep {
    let posterior: KalmanCovariance
    /// The prediction P⁻ₖ₊₁ = F Pₖ⁺ Fᵀ + Q.
    let s11: Matrix3, s12: Matrix3, s22: Matrix3
    /// L = Pₖ⁺ Fᵀ = [[A + X Gᵀ, X], [Xᵀ + B Gᵀ, B]].
    let l11: Matrix3, l12: Matrix3, l21: Matrix3, l22: Matrix3

    init(posterior p: KalmanCovariance, propagation: KalmanPropagation) {
        posterior = p
        let g = propagation.g
        let gt = g.transposed
        let xt = p.cross.transposed
        l11 = p.attitude + p.cross * gt
        l12 = p.cross
        l21 = xt + p.bias * gt
        l22 = p.bias
        var s11 = (l11 + g * l21).addingToDiagonal(propagation.attitudeNoise)
        s11.m22 += propagation.headingWidening
        self.s11 = s11
        s12 = p.cross + g * p.bias
        s22 = p.bias.addingToDiagonal(propagation.biasNoise)
    }

    /// The gain blocks by the block inverse of S (Schur complement on the bias block); nil when S is
    /// singular.
    var gain: SmootherGain? {
        guard let d = s22.inverse else { return nil }
        let s21 = s12.transposed
        let dS21 = d * s21
        guard let m = (s11 - s12 * dS21).inverse else { return nil }
        let s12d = s12 * d
        let c11 = (l11 - l12 * dS21) * m
        let c21 = (l21 - l22 * dS21) * m
        let c12 = l12 * d - c11 * s12d
        let c22 = l22 * d - c21 * s12d
        return SmootherGain(c11: c11, c12: c12, c21: c21, c22: c22)
    }

    /// Pₖ|N = Pₖ⁺ + C (Pₖ₊₁|N − P⁻ₖ₊₁) Cᵀ.
    func smoothedCovariance(gain c: SmootherGain, later: KalmanCovariance) -> KalmanCovariance {
        let da = later.attitude - s11, dx = later.cross - s12, db = later.bias - s22
        let dxt = dx.transposed
        let t11 = c.c11 * da + c.c12 * dxt, t12 = c.c11 * dx + c.c12 * db
        let t21 = c.c21 * da + c.c22 * dxt, t22 = c.c21 * dx + c.c22 * db
        let c11t = c.c11.transposed, c12t = c.c12.transposed
        let c21t = c.c21.transposed, c22t = c.c22.transposed
        return KalmanCovariance(
            attitude: posterior.attitude + t11 * c11t + t12 * c12t,
            cross: posterior.cross + t11 * c21t + t12 * c22t,
            bias: posterior.bias + t21 * c21t + t22 * c22t)
    }
}

/// The smoother gain C in 3x3 blocks.
struct SmootherGain {
    let c11: Matrix3, c12: Matrix3, c21: Matrix3, c22: Matrix3

    func apply(_ e: (attitude: Vector3, bias: Vector3)) -> (attitude: Vector3, bias: Vector3) {
        (c11 * e.attitude + c12 * e.bias, c21 * e.attitude + c22 * e.bias)
    }
}
