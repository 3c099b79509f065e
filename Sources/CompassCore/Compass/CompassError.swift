/// Why a compass computation was refused. Every case names the offending input.
public enum CompassError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A component of the named input is NaN or infinite.
    case nonFinite(input: String)
    /// The named input has (near) zero length.
    case zeroVector(input: String)
    /// The magnetic field is (nearly) parallel to gravity, so it has no horizontal component.
    case fieldParallelToGravity(angleDegrees: Double)

    public var description: String {
        switch self {
        case .nonFinite(let input): return "\(input) has a NaN or infinite component"
        case .zeroVector(let input): return "\(input) is a zero vector"
        case .fieldParallelToGravity(let a):
            return "magnetic field is within \(a) degrees of the vertical: heading undefined"
        }
    }
}
