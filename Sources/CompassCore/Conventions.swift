// GyroCompass conventions, stated once for the whole package.
//
// Units: SI at the boundary. Angular velocity in rad/s, specific force (accelerometer) in m/s^2,
// magnetic field in microtesla inside this module (every API says "Microtesla" in its name or doc);
// ROS messages carry tesla and are converted at the wire boundary. Time in seconds.
//
// Frames: the earth frame is ENU (ROS REP-103): x east, y north, z up. Unless a function says "true
// north", y is MAGNETIC north. The sensor (body) frame is the IMU's own frame; for heading we use
// REP-103's body convention, x forward, y left, z up (FLU).
//
// Orientation: a unit quaternion q (Hamilton, scalar first) of the sensor frame relative to ENU:
// v_enu = q * v_sensor * conj(q). This is sensor_msgs/Imu's orientation with an ENU world.
//
// Attitude angles: ROS RPY, R = Rz(yaw) * Ry(pitch) * Rx(roll) about fixed axes. Because y points left,
// positive pitch lowers the nose. Compass heading is the direction of the sensor x axis projected on
// the horizontal plane, in degrees clockwise from north, in [0, 360): heading = 90 - yaw.
//
// Accelerometer: reads specific force, so at rest it points UP (+9.81 m/s^2 on the upward axis).
// "down" below is therefore -accelerometer.
//
// Invalid values (NaN, infinities, negative accuracies) become nil or a thrown error at the
// boundary; no function returns a NaN heading or uses a sentinel.

/// Standard gravity, m/s^2 (CGPM 1901).
public let standardGravity = 9.80665

/// The earth's field where nothing better is known yet (no site, no reference learned): mid-latitude
/// values, where most users are, used only to size allowances and first guesses until the site's own
/// field is known. The field is 25-65 uT and its dip 0-90 degrees over the globe.
public enum TypicalEarthField {
    /// Strength, microtesla (Europe and North America: 45-55).
    public static let strengthMicrotesla = 50.0
    /// Dip below the horizon, degrees (the same latitudes: 60-70).
    public static let dipDegrees = 60.0
    /// Strengths the earth's field takes anywhere on the surface (22-67 uT), with a margin, microtesla.
    public static let plausibleStrengthMicrotesla: ClosedRange<Double> = 20...70
}
