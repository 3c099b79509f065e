import Testing
import CompassCore
import IMUSimulator

@Suite("Online calibration")
struct OnlineCalibrationTests {
    @Test("converges from a cold start during a figure-eight; the prompt stops; headings are right afterwards")
    func coldStart() throws {
        var s = SimulationScenario()
        s.seed = 21
        s.motion = [
            .rest(seconds: 2), .figureEight(seconds: 20), .turn(degreesPerSecond: 25, seconds: 10),
            .moveTo(headingDegrees: 250, pitchDegrees: 25, rollDegrees: -15, seconds: 4),
            .turn(degreesPerSecond: -30, seconds: 10),
        ]
        s.sensors.hardIronMicrotesla = Vector3(22, -27, 14)
        s.sensors.softIron = Matrix3(1.08, 0.04, 0, 0.04, 0.95, 0.02, 0, 0.02, 1.02)
        var calibrator = OnlineCalibrator()
        #expect(calibrator.needsMotion && calibrator.progressPercent == 0)
        var acceptedAt: Double?
        var promptSeen = false
        var errors: [Double] = []
        for x in IMUSimulator.samples(s) {
            let t = x.imu.timestamp
            if calibrator.needsMotion { promptSeen = true }
            if calibrator.add(x.magnetometer.fieldMicrotesla, time: t) != nil, acceptedAt == nil { acceptedAt = t }
            if t > 22, let cal = calibrator.calibration,
                let h = TiltCompensatedCompass.headingDegrees(
                    field: cal.apply(x.magnetometer.fieldMicrotesla), specificForce: x.imu.specificForce)
            {
                errors.append(abs(signedDegrees(h - x.trueHeadingDegrees!)))
            }
        }
        #expect(promptSeen)
        let accepted = try #require(acceptedAt, "no calibration accepted")
        #expect(accepted < 22, "accepted only at \(accepted) s")
        let cal = try #require(calibration(calibrator))
        #expect(
            (cal.hardIronOffsetMicrotesla - Vector3(22, -27, 14)).norm < 1, "offset \(cal.hardIronOffsetMicrotesla)")
        #expect(!calibrator.needsMotion && calibrator.state == .calibrated && calibrator.progressPercent == 100)
        let median = percentile(errors, 50)
        print(
            "online calibration accepted at \(accepted) s, offset error "
                + "\((cal.hardIronOffsetMicrotesla - Vector3(22, -27, 14)).norm) uT, median heading error "
                + "afterwards \(median) deg"
        )
        #expect(median < 1.5)
    }

    @Test("a fit from one-sided motion is never accepted; a calibration that stops fitting is declared degraded")
    func refusalsAndDegradation() {
        var s = SimulationScenario()
        s.motion = [.turn(degreesPerSecond: 20, seconds: 30)]  // level turns only: one plane of directions
        var c = OnlineCalibrator()
        for x in IMUSimulator.samples(s) { _ = c.add(x.magnetometer.fieldMicrotesla, time: x.imu.timestamp) }
        #expect(c.calibration == nil && c.needsMotion)

        var good = OnlineCalibrator(
            initial: MagnetometerCalibration(hardIronOffsetMicrotesla: .zero, fieldRadiusMicrotesla: 48))
        var s2 = SimulationScenario()
        s2.motion = [.figureEight(seconds: 10), .rest(seconds: 15)]
        s2.disturbances = [
            ScheduledDisturbance(
                startSeconds: 10, durationSeconds: 15, fieldMicrotesla: Vector3(0, 0, 0), frame: .world)
        ]
        s2.sensors.hardIronMicrotesla = .zero
        var afterFit = false
        for x in IMUSimulator.samples(s2) {
            var m = x.magnetometer.fieldMicrotesla
            if x.imu.timestamp > 12 { m += Vector3(15, 0, 0) }  // a new magnet fixed to the device
            if good.add(m, time: x.imu.timestamp) != nil { afterFit = true }
        }
        // The calibration in force explains the figure-eight: no refit replaces it.
        #expect(!afterFit)
        // Old readings are dropped: progress starts again, far below what a new fit needs.
        #expect(good.state == .degraded && good.needsMotion && good.progressPercent < 25)
    }

    @Test("the calibrator says how much its gyro-aided windows turned: level turns alone never reach the limit")
    func rotationSpreadSeen() {
        func spread(_ motion: [MotionSegment]) -> (Double, Bool) {
            var s = SimulationScenario()
            s.motion = motion
            s.sensors.hardIronMicrotesla = Vector3(12, -8, 5)
            var c = OnlineCalibrator()
            feed(&c, IMUSimulator.samples(s))
            return (c.largestRotationSpread, c.gyroAidedFits > 0)
        }
        let needed = GyroAidedFitSettings().minimumRotationSpread
        let (level, levelFitted) = spread([.turn(degreesPerSecond: 20, seconds: 30)])
        #expect(level < 0.01 && !levelFitted, "about one axis only: spread \(level)")
        let (eight, eightFitted) = spread([.figureEight(seconds: 30)])
        #expect(eight >= needed && eightFitted, "a figure eight: spread \(eight)")
    }

    func calibration(_ c: OnlineCalibrator) -> MagnetometerCalibration? { c.calibration }
}
