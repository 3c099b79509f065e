import Testing
import CompassCore
import IMUSimulator

@Suite("Hostile input: the filters stay finite and recover")
struct HostileInputTests {
    /// At rest, heading 30, pitch 10, with bad samples injected between 5 and 6 s.
    static func corrupted(_ sample: SimulatedSample, index: Int) -> (ImuSample, MagnetometerSample) {
        var imu = sample.imu, mag = sample.magnetometer
        switch index {
        case 500: imu.angularVelocity = Vector3(.nan, 0, 0)
        case 510: imu.specificForce = Vector3(.infinity, 0, 0)
        case 520: imu.angularVelocity = Vector3(1e30, -1e30, 1e30)  // finite, physically impossible
        case 530: imu.specificForce = Vector3(0, 0, 1e30)
        case 540: mag.fieldMicrotesla = Vector3(1e30, 0, 0)
        case 550: mag.fieldMicrotesla = Vector3(.nan, .nan, .nan)
        case 560: imu.timestamp -= 50  // backwards
        case 570: imu.timestamp = .infinity
        case 590: imu.timestamp += 1000  // one sample stamped far ahead: later ones are behind it
        default: break
        }
        return (imu, mag)
    }

    func check<F: OrientationFilter>(_ filter: inout F) {
        let samples = IMUSimulator.samples(makeScenario([.rest(seconds: 12)], pitch: 10))
        var lastError = Double.infinity
        for (i, s) in samples.enumerated() {
            let (imu, mag) = Self.corrupted(s, index: i)
            guard let o = filter.update(imu: imu, magnetometer: mag) else { continue }
            #expect(o.orientation.isFinite, "sample \(i)")
            if let h = o.headingDegrees { #expect(h.isFinite) }
            if let a = o.headingAccuracyDegrees { #expect(a.isFinite) }
            if i > 500 && i < 600 { continue }
            if let h = o.headingDegrees, let t = s.trueHeadingDegrees { lastError = abs(signedDegrees(h - t)) }
        }
        // Recovered within the 6 s after the last bad sample: heading within 3 degrees at the end.
        #expect(lastError < 3, "heading error \(lastError)")
        let k = filter.skipped
        #expect(k.nonFiniteImu == 3 && k.implausibleImu == 2, "\(k.reasons)")
        #expect(k.implausibleMagnetometer == 1 && k.nonFiniteMagnetometer == 1, "\(k.reasons)")
        #expect(k.timestampNotIncreasing == 1 + 5 && k.timelineRestarts == 1, "\(k.reasons)")
    }

    @Test("Kalman filter") func kalman() {
        var f = KalmanFilter()
        check(&f)
    }

    @Test("Kalman filter with the lever-arm fit") func kalmanWithLeverArm() {
        var settings = KalmanFilterSettings()
        settings.leverArmSeconds = 10
        var f = KalmanFilter(settings: settings)
        check(&f)
        #expect(
            f.leverArm.leverArmMeters.isFinite && f.leverArm.leverArmMeters.norm < 1, "\(f.leverArm.leverArmMeters)")
    }

    @Test("complementary filter") func complementary() {
        var f = ComplementaryFilter()
        check(&f)
    }
}
