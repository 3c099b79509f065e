import Testing
import IMUSimulator
@testable import CompassCore

/// A phone in a person's hand: phone-grade sensors (a raw gyro biased by several degrees per second, a
/// hard iron of hundreds of microtesla, the magnetometer at a quarter of the IMU's rate) and a hand that
/// sways the phone by ten degrees or so about every axis. The calibrator solves the gyro-aided windows
/// together (`GyroAidedWindows`) while the sensor's own iron dominates the readings.
@Suite("Pedestrian calibration")
struct PedestrianCalibrationTests {
    /// A hand holding a phone while walking: every 0.7 s a new attitude, about +-12 degrees of heading,
    /// pitch about 30 +- 12 and roll +-10, with a turn of the walk every 10 s.
    static func handSway(seconds: Double) -> [MotionSegment] {
        var segments: [MotionSegment] = []
        var k = 0.0
        var heading = 0.0
        while Double(segments.count) * 0.7 < seconds {
            if segments.count % 14 == 13 { heading += 70 }
            segments.append(
                .moveTo(
                    headingDegrees: heading + 12 * _sinForTest(1.3 * k), pitchDegrees: 30 + 12 * _sinForTest(0.9 * k),
                    rollDegrees: 10 * _sinForTest(1.7 * k), seconds: 0.7))
            k += 1
        }
        return segments
    }

    static func phone(hardIron: Vector3, seconds: Double = 40, magnetPass: Bool = false) -> [SimulatedSample] {
        var s = SimulationScenario()
        s.seed = 7
        s.earthFieldMicrotesla = 42
        s.earthFieldDipDegrees = 62
        s.motion = [.rest(seconds: 0.5)] + handSway(seconds: seconds)
        s.sensors.gyroInitialBias = Vector3(3, -5, 2) * radiansPerDegree
        s.sensors.gyroNoiseRadiansPerSecond = 0.004
        s.sensors.magnetometerNoiseMicrotesla = 0.8
        s.sensors.hardIronMicrotesla = hardIron
        if magnetPass {
            s.worldFieldSources = [
                .magnetPass(
                    closestSeconds: 12, distanceMeters: 0.15, speedMetersPerSecond: 1, momentAm2: Vector3(0, 0, 1))
            ]
        }
        return Array(IMUSimulator(scenario: s))
    }

    /// Feeds every IMU sample's motion and every fourth magnetometer reading (100 Hz IMU, 25 Hz
    /// magnetometer, as an iPhone 5's); returns the time of the first accepted fit and the calibrator.
    static func calibrate(_ samples: [SimulatedSample]) -> (firstFit: Double?, calibrator: OnlineCalibrator) {
        var c = OnlineCalibrator()
        var previous: Double?
        var first: Double?
        for (i, x) in samples.enumerated() {
            let t = x.imu.timestamp
            if let p = previous {
                c.addMotion(rate: x.imu.angularVelocity, specificForce: x.imu.specificForce, dt: t - p)
            }
            previous = t
            guard i % 4 == 0 else { continue }
            if c.add(x.magnetometer.fieldMicrotesla, time: t) != nil, first == nil {
                first = t - samples[0].imu.timestamp
            }
        }
        return (first, c)
    }

    @Test("a phone's hard iron of hundreds of microtesla is learned from seconds of a hand's sway")
    func learnedFromSway() throws {
        let hardIron = Vector3(250, -400, 180)
        let run = Self.calibrate(Self.phone(hardIron: hardIron))
        let first = try #require(run.firstFit, "never calibrated")
        let calibration = try #require(run.calibrator.calibration)
        let miss = (calibration.hardIronOffsetMicrotesla - hardIron).norm
        print(
            "pedestrian: first fit after \(first) s, offset off by \(miss) uT, "
                + "field \(calibration.fieldRadiusMicrotesla)"
        )
        // Each window alone turns too little for a gyro-aided fit, so without the joint solve nothing
        // comes before the walk has turned the phone about every axis (34 s on this run with 0.5-s
        // windows, where the joint solve needs more readings than a window holds).
        #expect(first < 10)
        // The windows find the gyro's bias with the offset (without it, the 5 deg/s turn a 2-s window
        // by 10 degrees and the offset comes out 7 uT off); only its part across the field shows.
        #expect(run.calibrator.gyroBiasEstimate != nil)
        #expect(run.calibrator.ironDominates)
        #expect(run.calibrator.gyroAidedFits >= 1)
        // 3 uT is 4 degrees of heading at the 20 uT horizontal field of a 62-degree dip.
        #expect(miss < 3)
        #expect(abs(calibration.fieldRadiusMicrotesla - 42) < 2)
    }

    @Test("a magnet passed at 15 cm leaves the windows it bends out of the joint solve")
    func magnetPassLeftOut() throws {
        let hardIron = Vector3(250, -400, 180)
        let run = Self.calibrate(Self.phone(hardIron: hardIron, magnetPass: true))
        let calibration = try #require(run.calibrator.calibration)
        let miss = (calibration.hardIronOffsetMicrotesla - hardIron).norm
        print("pedestrian with a magnet passed: offset off by \(miss) uT")
        #expect(miss < 3)
    }

    @Test("an offset smaller than the field leaves the first fit to the fits that see soft iron")
    func smallOffsetNotJoint() {
        let run = Self.calibrate(Self.phone(hardIron: Vector3(20, -30, 10)))
        #expect(!run.calibrator.ironDominates)
        #expect(!run.calibrator.jointFitInForce)
    }

    @Test("windows solved together: one window's turning about one axis, another's about another")
    func jointSolve() throws {
        // Two windows of readings u = c + R^T b, each turning +-20 degrees about one axis only (x, then
        // y): each alone leaves the offset along its axis unknown; together they give it.
        let offset = Vector3(300, -200, 100)
        let field = Vector3(0, 20, -37)
        var windows = GyroAidedWindows()
        for (n, axis) in [Vector3(1, 0, 0), Vector3(0, 1, 0)].enumerated() {
            var fit = GyroAidedHardIronFit()
            for i in 0..<100 {
                let angle = 20 * radiansPerDegree * _sinForTest(Double(i) * 0.2)
                let r = Quaternion(rotationVector: axis * angle).rotationMatrix
                fit.rotation = r
                fit.add(offset + r.transposed * field, time: Double(n) * 10 + Double(i) * 0.02)
            }
            windows.append(try #require(fit.window))
        }
        let s = try #require(
            windows.solve(
                maximumResidual: 0.5, strengthTolerance: 0.1, plausibleStrength: 20...70, minimumSpread: 0.01))
        #expect((s.correctedOffset - offset).norm < 0.01)
        #expect(abs(s.strengthMicrotesla - field.norm) < 0.01)
        #expect(s.windowCount == 2)
        // Either window alone cannot say it.
        var one = GyroAidedWindows()
        one.append(windows.windows[0])
        #expect(
            one.solve(maximumResidual: 0.5, strengthTolerance: 0.1, plausibleStrength: 20...70, minimumSpread: 0.01)
                == nil)
    }
}
