import Testing
import CompassCore
import IMUSimulator

/// Raw magnetometer readings from the simulator's figure-eight motion (300 samples: 6 s at 50 Hz).
func figureEightReadings(hardIron: Vector3, softIron: Matrix3 = .identity, noise: Double = 0.5, seed: UInt64 = 7)
    -> [Vector3]
{
    var s = SimulationScenario()
    s.seed = seed
    s.sampleRateHz = 50
    s.motion = [.figureEight(seconds: 6)]
    s.sensors.magnetometerNoiseMicrotesla = noise
    s.sensors.hardIronMicrotesla = hardIron
    s.sensors.softIron = softIron
    return IMUSimulator.samples(s).map { $0.magnetometer.fieldMicrotesla }
}

/// Heading errors over 1,000 random attitudes tilted up to 40 degrees, with the given distortion and
/// 0.5 uT / 0.02 m/s^2 noise, after applying `calibration`.
func headingErrors(calibration: MagnetometerCalibration, hardIron: Vector3, softIron: Matrix3 = .identity) -> [Double] {
    var rng = SeededGenerator(seed: 99)
    return randomAttitudes(count: 1000, maxTiltDegrees: 40, seed: 11).map { q in
        let (field, force) = idealReadings(q)
        let raw = softIron * field + hardIron + Vector3(rng.nextNormal(), rng.nextNormal(), rng.nextNormal()) * 0.5
        let accel = force + Vector3(rng.nextNormal(), rng.nextNormal(), rng.nextNormal()) * 0.02
        let h = TiltCompensatedCompass.headingDegrees(field: calibration.apply(raw), specificForce: accel)!
        return abs(signedDegrees(h - q.headingDegrees!))
    }
}

@Suite("Hard- and soft-iron calibration")
struct CalibrationTests {
    let offset = Vector3(22, -27, 14)

    @Test("sphere fit recovers the hard-iron offset and radius from 300 figure-eight readings")
    func sphereFit() throws {
        let readings = figureEightReadings(hardIron: offset)
        #expect(readings.count == 300)
        let fit = try CalibrationFitter.fitSphere(readings).get()
        let c = fit.calibration.hardIronOffsetMicrotesla
        #expect(abs(c.x - 22) < 0.1 && abs(c.y + 27) < 0.1 && abs(c.z - 14) < 0.1, "offset \(c)")
        #expect(
            abs(fit.calibration.fieldRadiusMicrotesla - 48) < 0.1, "radius \(fit.calibration.fieldRadiusMicrotesla)")
        #expect(fit.rmsResidualMicrotesla < 0.7)
        #expect(fit.meanResultantLength < 0.2)
        #expect(fit.directionCoverage > 0.8)

