/// A value that is only meaningful when finite and non-negative (accuracies, speeds). Sources such as
/// Android and CoreLocation report -1 or NaN for "unknown"; this turns those into nil at the boundary.
@inlinable
public func validNonNegative(_ value: Double) -> Double? {
    value.isFinite && value >= 0 ? value : nil
}

/// What a GPS receiver says about the direction of travel.
public struct CourseOverGround: Sendable, Equatable {
    /// Course in degrees clockwise from true north.
    public var courseDegrees: Double?
    /// Speed over ground, m/s.
    public var speedMetresPerSecond: Double?
    /// Course accuracy (1 sigma or as the receiver reports), degrees.
    public var courseAccuracyDegrees: Double?

    /// Raw receiver values; negative or NaN mean unknown and become nil.
    public init(courseDegrees: Double, speedMetresPerSecond: Double, courseAccuracyDegrees: Double) {
        self.courseDegrees = courseDegrees.isFinite ? normalizedDegrees(courseDegrees) : nil
        self.speedMetresPerSecond = validNonNegative(speedMetresPerSecond)
        self.courseAccuracyDegrees = validNonNegative(courseAccuracyDegrees)
    }
}

/// The best available direction.
public enum DirectionChoice: Sendable, Equatable {
    /// GPS course over ground, degrees clockwise from true north.
    case gpsCourse(degrees: Double, accuracyDegrees: Double)
    /// Compass heading, degrees clockwise from (true or magnetic, as given) north.
    case compass(degrees: Double, accuracyDegrees: Double)
    /// Neither source is good enough.
    case unknown

    public var degrees: Double? {
        switch self {
        case .gpsCourse(let d, _), .compass(let d, _): return d
        case .unknown: return nil
        }
    }
}

/// Picks the direction source: GPS course when moving fast with a good course accuracy, otherwise the
/// compass when its accuracy is good, otherwise unknown.
public struct DirectionSourceSelector: Sendable, Equatable {
    /// Minimum speed for the GPS course, m/s. Default 2.
    public var minimumSpeedMetresPerSecond: Double = 2
    /// Worst acceptable GPS course accuracy, degrees. Default 15.
    public var maximumCourseAccuracyDegrees: Double = 15
    /// Worst acceptable compass heading accuracy, degrees. Default 30.
    public var maximumCompassAccuracyDegrees: Double = 30

    public init(
        minimumSpeedMetresPerSecond: Double = 2, maximumCourseAccuracyDegrees: Double = 15,
        maximumCompassAccuracyDegrees: Double = 30
    ) {
        self.minimumSpeedMetresPerSecond = minimumSpeedMetresPerSecond
        self.maximumCourseAccuracyDegrees = maximumCourseAccuracyDegrees
        self.maximumCompassAccuracyDegrees = maximumCompassAccuracyDegrees
    }

    /// - Parameters:
    ///   - gps: the latest course over ground, if any.
    ///   - compassHeadingDegrees: compass heading (NaN = unknown).
    ///   - compassAccuracyDegrees: its accuracy (negative or NaN = unknown).
    public func choose(
        gps: CourseOverGround?, compassHeadingDegrees: Double,
        compassAccuracyDegrees: Double
    ) -> DirectionChoice {
        if let gps, let course = gps.courseDegrees, let speed = gps.speedMetresPerSecond,
            let accuracy = gps.courseAccuracyDegrees,
            speed >= minimumSpeedMetresPerSecond, accuracy <= maximumCourseAccuracyDegrees
        {
            return .gpsCourse(degrees: course, accuracyDegrees: accuracy)
        }
        if compassHeadingDegrees.isFinite, let accuracy = validNonNegative(compassAccuracyDegrees),
            accuracy <= maximumCompassAccuracyDegrees
        {
            return .compass(degrees: normalizedDegrees(compassHeadingDegrees), accuracyDegrees: accuracy)
        }
        return .unknown
    }
}
