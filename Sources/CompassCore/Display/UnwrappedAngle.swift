/// A continuous angle for displays and plots: each new heading is applied as the shortest signed turn
/// from the previous value, so 359 -> 1 reads as 361, not a jump back to 1. Degrees.
public struct UnwrappedAngle: Sendable, Equatable {
    /// The current unwrapped value, degrees (any real number).
    public private(set) var degrees: Double

    public init(startingAt degrees: Double) { self.degrees = degrees }

    /// Applies a new wrapped heading and returns the unwrapped value. Non-finite input is ignored
    /// (the value stays put).
    @discardableResult
    public mutating func update(_ wrappedDegrees: Double) -> Double {
        guard wrappedDegrees.isFinite else { return degrees }
        degrees += signedDegrees(wrappedDegrees - degrees)
        return degrees
    }
}
