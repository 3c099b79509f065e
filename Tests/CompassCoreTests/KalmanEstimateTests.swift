import CompassCore
import IMUSimulator
import Testing

@Suite("Kalman filter: reading and restoring the estimate")
struct KalmanEstimateTests {
    static let motion: [MotionSegment] = Array(
        repeating: [
            .turn(degreesPerSecond: 40, seconds: 5), .walking(seconds: 10, stepsPerSecond: 1.8),
            .rotate(sensorAxis: Vector3(1, 0.3, 0), degreesPerSecond: 30, seconds: 4), .figureEight(seconds: 8),
        ], count: 4
    ).flatMap { $0 }

    @Test("an estimate saved mid-run and given to a new filter carries the gyro bias and the heading on")
    func restoreCarriesBiasAndHeading() throws {
        let bias = Vector3(0.02, -0.015, 0.03)
        let samples = IMUSimulator.samples(makeScenario(Self.motion, bias: bias))
        let half = samples.count / 2
        var first = KalmanFilter()
        for s in samples[..<half] { _ = first.update(imu: s.imu, magnetometer: s.magnetometer) }
        let saved = first.estimate
        #expect((saved.gyroBiasRadiansPerSecond - samples[half].trueGyroBias).norm < 0.006)

        var restored = KalmanFilter(), fresh = KalmanFilter()
        let accepted = restored.setEstimate(saved)
        // The same orientation without the bias learned: what a restart without the saved state knows.
        let withoutBias = fresh.setEstimate(
            .init(orientation: saved.orientation, gyroBiasRadiansPerSecond: .zero, covariance: saved.covariance))
        #expect(accepted && withoutBias)
        var restoredErrors: [Double] = [], freshErrors: [Double] = []
        // Without the magnetometer for 20 s: the gyro alone carries the heading, so only the filter that
        // knows the bias keeps it.
        for s in samples[half..<(half + 2000)] {
            if let o = restored.update(imu: s.imu), let e = headingError(Step(sample: s, output: o)) {
                restoredErrors.append(abs(e))
            }
            if let o = fresh.update(imu: s.imu), let e = headingError(Step(sample: s, output: o)) {
                freshErrors.append(abs(e))
            }
        }
        let restoredWorst = try #require(restoredErrors.max()), freshWorst = try #require(freshErrors.max())
        #expect(restoredWorst < 3, "restored filter's worst heading error over 20 s of gyro only: \(restoredWorst)")
        #expect(freshWorst > 5 * restoredWorst, "without the saved bias: \(freshWorst)")
    }

    @Test("the estimate's heading variance is the one the filter reports, the pending propagation included")
    func estimateIncludesPendingPropagation() {
        let samples = IMUSimulator.samples(makeScenario([.turn(degreesPerSecond: 30, seconds: 10)]))
        var kf = KalmanFilter()
        // Stop between two measurement updates, so that a propagation is pending.
        for s in samples.prefix(503) { _ = kf.update(imu: s.imu, magnetometer: s.magnetometer) }
        let sigma = kf.headingSigmaDegrees * radiansPerDegree
        let m22 = kf.estimate.covariance.attitude.m22
        #expect(abs(m22 - sigma * sigma) <= 1e-12 * m22, "estimate \(m22) rad^2, reported \(sigma * sigma)")
    }

    @Test("an estimate that is not finite or not a rotation is refused and changes nothing")
    func refusesInvalidEstimates() {
        var kf = KalmanFilter()
        for s in IMUSimulator.samples(makeScenario([.rest(seconds: 3)])) {
            _ = kf.update(imu: s.imu, magnetometer: s.magnetometer)
        }
        let before = kf.estimate
        var scaled = before
        scaled.orientation = Quaternion(w: 2, x: 0, y: 0, z: 0)
        var infinite = before
        infinite.gyroBiasRadiansPerSecond = Vector3(.infinity, 0, 0)
        var nan = before
        nan.covariance.attitude.m11 = .nan
        for wrong in [scaled, infinite, nan] {
            let accepted = kf.setEstimate(wrong)
            #expect(!accepted)
            #expect(kf.estimate == before)
        }
    }
}
