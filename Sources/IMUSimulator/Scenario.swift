import CompassCore

/// One piece of a simulated motion. Every segment starts from the attitude the previous one ended
/// in; segments that end where they began (figure-eight, walking, impacts) say so.
public enum MotionSegment: Sendable, Equatable {
    /// Hold still.
    case rest(seconds: Double)
    /// Turn about the vertical; positive rates increase the compass heading (clockwise from above).
    case turn(degreesPerSecond: Double, seconds: Double)
    /// Rotate about an axis fixed in the sensor frame at a constant rate.
    case rotate(sensorAxis: Vector3, degreesPerSecond: Double, seconds: Double)
    /// Move smoothly (cosine profile) to an attitude: compass heading, ROS pitch and roll, degrees.
    case moveTo(headingDegrees: Double, pitchDegrees: Double, rollDegrees: Double, seconds: Double)
    /// The calibration motion: one full turn while pitching +-80 and rolling +-120 degrees (the device
    /// turns over, as in a hand-made figure-eight), so the field is seen from nearly every direction.
    /// Ends at the starting attitude.
    case figureEight(seconds: Double)
    /// Hand-held walking: 2-3 degree sway and about 2 m/s^2 of linear acceleration at the step rate.
    case walking(seconds: Double, stepsPerSecond: Double)
    /// Held still but struck: shocks of `peakG` (in units of g; a push and a stop, 30 ms each) every
    /// `intervalSeconds`, in changing directions.
    case impacts(seconds: Double, peakG: Double, intervalSeconds: Double)
    /// A ground vehicle driving along its x axis on flat ground: the speed moves smoothly (cosine
    /// profile) from the previous segment's to `toMetresPerSecond` while the heading turns by
    /// `turnDegrees` (positive clockwise), the turn rate rising from zero and falling back to it
    /// (peak 2 x turnDegrees / seconds), as a driver steers. The sensor feels the speed change along
    /// x and the centripetal acceleration, speed x turn rate, across it. Any other segment stops the
    /// vehicle: its speed is zero there.
    case drive(turnDegrees: Double, toMetresPerSecond: Double, seconds: Double)

    public var seconds: Double {
        switch self {
        case .rest(let s), .turn(_, let s), .rotate(_, _, let s), .moveTo(_, _, _, let s), .figureEight(let s),
            .walking(let s, _), .impacts(let s, _, _), .drive(_, _, let s):
            return s
        }
    }
}

/// A magnetic disturbance switched on for a while, e.g. a magnet brought near the sensor.
public struct ScheduledDisturbance: Sendable, Equatable {
    public enum Frame: String, Sendable { case world, sensor }
    /// Start time, seconds from the start of the scenario.
    public var startSeconds: Double
    /// How long it is fully present, seconds (ramps come on top).
    public var durationSeconds: Double
    /// The added field, microtesla, in `frame` (world = ENU with y magnetic north: a magnet lying
    /// nearby; sensor = moves with the sensor: a magnet attached to it).
    public var fieldMicrotesla: Vector3
    public var frame: Frame
    /// Seconds to fade in and out (a magnet approaches over time); 0 switches abruptly.
    public var rampSeconds: Double

    public init(
        startSeconds: Double, durationSeconds: Double, fieldMicrotesla: Vector3, frame: Frame = .world,
        rampSeconds: Double = 0.5
    ) {
        self.startSeconds = startSeconds
        self.durationSeconds = durationSeconds
        self.fieldMicrotesla = fieldMicrotesla
        self.frame = frame
        self.rampSeconds = max(0, rampSeconds)
    }

    /// 0...1: how much of the disturbance is present at time t (seconds).
    func weight(at t: Double) -> Double {
        let end = startSeconds + durationSeconds
        if rampSeconds == 0 { return t >= startSeconds && t < end ? 1 : 0 }
        if t <= startSeconds - rampSeconds || t >= end + rampSeconds { return 0 }
        if t < startSeconds { return smoothstep((t - (startSeconds - rampSeconds)) / rampSeconds) }
        if t > end { return smoothstep((end + rampSeconds - t) / rampSeconds) }
        return 1
    }
}

