import Testing
import CompassCore
import IMUSimulator

func scenario(_ motion: [MotionSegment], seed: UInt64 = 1, sensors: SensorErrorModel = SensorErrorModel())
    -> SimulationScenario
{
    var s = SimulationScenario()
    s.seed = seed
    s.motion = motion
    s.sensors = sensors
    return s
}

@Suite("Seeded IMU simulator")
struct IMUSimulatorTests {
    let mixed: [MotionSegment] = [
        .rest(seconds: 1), .turn(degreesPerSecond: 90, seconds: 2), .figureEight(seconds: 4),
        .walking(seconds: 3, stepsPerSecond: 1.8), .impacts(seconds: 2, peakG: 5, intervalSeconds: 0.5),
        .rotate(sensorAxis: Vector3(1, 1, 0), degreesPerSecond: 30, seconds: 1),
        .moveTo(headingDegrees: 200, pitchDegrees: 30, rollDegrees: -20, seconds: 2),
    ]

    @Test("same seed, same samples; another seed, other noise")
    func determinism() {
        let a = IMUSimulator.samples(scenario(mixed, seed: 42))
        let b = IMUSimulator.samples(scenario(mixed, seed: 42))
        let c = IMUSimulator.samples(scenario(mixed, seed: 43))
        #expect(a.count == 1500)
        #expect(a == b)
        #expect(a.map(\.imu) != c.map(\.imu))
        #expect(a.map(\.trueOrientation) == c.map(\.trueOrientation))  // motion is not random
        // A fixed value pins the generator across machines and releases.
        var g = SeededGenerator(seed: 1)
        #expect(g.next() == 0xB3F2_AF6D_0FC7_10C5)
    }

    @Test("a noiseless gyro integrates exactly to the true orientation")
    func gyroIntegration() {
        let samples = IMUSimulator.samples(scenario(mixed, sensors: .ideal))
        var q = samples[0].trueOrientation
        let dt = 1 / 100.0
        var worst = 0.0
        for s in samples.dropFirst() {
            q = (q * Quaternion(rotationVector: s.imu.angularVelocity * dt)).normalized
            worst = max(worst, q.angularDistance(to: s.trueOrientation))
        }
        #expect(worst * degreesPerRadian < 1e-6, "worst drift \(worst * degreesPerRadian) deg")
    }

    @Test("ideal accelerometer and magnetometer give the true attitude through the compass")
    func idealSensorsAreConsistent() {
        let samples = IMUSimulator.samples(
            scenario(
                mixed.filter {
                    if case .walking = $0 { return false }
                    if case .impacts = $0 { return false }
                    return true
                }, sensors: .ideal))
        for s in samples {
            let r = try! TiltCompensatedCompass.reading(
                field: s.magnetometer.fieldMicrotesla, specificForce: s.imu.specificForce
            ).get()
            #expect(r.orientation.angularDistance(to: s.trueOrientation) < 1e-9)
            #expect(abs(s.imu.specificForce.norm - standardGravity) < 1e-9)
        }
    }

    @Test("noise, bias walk, hard and soft iron have the configured sizes")
    func sensorModels() {
        var sensors = SensorErrorModel()
        sensors.gyroInitialBias = Vector3(0.01, -0.02, 0.005)
        sensors.hardIronMicrotesla = Vector3(10, 0, 0)
        let samples = IMUSimulator.samples(scenario([.rest(seconds: 100)], sensors: sensors))
        let n = Double(samples.count)
        var gyroMean = Vector3.zero, magMean = Vector3.zero
        for s in samples {
            gyroMean += s.imu.angularVelocity
            magMean += s.magnetometer.fieldMicrotesla
        }
        gyroMean = gyroMean / n
        magMean = magMean / n
        var gyroVar = 0.0, magVar = 0.0
        for s in samples {
            gyroVar += (s.imu.angularVelocity.x - s.trueGyroBias.x) * (s.imu.angularVelocity.x - s.trueGyroBias.x)
            magVar += (s.magnetometer.fieldMicrotesla.y - magMean.y) * (s.magnetometer.fieldMicrotesla.y - magMean.y)
        }
        #expect(abs((gyroVar / n).squareRoot() - 0.002) < 0.0002)
        #expect(abs((magVar / n).squareRoot() - 0.5) < 0.03)
        // Bias random walk: after 100 s the drift is of order 1e-4 * sqrt(100) = 1e-3 rad/s.
        let drift = (samples.last!.trueGyroBias - sensors.gyroInitialBias).norm
        #expect(drift > 0 && drift < 0.01)
        let expectedMag = testEarthFieldFlatNorth + Vector3(10, 0, 0)
        #expect((magMean - expectedMag).norm < 0.1)
    }

