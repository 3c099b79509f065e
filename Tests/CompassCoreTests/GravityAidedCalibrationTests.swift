#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Testing
import CompassCore
import IMUSimulator

/// A phone carried flat by a walker: hundreds of microtesla of hard iron, a gyro bias of degrees per
/// second, turning about the vertical only (the readings lie on one circle, never on a sphere).
func walkerWithPhone(seed: UInt64, hardIron: Vector3, gyroBias: Vector3) -> SimulationScenario {
    var s = SimulationScenario()
    s.seed = seed
    s.sampleRateHz = 50
    s.startPitchDegrees = 25
    s.startRollDegrees = -5
    s.motion = [
        .walking(seconds: 4, stepsPerSecond: 1.8), .turn(degreesPerSecond: 45, seconds: 4),
        .walking(seconds: 3, stepsPerSecond: 1.8), .turn(degreesPerSecond: -60, seconds: 3),
        .walking(seconds: 3, stepsPerSecond: 1.8), .turn(degreesPerSecond: 90, seconds: 4),
        .walking(seconds: 5, stepsPerSecond: 1.8), .turn(degreesPerSecond: -40, seconds: 6),
        .walking(seconds: 8, stepsPerSecond: 1.8),
    ]
    s.sensors.hardIronMicrotesla = hardIron
    s.sensors.gyroInitialBias = gyroBias
    s.sensors.magnetometerNoiseMicrotesla = 0.8
    return s
}

@Suite("Gravity-aided calibration (a walker's phone)")
struct GravityAidedCalibrationTests {
    /// Runs the calibrator over a scenario with its motion; returns when a fit was first accepted, the
    /// calibration at the end and the median heading error (degrees) after the first fit.
    /// `worstHorizontalMiss`: the largest offset error, microtesla, across the mean vertical, of any
    /// calibration accepted during the run (the part that turns the heading while the device stays
    /// near its mean tilt).
    func run(_ s: SimulationScenario, initial: MagnetometerCalibration? = nil) -> (
        acceptedAt: Double?, calibrator: OnlineCalibrator, medianError: Double, worstHorizontalMiss: Double
    ) {
        var c = OnlineCalibrator(initial: initial)
        var acceptedAt: Double?
        var errors: [Double] = []
        let samples = IMUSimulator.samples(s)
        let up = samples.reduce(Vector3.zero) { $0 + $1.imu.specificForce }.normalized!
        var worst = 0.0
        feed(&c, samples) { x, fit, now in
            if let fit {
                if acceptedAt == nil { acceptedAt = x.imu.timestamp }
                let miss = fit.calibration.hardIronOffsetMicrotesla - s.sensors.hardIronMicrotesla
                worst = max(worst, (miss - up * miss.dot(up)).norm)
            }
            if acceptedAt != nil, let cal = now.calibration,
                let h = TiltCompensatedCompass.headingDegrees(
                    field: cal.apply(x.magnetometer.fieldMicrotesla), specificForce: x.imu.specificForce)
            {
                errors.append(abs(signedDegrees(h - x.trueHeadingDegrees!)))
            }
        }
        return (acceptedAt, c, errors.isEmpty ? .nan : percentile(errors, 50), worst)
    }

    @Test("400 uT of hard iron is learned from turns about the vertical alone, whatever the gyro bias")
    func learnsFromLevelTurns() throws {
        let hardIron = Vector3(120, -310, 420)
        for seed: UInt64 in [3, 4] {
            let s = walkerWithPhone(seed: seed, hardIron: hardIron, gyroBias: Vector3(0.03, -0.05, 0.08))
            let r = run(s)
            let accepted = try #require(r.acceptedAt, "seed \(seed): no fit accepted")
            let cal = try #require(r.calibrator.calibration)
            let miss = cal.hardIronOffsetMicrotesla - hardIron
            print(
                "gravity-aided, seed \(seed): accepted at \(accepted) s, offset error \(miss), median heading "
                    + "error \(r.medianError) deg, fits \(r.calibrator.gravityAidedFits)")
            #expect(accepted < 35, "seed \(seed): accepted only at \(accepted) s")
            #expect(r.calibrator.gravityAidedFits >= 1)
            // The offset across the vertical decides the heading; along it the turning leaves the offset
            // to the strength prior, which keeps it near.
            #expect(r.worstHorizontalMiss < 6, "seed \(seed): offset error \(miss)")
            #expect(miss.norm < 15, "seed \(seed): offset error \(miss)")
            #expect(r.medianError < 5, "seed \(seed): median heading error \(r.medianError)")
        }
    }

    @Test("readings that are calibrated already are left alone: no gravity-aided fit replaces none")
    func calibratedSensorStaysAsItIs() {
        let s = walkerWithPhone(seed: 5, hardIron: .zero, gyroBias: Vector3(0, 0, 0.05))
        let r = run(s)
        #expect(r.calibrator.gravityAidedFits == 0)
        // Taken as they are once the turning is enough to tell; never corrected.
        #expect(r.calibrator.calibration.map { $0.hardIronOffsetMicrotesla == .zero } ?? true)
        #expect(r.calibrator.fit.map { $0.model == .asIs } ?? true)
    }

