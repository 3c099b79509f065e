#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import CompassCore

/// A simulated sample with the truth that produced it.
public struct SimulatedSample: Sendable, Equatable {
    public var imu: ImuSample
    public var magnetometer: MagnetometerSample
    /// True orientation of the sensor relative to ENU (y = magnetic north).
    public var trueOrientation: Quaternion
    /// True gyro bias at this sample, rad/s.
    public var trueGyroBias: Vector3
    /// The undisturbed earth field in the sensor frame, microtesla (what a perfect compass sees).
    public var trueEarthFieldMicrotesla: Vector3
    /// True linear (non-gravity) acceleration in ENU, m/s^2.
    public var trueLinearAcceleration: Vector3
    /// True when a scheduled disturbance is (partly) present.
    public var isDisturbed: Bool
    /// Current the motors draw, amperes (0 without motors).
    public var motorCurrentAmperes = 0.0
    /// True velocity in ENU (y = magnetic north), m/s: zero but while driving.
    public var trueVelocity = Vector3.zero
    /// The GNSS receiver's velocity solution made at this sample, if one was due (true-north ENU).
    public var gnssVelocity: GnssVelocitySample?
    /// The field any magnetometer on the body sees before its own iron, noise and sensor-fixed
    /// disturbances, body axes, microtesla: the earth's plus the world-fixed disturbances.
    public var bodyFieldMicrotesla = Vector3.zero

    /// True compass heading of the sensor x axis, degrees clockwise from magnetic north.
    public var trueHeadingDegrees: Double? { trueOrientation.headingDegrees }
}

/// The seeded IMU + magnetometer simulator. Iterate it for an endless (looping) stream, or call
/// `samples()` for one pass.
///
/// The gyro reading at sample k is the constant rate that carries the true orientation from sample
/// k-1 to sample k, so a noiseless integrator q_k = q_(k-1) * exp(omega_k dt) reproduces the truth.
public struct IMUSimulator: Sequence, IteratorProtocol, Sendable {
    public let scenario: SimulationScenario
    private var rng: SeededGenerator
    private var index = 0
    private var bias: Vector3
    private var previousOrientation: Quaternion
    private var previousTrueRate = Vector3.zero
    private var segmentIndex = 0
    private var segmentStartTime = 0.0
    private var segmentStartOrientation: Quaternion
    private var segmentStartSpeed = 0.0
    private let earth: Vector3
    /// The receiver's noise has its own generator: adding a receiver leaves the other streams as
    /// they were.
    private var gnssRng: SeededGenerator
    private var nextGnssEpoch = 0

    public init(scenario: SimulationScenario) {
        self.scenario = scenario
        rng = SeededGenerator(seed: scenario.seed)
        bias = scenario.sensors.gyroInitialBias
        let q0 = Quaternion(
            headingDegrees: scenario.startHeadingDegrees, pitchDegrees: scenario.startPitchDegrees,
            rollDegrees: scenario.startRollDegrees)
        previousOrientation = q0
        segmentStartOrientation = q0
        earth = scenario.earthFieldENU
        gnssRng = SeededGenerator(seed: scenario.seed ^ 0x6E55_5F76_656C)
    }

    /// Number of samples in one pass of the motion.
    public var sampleCountPerPass: Int { Int((scenario.duration * scenario.sampleRateHz).rounded(.down)) }

    /// One pass of the motion as an array.
    public static func samples(_ scenario: SimulationScenario) -> [SimulatedSample] {
        var sim = IMUSimulator(scenario: scenario)
        var out = [SimulatedSample]()
        out.reserveCapacity(sim.sampleCountPerPass)
        for _ in 0..<sim.sampleCountPerPass { if let s = sim.next() { out.append(s) } }
        return out
    }

