/// Compass-rose names for headings.
public enum CardinalDirection {
    /// Resolution of the compass rose.
    public enum Points: Int, Sendable { case four = 4, eight = 8, sixteen = 16 }

    static let sixteenNames = [
        "N", "NNE", "NE", "ENE", "E", "ESE", "SE", "SSE",
        "S", "SSW", "SW", "WSW", "W", "WNW", "NW", "NNW",
    ]

    /// The name of the sector containing `headingDegrees` (sectors are centred on their direction:
    /// with 8 points, N covers [337.5, 22.5)). nil for a non-finite heading.
    public static func name(forHeadingDegrees headingDegrees: Double, points: Points = .sixteen) -> String? {
        guard headingDegrees.isFinite else { return nil }
        let n = points.rawValue
        let sector = Int((normalizedDegrees(headingDegrees) / (360.0 / Double(n)) + 0.5).rounded(.down)) % n
        return sixteenNames[sector * (16 / n)]
    }
}
