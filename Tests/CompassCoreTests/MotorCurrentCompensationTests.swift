import Testing
import CompassCore
import IMUSimulator

@Suite("Motor-current compensation")
struct MotorCurrentCompensationTests {
    static func scenario(seed: UInt64, motion: [MotionSegment]) -> SimulationScenario {
        var s = SimulationScenario()
        s.seed = seed
        s.motion = motion
        s.sensors.hardIronMicrotesla = Vector3(25, -30, 12)
        s.sensors.motorFieldMicroteslaPerAmpere = Vector3(0.6, -0.5, 0.6)
        s.motorCurrentAmperes = 30
        return s
    }

    static func learned(_ s: SimulationScenario) -> MotorCurrentCompensator {
        var c = MotorCurrentCompensator()
        var previous: Double?
        for x in IMUSimulator.samples(s) {
            let t = x.imu.timestamp
            if let p = previous { c.addMotion(rate: x.imu.angularVelocity, dt: t - p) }
            previous = t
            c.addCurrent(x.motorCurrentAmperes, time: t)
            _ = c.compensate(x.magnetometer.fieldMicrotesla, time: t)
        }
        return c
    }

    @Test("learns the coefficients within 0.01 uT/A while turning, and while resting, from the current alone")
    func learnsWhileTurningAndAtRest() {
        for motion: [MotionSegment] in [
            [.figureEight(seconds: 20), .turn(degreesPerSecond: 30, seconds: 20)], [.rest(seconds: 40)],
        ] {
            let c = Self.learned(Self.scenario(seed: 5, motion: motion))
            #expect(c.learned)
            #expect((c.coefficients - Vector3(0.6, -0.5, 0.6)).norm < 0.01, "\(c.coefficients)")
            #expect(c.uncertainty.x < 0.01 && c.windowsAccepted >= 5)
        }
    }

    @Test("without the current varying nothing is learned; fixed coefficients are applied as given")
    func steadyCurrentTeachesNothing() {
        var s = Self.scenario(seed: 5, motion: [.rest(seconds: 20)])
        s.motorCurrentAmperes = 0
        var c = MotorCurrentCompensator()
        for x in IMUSimulator.samples(s) {
            c.addCurrent(12, time: x.imu.timestamp)
            _ = c.compensate(x.magnetometer.fieldMicrotesla, time: x.imu.timestamp)
        }
        #expect(!c.learned && c.windowsAccepted == 0 && c.coefficients == .zero)
        var settings = MotorCompensationSettings()
        settings.learn = false
        settings.coefficientsMicroteslaPerAmpere = Vector3(1, 0, -2)
        var fixed = MotorCurrentCompensator(settings: settings)
        #expect(fixed.compensate(Vector3(10, 10, 10), time: 0) == Vector3(10, 10, 10))  // no current yet
        fixed.addCurrent(3, time: 0)
        #expect(fixed.compensate(Vector3(10, 10, 10), time: 0.01) == Vector3(7, 10, 16))
    }
}
