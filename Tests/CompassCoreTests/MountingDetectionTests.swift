import Testing
import CompassCore
import IMUSimulator

@Suite("Finding a magnetometer's mounting from motion")
struct MountingDetectionTests {
    /// The detector after a simulated run whose magnetometer is mounted `mounting` (its readings are
    /// M^T times the body's) with a hard iron of its own.
    static func detector(
        _ mounting: MountingRotation, motion: [MotionSegment], disturbances: [ScheduledDisturbance] = [],
        seed: UInt64 = 3
    ) -> MountingRotationDetector {
        var s = SimulationScenario()
        s.seed = seed
        s.motion = motion
        s.disturbances = disturbances
        s.sensors.hardIronMicrotesla = Vector3(25, -30, 12)
        s.sensors.gyroInitialBias = Vector3(0.004, -0.003, 0.002)
        var d = MountingRotationDetector()
        var previous: Double?
        for x in IMUSimulator.samples(s) {
            let t = x.imu.timestamp
            if let p = previous { d.addMotion(rate: x.imu.angularVelocity, dt: t - p) }
            previous = t
            d.addReading(mounting.matrix.transposed * x.magnetometer.fieldMicrotesla, time: t)
        }
        return d
    }

    @Test("names the mounting from a figure eight, for rotations of every kind")
    func namesTheMounting() throws {
        for name in ["none", "yaw_90", "roll_180", "pitch_7", "roll_90_pitch_68_yaw_293", "roll_270_yaw_135"] {
            let mounting = try #require(MountingRotation.named(name))
            let d = Self.detector(mounting, motion: [.figureEight(seconds: 40)])
            let found = try #require(d.detected, "\(name): \(d.windowsCounted) window(s) counted")
            #expect(found.rotation.matrix == mounting.matrix, "\(name): found \(found)")
            #expect(found.ratio >= 3)
        }
    }

    @Test("a rotation ArduPilot names twice is found under its first name, the other given as an alias")
    func aliases() throws {
        let d = Self.detector(
            try #require(MountingRotation.named("pitch_180_yaw_90")), motion: [.figureEight(seconds: 40)])
        let found = try #require(d.detected)
        #expect(found.rotation.description == "roll_180_yaw_270" && found.aliases == ["pitch_180_yaw_90"])
        #expect(d.candidates.count < MountingRotation.names.count)
    }

    @Test("turning about the vertical only, or resting, leaves the mounting undetermined")
    func undeterminedWithoutEnoughMotion() throws {
        let yawOnly = Self.detector(
            try #require(MountingRotation.named("yaw_90")), motion: [.turn(degreesPerSecond: 45, seconds: 60)])
        #expect(yawOnly.detected == nil && yawOnly.windowsCounted >= 10)
        let resting = Self.detector(try #require(MountingRotation.named("yaw_90")), motion: [.rest(seconds: 30)])
        #expect(resting.detected == nil && resting.windowsCounted == 0 && resting.windowsStill >= 6)
    }

    @Test("the windows a magnet arrives or leaves in are passed over; the mounting is still found")
    func disturbanceIsPassedOver() throws {
        let mounting = try #require(MountingRotation.named("roll_90"))
        let magnet = ScheduledDisturbance(
            startSeconds: 6, durationSeconds: 8, fieldMicrotesla: Vector3(60, -40, 30), frame: .world, rampSeconds: 0)
        let d = Self.detector(mounting, motion: [.figureEight(seconds: 40)], disturbances: [magnet])
        #expect(d.detected?.rotation.matrix == mounting.matrix)
        #expect(d.windowsDisturbed >= 1)
    }
}