    @Test("a magnet on a table passed on the way does not become hard iron")
    func worldFixedMagnetIsNotHardIron() throws {
        let hardIron = Vector3(-250, 180, -380)
        var s = walkerWithPhone(seed: 6, hardIron: hardIron, gyroBias: Vector3(-0.02, 0.04, -0.06))
        s.motion += s.motion  // long enough for the magnet to leave the readings' 30 s
        // 25 uT more or less east for 3 s of the walk (a magnet at 20 cm on a table, passed by).
        s.disturbances = [
            ScheduledDisturbance(
                startSeconds: 9, durationSeconds: 3, fieldMicrotesla: Vector3(25, 5, -10), frame: .world,
                rampSeconds: 1)
        ]
        let r = run(s)
        let cal = try #require(r.calibrator.calibration, "no fit accepted")
        let miss = cal.hardIronOffsetMicrotesla - hardIron
        print(
            "gravity-aided past a magnet: accepted at \(r.acceptedAt ?? -1) s, offset error \(miss), worst accepted "
                + "\(r.worstHorizontalMiss) uT across the vertical, median heading error \(r.medianError) deg")
        // No calibration accepted at any time carries the magnet's field.
        #expect(r.worstHorizontalMiss < 6, "offset error \(miss)")
        #expect(r.medianError < 4)
    }

    @Test("the fit alone: a circle of readings with their verticals gives the centre and the strength")
    func fitOnACircle() throws {
        let centre = Vector3(300, -100, 200), strength = 44.0, dip = 62.0 * radiansPerDegree
        var readings: [GravityAidedHardIronFit.Reading] = []
        for k in 0..<72 {
            let a = Double(k) * 5 * radiansPerDegree
            // Level sensor (up = +z) turned about the vertical: the horizontal field turns in x-y.
            let field = Vector3(strength * cos(dip) * cos(a), strength * cos(dip) * sin(a), -strength * sin(dip))
            readings.append(.init(field: centre + field, up: Vector3(0, 0, 1)))
        }
        var settings = GravityAidedFitSettings()
        settings.expectedStrengthMicrotesla = strength
        let s = try #require(GravityAidedHardIronFit.robustFit(readings, settings: settings))
        #expect((s.correctedOffset - centre).norm < 0.5, "centre \(s.correctedOffset)")
        #expect(abs(s.strengthMicrotesla - strength) < 0.5 && abs(s.dipDegrees - 62) < 1)
        #expect(s.horizontalResultant < 0.05 && s.rmsResidualMicrotesla < 0.1)
    }
}

@Suite("Magnetic gate and an uncertain gyro bias")
struct GateBiasAllowanceTests {
    /// Feeds a compass that drifts against the gyro-only heading at `degreesPerSecond` (the bias error
    /// of a gyro the filter does not know yet) for 30 s; returns the share of readings rejected.
    func rejectedShare(driftDegreesPerSecond: Double, biasSigma: Double) -> Double {
        var gate = MagneticDisturbanceGate()
        gate.setReference(strengthMicrotesla: 45, dipDegrees: 60)
        var rejected = 0, total = 0
        let dt = 0.02
        for k in 0..<1500 {
            let innovation = Double(k) * dt * driftDegreesPerSecond * radiansPerDegree
            let v = gate.assess(
                strengthMicrotesla: 45, dipDegrees: 60, headingInnovation: wrappedRadians(innovation),
                headingVariance: 1e-4, verticalBiasSigma: biasSigma, dt: dt)
            if k > 500 {
                total += 1
                if !v.use { rejected += 1 }
            }
        }
        return Double(rejected) / Double(total)
    }

    @Test("a drift the bias uncertainty explains is no disturbance; without that uncertainty it is")
    func driftWithinTheBiasUncertainty() {
        // 1 deg/s of drift: 8 degrees between the 2 s average and the 10 s baseline.
        let known = rejectedShare(driftDegreesPerSecond: 1, biasSigma: 0)
        let uncertain = rejectedShare(driftDegreesPerSecond: 1, biasSigma: 0.6 * radiansPerDegree)
        #expect(known > 0.5, "rejected \(known)")
        #expect(uncertain == 0, "rejected \(uncertain)")
        // A drift far beyond 3 sigma of the bias is still caught.
        #expect(rejectedShare(driftDegreesPerSecond: 5, biasSigma: 0.1 * radiansPerDegree) > 0.5)
    }
}

@Suite("Holes in the streams")
struct StreamHoleTests {
    @Test("a pause of seconds in the IMU or the magnetometer is counted with its length, short ones are not")
    func holesAreCounted() {
        var filter = KalmanFilter()
        var t = 0.0
        func feed(until end: Double, magnetometerEvery: Int?) {
            var k = 0
            while t < end {
                let mag =
                    magnetometerEvery.map { k % $0 == 0 }
                        == true ? MagnetometerSample(timestamp: t, fieldMicrotesla: Vector3(0, 20, -44)) : nil
                _ = filter.update(
                    imu: ImuSample(timestamp: t, angularVelocity: .zero, specificForce: Vector3(0, 0, 9.81)),
                    magnetometer: mag)
                t += 0.01
                k += 1
            }
        }
        feed(until: 5, magnetometerEvery: 2)
        t += 0.5  // below the limit: not a hole
        feed(until: 10, magnetometerEvery: 2)
        t += 23.7  // a phone's sensors paused
        feed(until: 40, magnetometerEvery: 2)
        feed(until: 43, magnetometerEvery: nil)  // the magnetometer alone stops for 3 s
        feed(until: 45, magnetometerEvery: 2)
        let k = filter.skipped
        #expect(k.imuHoles == 1 && abs(k.longestImuHoleSeconds - 23.71) < 0.02, "\(k)")
        #expect(k.magnetometerHoles == 2, "\(k)")
        #expect(abs(k.longestMagnetometerHoleSeconds - 23.71) < 0.03, "\(k)")
        #expect(k.holes == "IMU 1 (longest 23.7 s), magnetometer 2 (longest 23.7 s)", "\(k.holes)")
        #expect(k.total == 0)
    }
}