        let before = headingErrors(calibration: .uncalibrated, hardIron: offset)
        let after = headingErrors(calibration: fit.calibration, hardIron: offset)
        let medianBefore = percentile(before, 50), medianAfter = percentile(after, 50), p95After = percentile(after, 95)
        print(
            "hard iron: median heading error uncalibrated \(medianBefore) deg, calibrated \(medianAfter) deg, p95 "
                + "\(p95After) deg"
        )
        #expect(medianBefore > 10)
        #expect(medianAfter < 1.3)
        #expect(p95After < 3.5)
    }

    @Test("ellipsoid fit removes soft iron that the sphere fit cannot")
    func ellipsoidFit() throws {
        let soft = Matrix3(1.15, 0.08, 0, 0.08, 1, 0, 0, 0, 1)
        let readings = figureEightReadings(hardIron: offset, softIron: soft)
        let sphere = try CalibrationFitter.fitSphere(readings).get()
        let ellipsoid = try CalibrationFitter.fitEllipsoid(readings).get()
        let c = ellipsoid.calibration.hardIronOffsetMicrotesla
        #expect((c - offset).norm < 0.3, "ellipsoid centre \(c)")
        // The corrected readings lie on a sphere to the noise level.
        #expect(ellipsoid.rmsResidualMicrotesla < 0.7, "ellipsoid residual \(ellipsoid.rmsResidualMicrotesla)")
        #expect(sphere.rmsResidualMicrotesla > 2 * ellipsoid.rmsResidualMicrotesla)

        let sphereErrors = headingErrors(calibration: sphere.calibration, hardIron: offset, softIron: soft)
        let ellipsoidErrors = headingErrors(calibration: ellipsoid.calibration, hardIron: offset, softIron: soft)
        // The noise floor: the same readings with the true inverse distortion applied.
        let perfect = MagnetometerCalibration(
            hardIronOffsetMicrotesla: offset, softIronCorrection: soft.inverse!, fieldRadiusMicrotesla: 48)
        let floorErrors = headingErrors(calibration: perfect, hardIron: offset, softIron: soft)
        let sm = percentile(sphereErrors, 50), em = percentile(ellipsoidErrors, 50), fm = percentile(floorErrors, 50)
        let s95 = percentile(sphereErrors, 95), e95 = percentile(ellipsoidErrors, 95)
        print("soft iron: median/p95 heading error sphere \(sm)/\(s95), ellipsoid \(em)/\(e95), noise floor \(fm) deg")
        #expect(em < fm * 1.15 + 0.05, "ellipsoid median \(em) vs noise floor \(fm)")
        #expect(sm > 2 * em)
        #expect(s95 > 2 * e95)
    }

    @Test("degenerate input is refused with a reason, never a NaN centre")
    func degenerate() {
        let good = figureEightReadings(hardIron: offset)
        // Too few.
        #expect(CalibrationFitter.fitSphere(Array(good.prefix(5))) == .failure(.tooFewReadings(count: 5, minimum: 8)))
        #expect(
            CalibrationFitter.fitEllipsoid(Array(good.prefix(12))) == .failure(.tooFewReadings(count: 12, minimum: 18)))
        // Non-finite.
        var bad = good
        bad[17] = Vector3(.nan, 1, 2)
        #expect(CalibrationFitter.fitSphere(bad) == .failure(.nonFiniteReading(index: 17)))
        #expect(CalibrationFitter.fitEllipsoid(bad) == .failure(.nonFiniteReading(index: 17)))
        // Collinear: points along one line.
        let line = (0..<50).map { Vector3(1, 2, 3) * Double($0) + offset }
        #expect(CalibrationFitter.fitSphere(line) == .failure(.collinearReadings))
        #expect(CalibrationFitter.fitEllipsoid(line) == .failure(.collinearReadings))
        // Coplanar: a flat turn only (a circle).
        let circle = (0..<100).map { i -> Vector3 in
            let a = Double(i) * 0.0628
            return Vector3(20 * _cosForTest(a), 20 * _sinForTest(a), -44) + offset
        }
        #expect(CalibrationFitter.fitSphere(circle) == .failure(.coplanarReadings))
        #expect(CalibrationFitter.fitEllipsoid(circle) == .failure(.coplanarReadings))
        // One-sided: readings from a 50-degree cap only.
        var rng = SeededGenerator(seed: 5)
        let cap = (0..<300).map { _ -> Vector3 in
            let polar = 50 * radiansPerDegree * rng.nextUniform().squareRoot()
            let az = rng.nextUniform() * 2 * Double.pi
            let d = Vector3(
                _sinForTest(polar) * _cosForTest(az), _sinForTest(polar) * _sinForTest(az), _cosForTest(polar))
            return d * 48 + offset + Vector3(rng.nextNormal(), rng.nextNormal(), rng.nextNormal()) * 0.5
        }
        for result in [CalibrationFitter.fitSphere(cap), CalibrationFitter.fitEllipsoid(cap)] {
            switch result {
            case .success(let fit): Issue.record("one-sided readings accepted: \(fit)")
            case .failure(let e):
                switch e {
                case .oneSided, .illConditioned, .notAnEllipsoid: break
                default: Issue.record("unexpected reason \(e)")
                }
                #expect(!e.description.isEmpty)
            }
        }
    }
}