/// A GNSS receiver's velocity output (geometry_msgs/TwistWithCovarianceStamped on `vel`).
public struct GnssVelocityModel: Sendable, Equatable {
    /// Velocity solutions per second, Hz (receivers give 1-20; 0 = no receiver). Default 10.
    public var rateHz = 10.0
    /// White noise of each horizontal velocity component, m/s, 1 sigma (Doppler velocity of a
    /// consumer receiver in open sky: 0.05-0.1); the vertical has twice this. Default 0.08.
    public var noiseMetresPerSecond = 0.08
    /// Stretches without a solution (tunnels, underpasses): start and length, seconds from the start.
    public var outages: [(startSeconds: Double, seconds: Double)] = []
    /// True north's angle from magnetic north, degrees east: the receiver reports true-north ENU.
    /// Default 0.
    public var declinationDegrees = 0.0

    public init() {}

    public static func == (a: GnssVelocityModel, b: GnssVelocityModel) -> Bool {
        a.rateHz == b.rateHz && a.noiseMetresPerSecond == b.noiseMetresPerSecond
            && a.declinationDegrees == b.declinationDegrees && a.outages.count == b.outages.count
            && zip(a.outages, b.outages).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    /// True when `runTime` (seconds from the start) falls in an outage.
    func isOut(at runTime: Double) -> Bool {
        outages.contains { runTime >= $0.startSeconds && runTime < $0.startSeconds + $0.seconds }
    }
}

/// How the simulated motors' current behaves.
public enum MotorCurrentProfile: Sendable, Equatable {
    /// Wanders between 10 % and the peak like a throttle (two slow sines, phases from the seed).
    case throttle
    /// Follows the vehicle: 10 % of the peak standing, plus a share for the speed (rolling and air
    /// drag) and one for forward acceleration, capped at the peak.
    case drive
}

/// The sensor error models. Defaults resemble a consumer MEMS IMU with a calibrated magnetometer.
public struct SensorErrorModel: Sendable, Equatable {
    /// Gyro white noise, rad/s standard deviation per sample. Default 0.002 (0.11 deg/s).
    public var gyroNoiseRadiansPerSecond = 0.002
    /// Gyro bias at start, rad/s, sensor frame. Default zero.
    public var gyroInitialBias = Vector3.zero
    /// Gyro bias random walk, rad/s per sqrt(second). Default 1e-4.
    public var gyroBiasRandomWalk = 1e-4
    /// Accelerometer white noise, m/s^2 standard deviation per sample. Default 0.02.
    public var accelerometerNoise = 0.02
    /// Magnetometer white noise, microtesla standard deviation per sample and axis. Default 0.5.
    public var magnetometerNoiseMicrotesla = 0.5
    /// Hard-iron offset added to every reading, microtesla. Default zero.
    public var hardIronMicrotesla = Vector3.zero
    /// Soft-iron matrix applied to the field before the offset. Default identity.
    public var softIron = Matrix3.identity
    /// The field the motors add per ampere drawn, microtesla per ampere, sensor frame (added like a
    /// hard iron that follows the current). Default zero.
    public var motorFieldMicroteslaPerAmpere = Vector3.zero

    public init() {}

