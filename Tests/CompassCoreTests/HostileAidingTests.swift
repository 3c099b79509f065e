import Testing
import CompassCore
import IMUSimulator

/// Aiding inputs a faulty receiver sends: they are passed over and counted, or outvoted, never trusted
/// because they came first.
@Suite("Hostile aiding inputs")
struct HostileAidingTests {
    /// Dual-antenna headings at 5 Hz (0.5 degrees 1-sigma) on a drive without a magnetometer; the first
    /// `bad` of them `offset` degrees off.
    func drive(firstBad bad: Int, offset: Double) -> DriveScore {
        var settings = KalmanFilterSettings()
        settings.useMagnetometer = false
        let drive = SimulationScenario.drivingVehicle(seed: 4, gnss: false)
        var rng = SeededGenerator(seed: 7)
        var n = 0, sent = 0
        let headings: (SimulatedSample) -> GnssHeadingSample? = { s in
            n += 1
            guard n % 20 == 0, let truth = s.trueHeadingDegrees else { return nil }
            sent += 1
            return GnssHeadingSample(
                timestamp: s.imu.timestamp, headingDegrees: truth + (sent <= bad ? offset : 0) + 0.5 * rng.nextNormal(),
                varianceDegrees2: 0.25)
        }
        return scoreDrive(drive, settings: settings, useVelocity: false, headings: headings, fromSeconds: 10)
    }

    @Test("a bad first dual-antenna heading is outvoted by the agreeing ones after it", arguments: [90.0, -60])
    func badFirstHeadingIsOutvoted(offset: Double) {
        let score = drive(firstBad: 1, offset: offset)
        let counts = score.filter.aiding.counts
        print("first heading \(offset) off: rmse \(score.rmse), realigned \(counts.headingRealignments)")
        #expect(counts.headingRealignments == 1)
        #expect(score.rmse < 1, "rmse \(score.rmse)")
        #expect(counts.headingsUsed > 500 && counts.headingsRejected < 10)
    }

    @Test("a receiver's velocity no vehicle reaches is unusable, counted, and changes nothing")
    func impossibleVelocityIsPassedOver() {
        var filter = KalmanFilter()
        filter.update(
            velocity: GnssVelocitySample(timestamp: 1, velocityENU: Vector3(300_000, 0, 0), horizontalVariance: 0.01))
        filter.update(
            velocity: GnssVelocitySample(timestamp: 2, velocityENU: Vector3(1e308, 0, 0), horizontalVariance: 0.01))
        #expect(filter.aiding.counts.unusable == 2 && filter.aiding.counts.velocities == 0)
        filter.update(
            velocity: GnssVelocitySample(timestamp: 3, velocityENU: Vector3(20, 5, 0), horizontalVariance: 0.01))
        #expect(filter.aiding.counts.velocities == 1)
    }
}