    public mutating func next() -> SimulatedSample? {
        let motion = scenario.motion
        guard !motion.isEmpty, scenario.sampleRateHz > 0, scenario.duration > 0 else { return nil }
        let dt = 1 / scenario.sampleRateHz
        let runTime = Double(index) * dt  // seconds since the start of the run
        if !scenario.loops && index >= sampleCountPerPass { return nil }
        // Advance to the segment containing runTime (segment times accumulate over loops).
        while runTime >= segmentStartTime + motion[segmentIndex].seconds {
            let seg = motion[segmentIndex]
            let end = Self.pose(
                seg, tau: seg.seconds, start: segmentStartOrientation, startSpeed: segmentStartSpeed,
                seed: scenario.seed)
            segmentStartOrientation = end.orientation
            segmentStartSpeed = end.speed
            segmentStartTime += seg.seconds
            segmentIndex = (segmentIndex + 1) % motion.count
        }
        let pose = Self.pose(
            motion[segmentIndex], tau: runTime - segmentStartTime, start: segmentStartOrientation,
            startSpeed: segmentStartSpeed, seed: scenario.seed)
        let q = pose.orientation
        let sensors = scenario.sensors

        // Gyro: the rate from the previous orientation to this one, plus bias and noise.
        let delta = (previousOrientation.conjugate * q).rotationVector
        let trueRate = index == 0 ? Vector3.zero : delta / dt
        previousOrientation = q
        bias +=
            Vector3(rng.nextNormal(), rng.nextNormal(), rng.nextNormal())
            * (sensors.gyroBiasRandomWalk * dt.squareRoot())
        let gyro = trueRate + bias + noise(sensors.gyroNoiseRadiansPerSecond)

        // Accelerometer: specific force = linear acceleration minus gravity (gravity points down).
        let specificWorld = pose.linearAcceleration + Vector3(0, 0, standardGravity)
        let r = scenario.leverArmMeters
        let rateChange = index == 0 ? Vector3.zero : (trueRate - previousTrueRate) / dt
        previousTrueRate = trueRate
        let rotational = rateChange.cross(r) + trueRate.cross(trueRate.cross(r))
        let accel = q.inverseRotate(specificWorld) + rotational + noise(sensors.accelerometerNoise)

        // Magnetometer: earth + world disturbances rotated into the sensor, sensor disturbances,
        // then soft iron, hard iron and noise.
        var worldField = earth
        var sensorDisturbance = Vector3.zero
        var disturbed = false
        for d in scenario.disturbances {
            let w = d.weight(at: runTime)
            guard w > 0 else { continue }
            disturbed = true
            switch d.frame {
            case .world: worldField += d.fieldMicrotesla * w
            case .sensor: sensorDisturbance += d.fieldMicrotesla * w
            }
        }
        for source in scenario.worldFieldSources {
            let f = source.fieldMicrotesla(at: runTime)
            worldField += f
            if f.norm > 1 { disturbed = true }
        }
        let sensed = q.inverseRotate(worldField) + sensorDisturbance
        let current = motorCurrent(at: runTime, pose: pose)
        let velocity = Self.horizontalForward(q) * pose.speed
        let mag =
            sensors.softIron * sensed + sensors.hardIronMicrotesla + sensors.motorFieldMicroteslaPerAmpere * current
            + noise(sensors.magnetometerNoiseMicrotesla)

        let t = scenario.startTime + runTime
        index += 1
        return SimulatedSample(
            imu: ImuSample(timestamp: t, angularVelocity: gyro, specificForce: accel),
            magnetometer: MagnetometerSample(timestamp: t, fieldMicrotesla: mag),
            trueOrientation: q, trueGyroBias: bias, trueEarthFieldMicrotesla: q.inverseRotate(earth),
            trueLinearAcceleration: pose.linearAcceleration, isDisturbed: disturbed, motorCurrentAmperes: current,
            trueVelocity: velocity, gnssVelocity: gnssSolution(at: runTime, timestamp: t, velocity: velocity),
            bodyFieldMicrotesla: q.inverseRotate(worldField))
    }

