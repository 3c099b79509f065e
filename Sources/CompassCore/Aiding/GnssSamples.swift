#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One GNSS velocity: what geometry_msgs/TwistWithCovarianceStamped carries on a receiver's `vel`
/// topic (nmea_navsat_driver, ublox, septentrio): the antenna's velocity over ground.
public struct GnssVelocitySample: Sendable, Equatable {
    /// Sample time, seconds (the epoch the receiver measured, as its header stamp says).
    public var timestamp: Double
    /// Velocity in ENU with y = TRUE north, m/s.
    public var velocityENU: Vector3
    /// Variance of each horizontal component, (m/s)^2 (the larger of the x and y diagonal entries).
    public var horizontalVariance: Double

    @inlinable
    public init(timestamp: Double, velocityENU: Vector3, horizontalVariance: Double) {
        self.timestamp = timestamp
        self.velocityENU = velocityENU
        self.horizontalVariance = horizontalVariance
    }

    /// Horizontal speed, m/s.
    @inlinable public var horizontalSpeed: Double {
        (velocityENU.x * velocityENU.x + velocityENU.y * velocityENU.y).squareRoot()
    }
}

/// One heading from a dual-antenna GNSS receiver: the direction of its baseline.
public struct GnssHeadingSample: Sendable, Equatable {
    /// Sample time, seconds.
    public var timestamp: Double
    /// Heading of the vehicle's x axis, degrees clockwise from TRUE north (the antenna baseline's
    /// yaw offset already removed).
    public var headingDegrees: Double
    /// Variance of that heading, degrees^2.
    public var varianceDegrees2: Double

    @inlinable
    public init(timestamp: Double, headingDegrees: Double, varianceDegrees2: Double) {
        self.timestamp = timestamp
        self.headingDegrees = headingDegrees
        self.varianceDegrees2 = varianceDegrees2
    }
}

extension Vector3 {
    /// This ENU vector (y = true north) in the frame whose y is magnetic north, `declinationDegrees`
    /// east of true north: its azimuth, clockwise from north, drops by the declination.
    @inlinable
    public func trueToMagnetic(declinationDegrees: Double) -> Vector3 {
        let d = declinationDegrees * radiansPerDegree
        let c = cos(d), s = sin(d)
        return Vector3(x * c - y * s, x * s + y * c, z)
    }

    /// The inverse of `trueToMagnetic`.
    @inlinable
    public func magneticToTrue(declinationDegrees: Double) -> Vector3 {
        trueToMagnetic(declinationDegrees: -declinationDegrees)
    }
}
