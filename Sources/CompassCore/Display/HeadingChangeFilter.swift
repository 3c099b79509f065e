/// Delivers a heading only when it differs from the last delivered one by at least a threshold, so a
/// display or a radio link is not flooded with sub-degree jitter. Degrees.
public struct HeadingChangeFilter: Sendable, Equatable {
    /// Minimum change, degrees; 0 delivers every heading. Default 1.
    public var minimumChangeDegrees: Double
    /// The last heading delivered, if any.
    public private(set) var lastDelivered: Double?

    public init(minimumChangeDegrees: Double = 1) {
        self.minimumChangeDegrees = Swift.max(0, minimumChangeDegrees)
    }

    /// Returns the heading if it should be delivered (and remembers it), else nil. Non-finite
    /// headings are never delivered.
    public mutating func offer(_ headingDegrees: Double) -> Double? {
        guard headingDegrees.isFinite else { return nil }
        if let last = lastDelivered, abs(signedDegrees(headingDegrees - last)) < minimumChangeDegrees,
            minimumChangeDegrees > 0
        {
            return nil
        }
        lastDelivered = normalizedDegrees(headingDegrees)
        return lastDelivered
    }
}