    /// The receiver's solution when one is due at `runTime` (epochs at multiples of its period) and
    /// it is not in an outage: the true velocity turned to true north, plus white noise.
    mutating func gnssSolution(at runTime: Double, timestamp: Double, velocity: Vector3) -> GnssVelocitySample? {
        guard let gnss = scenario.gnssVelocity, gnss.rateHz > 0,
            runTime + 1e-9 >= Double(nextGnssEpoch) / gnss.rateHz
        else { return nil }
        nextGnssEpoch = Int((runTime * gnss.rateHz + 1e-9).rounded(.down)) + 1
        // Drawn even in an outage, so an outage changes no other solution.
        let sigma = gnss.noiseMetresPerSecond
        let noise = Vector3(
            gnssRng.nextNormal() * sigma, gnssRng.nextNormal() * sigma, gnssRng.nextNormal() * 2 * sigma)
        guard !gnss.isOut(at: runTime) else { return nil }
        return GnssVelocitySample(
            timestamp: timestamp,
            velocityENU: velocity.magneticToTrue(declinationDegrees: gnss.declinationDegrees) + noise,
            horizontalVariance: sigma * sigma)
    }

    /// The horizontal direction of the sensor's x axis (a vehicle's forward), unit ENU.
    static func horizontalForward(_ q: Quaternion) -> Vector3 {
        let forward = q.rotate(.unitX)
        return Vector3(forward.x, forward.y, 0).normalized ?? .unitY
    }

    /// The motors' current at `runTime` seconds: between 10 % and 100 % of the peak, slow like a
    /// throttle; deterministic (it draws nothing from the noise generator, so other streams stay as
    /// they were).
    func motorCurrent(at runTime: Double, pose: Pose) -> Double {
        let peak = scenario.motorCurrentAmperes
        guard peak > 0 else { return 0 }
        if scenario.motorCurrentProfile == .drive {
            // 3 % of the peak per m/s (drag) and 15 % per m/s^2 of forward acceleration.
            let level = 0.1 + 0.03 * pose.speed + 0.15 * Swift.max(0, pose.forwardAcceleration)
            return peak * Swift.min(1, level)
        }
        let phase1 = Double(scenario.seed % 97) * 0.37, phase2 = Double(scenario.seed % 89) * 0.61
        let level =
            0.55 + 0.3 * sin(2 * Double.pi * runTime / 5.3 + phase1) + 0.15
            * sin(2 * Double.pi * runTime / 1.7 + phase2)
        return peak * Swift.min(1, Swift.max(0.1, level))
    }

    private mutating func noise(_ sigma: Double) -> Vector3 {
        guard sigma > 0 else { return .zero }
        return Vector3(rng.nextNormal(), rng.nextNormal(), rng.nextNormal()) * sigma
    }

    /// Where a segment has taken the sensor: orientation, ENU linear acceleration (m/s^2), and for a
    /// vehicle its speed along x (m/s) and the rate of change of that speed (m/s^2).
    struct Pose {
        var orientation: Quaternion
        var linearAcceleration: Vector3
        var speed = 0.0
        var forwardAcceleration = 0.0
    }

    /// The pose `tau` seconds into a segment that began at `start`, moving at `startSpeed`.
    static func pose(_ segment: MotionSegment, tau: Double, start: Quaternion, startSpeed: Double, seed: UInt64)
        -> Pose
    {
        if case .drive(let turnDegrees, let targetSpeed, let seconds) = segment {
            return drivePose(
                turnRadians: turnDegrees * radiansPerDegree, from: startSpeed, to: targetSpeed, seconds: seconds,
                tau: tau, start: start)
        }
        let p = attitudePose(segment, tau: tau, start: start, seed: seed)
        return Pose(orientation: p.orientation, linearAcceleration: p.linearAcceleration)
    }