    @Test("a scheduled magnet adds its field only while present, in its frame")
    func disturbances() {
        var s = scenario([.rest(seconds: 10)], sensors: .ideal)
        s.disturbances = [
            ScheduledDisturbance(
                startSeconds: 4, durationSeconds: 2, fieldMicrotesla: Vector3(30, 0, 0), frame: .world, rampSeconds: 0)
        ]
        let samples = IMUSimulator.samples(s)
        for x in samples {
            let t = x.imu.timestamp
            // Facing north in FLU, world east is the sensor's -y.
            let expected = (t >= 4 && t < 6) ? testEarthFieldFlatNorth + Vector3(0, -30, 0) : testEarthFieldFlatNorth
            #expect((x.magnetometer.fieldMicrotesla - expected).norm < 1e-9, "t=\(t)")
            #expect(x.isDisturbed == (t >= 4 && t < 6))
        }
    }

    @Test("impacts reach the configured peak; walking accelerates without tilting on average")
    func linearAcceleration() {
        let impacts = IMUSimulator.samples(
            scenario([.impacts(seconds: 5, peakG: 5, intervalSeconds: 1)], sensors: .ideal))
        let peak = impacts.map { $0.trueLinearAcceleration.norm }.max()!
        // A 30 ms half-sine sampled every 10 ms is seen at sin(60 deg) = 0.87 of its peak at most.
        #expect(peak > 0.86 * 5 * standardGravity && peak <= 5 * standardGravity + 1e-9)
        let walking = IMUSimulator.samples(scenario([.walking(seconds: 10, stepsPerSecond: 2)], sensors: .ideal))
        let maxLinear = walking.map { $0.trueLinearAcceleration.norm }.max()!
        #expect(maxLinear > 1.5 && maxLinear < 3)
    }

    @Test("looping runs forever with continuous time")
    func looping() {
        var s = scenario([.turn(degreesPerSecond: 10, seconds: 1)])
        s.loops = true
        var sim = IMUSimulator(scenario: s)
        var last = -1.0
        for _ in 0..<350 {
            let x = sim.next()!
            #expect(x.imu.timestamp > last)
            last = x.imu.timestamp
        }
        #expect(abs(last - 3.49) < 1e-9)
    }

    @Test("an empty or zero-rate scenario yields nothing instead of crashing")
    func degenerate() {
        var s = scenario([])
        #expect(IMUSimulator.samples(s).isEmpty)
        s.motion = [.rest(seconds: 1)]
        s.sampleRateHz = 0
        var sim = IMUSimulator(scenario: s)
        #expect(sim.next() == nil)
    }

    @Test("a drive: velocity along x, its change is the linear acceleration, GNSS at its rate with its outage")
    func drivingVehicle() {
        var s = SimulationScenario.drivingVehicle(seed: 7)
        s.sensors = .ideal
        s.gnssVelocity?.noiseMetresPerSecond = 0
        let samples = IMUSimulator.samples(s)
        var worstDirection = 0.0, worstAcceleration = 0.0, fastest = 0.0
        for (a, b) in zip(samples, samples.dropFirst()) {
            let v = b.trueVelocity
            fastest = max(fastest, v.norm)
            if v.norm > 1, let forward = b.trueOrientation.rotate(.unitX).normalized {
                worstDirection = max(worstDirection, (v / v.norm - forward).norm)
            }
            // The velocity's change over a sample is the mean of the two accelerations.
            let change = (b.trueVelocity - a.trueVelocity) * 100
            let mean = (a.trueLinearAcceleration + b.trueLinearAcceleration) * 0.5
            worstAcceleration = max(worstAcceleration, (change - mean).norm)
        }
        #expect(worstDirection < 1e-9)
        #expect(worstAcceleration < 0.01)
        #expect(fastest > 8 && fastest <= 15)
        let fixes = samples.compactMap(\.gnssVelocity)
        // 10 Hz, none from 150 s to 165 s.
        let outage = fixes.filter { $0.timestamp - s.startTime >= 150 && $0.timestamp - s.startTime < 165 }
        #expect(outage.isEmpty)
        #expect(abs(Double(fixes.count) - (s.duration - 15) * 10) <= 2)
        #expect(
            fixes.allSatisfy { f in
                let i = Int(((f.timestamp - s.startTime) * 100).rounded())
                return (f.velocityENU - samples[i].trueVelocity).norm < 1e-9
            })
        // The gyro integrates to the truth here too.
        var q = samples[0].trueOrientation
        var drift = 0.0
        for x in samples.dropFirst() {
            q = (q * Quaternion(rotationVector: x.imu.angularVelocity * 0.01)).normalized
            drift = max(drift, q.angularDistance(to: x.trueOrientation))
        }
        #expect(drift * degreesPerRadian < 1e-6)
    }
}

/// The default simulator earth field seen by a level sensor facing north: 48 uT, dip 66.
let testEarthFieldFlatNorth: Vector3 = {
    var s = SimulationScenario()
    s.motion = [.rest(seconds: 1)]
    return Quaternion(headingDegrees: 0, pitchDegrees: 0, rollDegrees: 0).inverseRotate(s.earthFieldENU)
}()