    /// A noiseless, bias-free, undistorted sensor (for exact geometry tests).
    public static var ideal: SensorErrorModel {
        var m = SensorErrorModel()
        m.gyroNoiseRadiansPerSecond = 0
        m.gyroBiasRandomWalk = 0
        m.accelerometerNoise = 0
        m.magnetometerNoiseMicrotesla = 0
        return m
    }
}

/// Everything that defines a simulation run. Same scenario, same samples, on every machine.
public struct SimulationScenario: Sendable, Equatable {
    public var seed: UInt64 = 1
    /// Samples per second. Default 100.
    public var sampleRateHz = 100.0
    /// Earth field strength, microtesla. Default 48.
    public var earthFieldMicrotesla = 48.0
    /// Earth field dip, degrees below the horizon. Default 66.
    public var earthFieldDipDegrees = 66.0
    /// Attitude at t = 0: compass heading, ROS pitch, roll, degrees.
    public var startHeadingDegrees = 0.0
    public var startPitchDegrees = 0.0
    public var startRollDegrees = 0.0
    /// Time of the first sample, seconds.
    public var startTime = 0.0
    public var motion: [MotionSegment] = [.rest(seconds: 10)]
    public var disturbances: [ScheduledDisturbance] = []
    /// Fields fixed in the world that the device is carried through (they change with its position,
    /// not with its orientation).
    public var worldFieldSources: [WorldFieldSource] = []
    public var sensors = SensorErrorModel()
    /// Where the accelerometer sits relative to the point the motion turns about, sensor frame, metres:
    /// the sensor then feels the rotation's tangential and centripetal acceleration, w' x r + w x (w x r),
    /// as a handheld turned at the wrist or an IMU mounted off a vehicle's centre does. Default zero
    /// (turning about the sensor itself).
    public var leverArmMeters = Vector3.zero
    /// Peak current the motors draw, amperes (0 = no motors). The current wanders between 10 % and
    /// the peak like a throttle (two slow sines, phases from the seed).
    public var motorCurrentAmperes = 0.0
    /// How the motor current follows the motion. Default throttle.
    public var motorCurrentProfile = MotorCurrentProfile.throttle
    /// A GNSS receiver's velocity output; nil = none.
    public var gnssVelocity: GnssVelocityModel? = nil
    /// Repeat the motion forever (disturbance times then refer to the whole run).
    public var loops = false

    public init() {}

    /// Seconds of motion in one pass.
    public var duration: Double { motion.reduce(0) { $0 + $1.seconds } }

    /// The undisturbed earth field in ENU (y = magnetic north), microtesla.
    public var earthFieldENU: Vector3 {
        let dip = earthFieldDipDegrees * radiansPerDegree
        return Vector3(0, earthFieldMicrotesla * _cos(dip), -earthFieldMicrotesla * _sin(dip))
    }
}

/// A field fixed in the world, felt along a straight walk at constant speed (the device's position is
/// implied by the time: it need not move in the motion segments).
public enum WorldFieldSource: Sendable, Equatable {
    /// A magnet lying still (a point dipole, moment in A m^2, ENU) passed at `distanceMeters` at
    /// `closestSeconds`, walking east at `speedMetersPerSecond`; the magnet lies north of the path.
    /// A small neodymium magnet of 1 cm^3 has a moment of about 1 A m^2: 190 uT at 10 cm, 7 uT at 30 cm.
    case magnetPass(closestSeconds: Double, distanceMeters: Double, speedMetersPerSecond: Double, momentAm2: Vector3)
    /// Walking beside a steel structure from `startSeconds` for `durationSeconds`: columns every
    /// `spacingMeters` bend the earth's field by up to `amplitudeMicrotesla` (ENU direction
    /// `direction`, unit), alternating with the position along the walk.
    case steelStructure(
        startSeconds: Double, durationSeconds: Double, spacingMeters: Double, speedMetersPerSecond: Double,
        amplitudeMicrotesla: Double, direction: Vector3)

    /// The field it adds at time `t` (seconds from the scenario's start), ENU, microtesla.
    public func fieldMicrotesla(at t: Double) -> Vector3 {
        switch self {
        case .magnetPass(let closest, let distance, let speed, let moment):
            // Device at (x, 0, 0), magnet at (0, d, 0): r points from the magnet to the device, metres.
            let r = Vector3(speed * (t - closest), -distance, 0)
            let n = r.norm
            guard n > 1e-3 else { return .zero }
            let u = r / n
            // mu0 / 4 pi = 1e-7 T m / A = 0.1 uT m / A.
            return (u * (3 * moment.dot(u)) - moment) * (0.1 / (n * n * n))
        case .steelStructure(let start, let duration, let spacing, let speed, let amplitude, let direction):
            guard t >= start, t <= start + duration, spacing > 0 else { return .zero }
            let x = speed * (t - start)
            // Fades in over the first and out over the last column.
            let edge = min(1, min(x, speed * (start + duration - t)) / spacing)
            return direction * (amplitude * edge * _sin(2 * Double.pi * x / spacing))
        }
    }
}

@inlinable func smoothstep(_ x: Double) -> Double {
    let c = min(1, max(0, x))
    return c * c * (3 - 2 * c)
}
