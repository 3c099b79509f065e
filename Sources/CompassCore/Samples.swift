/// One inertial sample, the form every filter and pipeline stage consumes.
public struct ImuSample: Sendable, Equatable {
    /// Sample time, seconds (any epoch; ROS header stamps in the pipeline).
    public var timestamp: Double
    /// Angular velocity in the sensor frame, rad/s.
    public var angularVelocity: Vector3
    /// Specific force in the sensor frame, m/s^2 (points up at rest, like ROS's linear_acceleration).
    public var specificForce: Vector3

    @inlinable
    public init(timestamp: Double, angularVelocity: Vector3, specificForce: Vector3) {
        self.timestamp = timestamp
        self.angularVelocity = angularVelocity
        self.specificForce = specificForce
    }
}

/// One magnetometer sample.
public struct MagnetometerSample: Sendable, Equatable {
    /// Sample time, seconds.
    public var timestamp: Double
    /// Magnetic field in the sensor frame, microtesla (ROS carries tesla: multiply by 1e6).
    public var fieldMicrotesla: Vector3

    @inlinable
    public init(timestamp: Double, fieldMicrotesla: Vector3) {
        self.timestamp = timestamp
        self.fieldMicrotesla = fieldMicrotesla
    }
}