    static func drivePose(
        turnRadians: Double, from v0: Double, to v1: Double, seconds: Double, tau: Double, start: Quaternion
    ) -> Pose {
        guard seconds > 0 else { return Pose(orientation: start, linearAcceleration: .zero, speed: v1) }
        let x = Swift.min(1, Swift.max(0, tau / seconds))
        let speed = v0 + (v1 - v0) * 0.5 * (1 - cos(Double.pi * x))
        let speedRate = (v1 - v0) * Double.pi / (2 * seconds) * sin(Double.pi * x)
        let turned = turnRadians * (x - sin(2 * Double.pi * x) / (2 * Double.pi))
        let turnRate = turnRadians / seconds * (1 - cos(2 * Double.pi * x))
        let q = (Quaternion(axis: .unitZ, angleRadians: -turned) * start).normalized
        let forward = horizontalForward(q)
        let right = Vector3(forward.y, -forward.x, 0)
        return Pose(
            orientation: q, linearAcceleration: forward * speedRate + right * (speed * turnRate), speed: speed,
            forwardAcceleration: speedRate)
    }

    /// Orientation and ENU linear acceleration of the segments that do not drive.
    static func attitudePose(_ segment: MotionSegment, tau: Double, start: Quaternion, seed: UInt64)
        -> (orientation: Quaternion, linearAcceleration: Vector3)
    {
        switch segment {
        case .drive:
            return (start, .zero)
        case .rest:
            return (start, .zero)
        case .turn(let rate, _):
            let yaw = Quaternion(axis: .unitZ, angleRadians: -rate * radiansPerDegree * tau)
            return ((yaw * start).normalized, .zero)
        case .rotate(let axis, let rate, _):
            let r = Quaternion(axis: axis, angleRadians: rate * radiansPerDegree * tau)
            return ((start * r).normalized, .zero)
        case .moveTo(let h, let p, let r, let seconds):
            let target = Quaternion(headingDegrees: h, pitchDegrees: p, rollDegrees: r)
            let s = seconds > 0 ? 0.5 * (1 - cos(Double.pi * Swift.min(1, tau / seconds))) : 1
            return (start.slerp(to: target, fraction: s), .zero)
        case .figureEight(let seconds):
            let phase = 2 * Double.pi * tau / seconds
            let relative = Quaternion(
                rollRadians: 120 * radiansPerDegree * sin(3 * phase),
                pitchRadians: 80 * radiansPerDegree * sin(2 * phase),
                yawRadians: phase)
            return ((start * relative).normalized, .zero)
        case .walking(_, let stepRate):
            let phase = 2 * Double.pi * stepRate * tau
            let sway = Quaternion(
                rollRadians: 3 * radiansPerDegree * sin(0.5 * phase),
                pitchRadians: 2 * radiansPerDegree * sin(phase), yawRadians: 0)
            let forward = start.rotate(.unitX)
            let horizontal = Vector3(forward.x, forward.y, 0).normalized ?? .unitY
            let accel = Vector3(0, 0, 2.0 * sin(phase)) + horizontal * (0.8 * cos(phase))
            return ((start * sway).normalized, accel)
        case .impacts(_, let peakG, let interval):
            guard interval > 0 else { return (start, .zero) }
            let k = (tau / interval).rounded(.down)
            let local = tau - k * interval - 0.5 * interval
            let pulse = 0.03
            guard local >= 0, local < 2 * pulse else { return (start, .zero) }
            // A fresh direction per impact: golden-angle azimuth, a little upward, varied by seed. The
            // blow is one full sine period: the held sensor is pushed and stopped again, so its velocity
            // change is zero and its displacement a few millimetres.
            let azimuth = (k * 137.508 + Double(seed % 360)) * radiansPerDegree
            let dir = Vector3(cos(azimuth), sin(azimuth), 0.3).normalized!
            return (start, dir * (peakG * standardGravity * sin(Double.pi * local / pulse)))
        }
    }
}
