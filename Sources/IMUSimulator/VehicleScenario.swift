import CompassCore

extension SimulationScenario {
    /// A car on flat ground, the route drawn from the seed: about 240 s at 8-15 m/s with 90-degree
    /// turns peaking at 12-20 deg/s, two stops of 8-12 s and one at the end, a gyro bias of 0.3 deg/s
    /// and a clean magnetometer (0.3 uT noise), the IMU's x axis forward. GNSS velocity at 10 Hz
    /// (`GnssVelocityModel` defaults, with a 15 s outage from 150 s) when `gnss` is true; a motor
    /// current following the drive (`motorCurrentProfile = .drive`) when `motorPeakAmperes` > 0,
    /// adding `motorFieldMicroteslaPerAmpere`.
    public static func drivingVehicle(
        seed: UInt64, gnss: Bool = true, motorPeakAmperes: Double = 0, motorFieldMicroteslaPerAmpere: Vector3 = .zero
    ) -> SimulationScenario {
        var rng = SeededGenerator(seed: seed &* 0x9E37_79B9 &+ 17)
        func uniform(_ low: Double, _ high: Double) -> Double { low + (high - low) * rng.nextUniform() }
        var s = SimulationScenario()
        s.seed = seed
        s.startHeadingDegrees = uniform(0, 360)
        var motion: [MotionSegment] = [.rest(seconds: 10)]
        // Three legs, each: pull away, cruise, a couple of turns (speed changing through them), cruise,
        // and a stop.
        for leg in 0..<3 {
            let cruise = uniform(8, 15)
            motion.append(.drive(turnDegrees: 0, toMetresPerSecond: cruise, seconds: uniform(6, 10)))
            motion.append(.drive(turnDegrees: 0, toMetresPerSecond: cruise, seconds: uniform(8, 16)))
            for _ in 0..<2 {
                let direction: Double = rng.nextUniform() < 0.5 ? -1 : 1
                let peakRate = uniform(12, 20)
                // A 90-degree turn whose rate peaks at peakRate lasts 2 x 90 / peakRate seconds.
                motion.append(
                    .drive(turnDegrees: 90 * direction, toMetresPerSecond: uniform(8, 15), seconds: 180 / peakRate))
                motion.append(.drive(turnDegrees: 0, toMetresPerSecond: uniform(8, 15), seconds: uniform(8, 14)))
            }
            motion.append(.drive(turnDegrees: 0, toMetresPerSecond: 0, seconds: uniform(5, 8)))
            motion.append(.rest(seconds: leg < 2 ? uniform(8, 12) : 5))
        }
        s.motion = motion
        s.sensors.gyroInitialBias = Vector3(0.3, -0.2, 0.3) * radiansPerDegree
        s.sensors.magnetometerNoiseMicrotesla = 0.3
        if gnss {
            var receiver = GnssVelocityModel()
            // An underpass: 15 s without a solution while driving.
            receiver.outages = [(startSeconds: 150, seconds: 15)]
            s.gnssVelocity = receiver
        }
        if motorPeakAmperes > 0 {
            s.motorCurrentAmperes = motorPeakAmperes
            s.motorCurrentProfile = .drive
            s.sensors.motorFieldMicroteslaPerAmpere = motorFieldMicroteslaPerAmpere
        }
        return s
    }

    /// The drive with the magnetometer disturbed for `seconds` from `startSeconds` while the car moves:
    /// a steel structure's field of 25 uT in the horizontal plane (a bridge, a parking deck), which
    /// strength and dip checks see.
    public static func disturbedDrive(seed: UInt64, startSeconds: Double = 60, seconds: Double = 120, gnss: Bool = true)
        -> SimulationScenario
    {
        var s = drivingVehicle(seed: seed, gnss: gnss)
        s.disturbances = [
            ScheduledDisturbance(
                startSeconds: startSeconds, durationSeconds: seconds, fieldMicrotesla: Vector3(18, -17, 6),
                rampSeconds: 2)
        ]
        return s
    }
}
