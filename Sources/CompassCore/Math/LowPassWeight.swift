/// The weight dt / (tau + dt) of a first-order low-pass, cached for the last (dt, tau): samples
/// usually arrive at a fixed rate, and a division per filter per sample is measurable. Keyed on both
/// so a changed time constant takes effect at once.
public struct LowPassWeight: Sendable, Equatable {
    @usableFromInline var lastDt = -1.0
    @usableFromInline var lastTau = -1.0
    @usableFromInline var lastWeight = 0.0

    public init() {}

    @inlinable @inline(__always)
    public mutating func callAsFunction(_ dt: Double, tau: Double) -> Double {
        if dt != lastDt || tau != lastTau {
            lastDt = dt
            lastTau = tau
            lastWeight = dt / (tau + dt)
        }
        return lastWeight
    }
}
