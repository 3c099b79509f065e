import Testing
import CompassCore
import IMUSimulator

/// A hand that turns the device every way for a minute (the readings cover the sphere).
func turningEveryWay(seed: UInt64, hardIron: Vector3, seconds: Double = 60) -> SimulationScenario {
    var s = SimulationScenario()
    s.seed = seed
    s.sampleRateHz = 50
    s.motion = [
        .rest(seconds: 2), .figureEight(seconds: seconds / 2), .turn(degreesPerSecond: 30, seconds: 6),
        .figureEight(seconds: seconds / 2 - 6),
    ]
    s.sensors.hardIronMicrotesla = hardIron
    s.sensors.magnetometerNoiseMicrotesla = 0.6
    return s
}

@Suite("Calibration that never makes the heading worse")
struct NeverWorseCalibrationTests {
    /// Runs the calibrator over a scenario; returns it and every fit it accepted.
    func run(_ s: SimulationScenario, initial: MagnetometerCalibration? = nil) -> (
        calibrator: OnlineCalibrator, accepted: [CalibrationFit]
    ) {
        var c = OnlineCalibrator(initial: initial)
        var accepted: [CalibrationFit] = []
        feed(&c, IMUSimulator.samples(s)) { _, fit, _ in if let fit { accepted.append(fit) } }
        return (c, accepted)
    }

    /// The true calibration of a scenario's sensor (no soft iron in these scenarios).
    func truth(_ s: SimulationScenario) -> MagnetometerCalibration {
        MagnetometerCalibration(
            hardIronOffsetMicrotesla: s.sensors.hardIronMicrotesla, fieldRadiusMicrotesla: s.earthFieldMicrotesla)
    }

    @Test("readings that are calibrated already are taken as they are, with the evidence for it")
    func calibratedReadingsAreTakenAsTheyAre() throws {
        for seed: UInt64 in [1, 2] {
            let r = run(turningEveryWay(seed: seed, hardIron: .zero))
            let cal = try #require(r.calibrator.calibration, "seed \(seed): no calibration")
            #expect(r.calibrator.state == .calibrated)
            #expect(r.calibrator.fit?.model == .asIs, "seed \(seed): \(String(describing: r.calibrator.fit))")
            #expect(cal.hardIronOffsetMicrotesla == .zero && cal.softIronCorrection == .identity)
            #expect(abs(cal.fieldRadiusMicrotesla - 48) < 1)
            // No fitted offset was applied on the way.
            for f in r.accepted { #expect(f.calibration.hardIronOffsetMicrotesla.norm <= 2, "\(f)") }
        }
    }

    @Test("hard iron well above the noise is still fitted: the readings as they come explain it worse")
    func hardIronIsStillFitted() throws {
        let s = turningEveryWay(seed: 3, hardIron: Vector3(12, -8, 15))
        let r = run(s)
        let cal = try #require(r.calibrator.calibration)
        #expect(r.calibrator.fit?.model != .asIs)
        #expect((cal.hardIronOffsetMicrotesla - s.sensors.hardIronMicrotesla).norm < 1.5, "\(cal)")
    }

    @Test("a magnet lying still, passed at 10, 20 and 30 cm, leaves the calibration in force unchanged")
    func stationaryMagnetLeavesTheCalibration() throws {
        var s = turningEveryWay(seed: 4, hardIron: Vector3(20, -15, 30), seconds: 80)
        s.worldFieldSources = [
            .magnetPass(
                closestSeconds: 12, distanceMeters: 0.1, speedMetersPerSecond: 1, momentAm2: Vector3(0.6, 0.5, -0.6)),
            .magnetPass(
                closestSeconds: 32, distanceMeters: 0.2, speedMetersPerSecond: 1, momentAm2: Vector3(-0.8, 0.2, 0.5)),
            .magnetPass(
                closestSeconds: 55, distanceMeters: 0.3, speedMetersPerSecond: 1, momentAm2: Vector3(0.3, -0.9, 0.3)),
        ]
        let initial = truth(s)
        let r = run(s, initial: initial)
        let cal = try #require(r.calibrator.calibration)
        #expect((cal.hardIronOffsetMicrotesla - initial.hardIronOffsetMicrotesla).norm < 0.5, "\(cal)")
        for f in r.accepted {
            #expect((f.calibration.hardIronOffsetMicrotesla - initial.hardIronOffsetMicrotesla).norm < 1, "\(f)")
        }
    }

    @Test("readings calibrated already stay as they are past a magnet lying still")
    func stationaryMagnetIsNotHardIron() throws {
        var s = turningEveryWay(seed: 5, hardIron: .zero, seconds: 80)
        s.worldFieldSources = [
            .magnetPass(
                closestSeconds: 20, distanceMeters: 0.15, speedMetersPerSecond: 1, momentAm2: Vector3(0.7, 0, 0.7)),
            .magnetPass(closestSeconds: 45, distanceMeters: 0.25, speedMetersPerSecond: 1, momentAm2: Vector3(0, 1, 0)),
        ]
        let r = run(s)
        let cal = try #require(r.calibrator.calibration)
        #expect(cal.hardIronOffsetMicrotesla.norm <= 1, "\(cal)")
        for f in r.accepted { #expect(f.calibration.hardIronOffsetMicrotesla.norm <= 2, "\(f)") }
    }

    /// Columns of a steel structure a metre or two away bend the field by a few microtesla (6 uT here:
    /// the calibration stays as it was); closer (12 uT), readings bent in step with the turning are
    /// partly taken in, by no more than what a fit resolves.
    @Test(
        "walking along a steel structure leaves the calibration in force unchanged", arguments: [(6.0, 0.5), (12, 2)])
    func steelStructureLeavesTheCalibration(amplitude: Double, tolerance: Double) throws {
        var s = turningEveryWay(seed: 6, hardIron: Vector3(-25, 10, 18), seconds: 80)
        s.worldFieldSources = [
            .steelStructure(
                startSeconds: 5, durationSeconds: 60, spacingMeters: 4, speedMetersPerSecond: 1.2,
                amplitudeMicrotesla: amplitude, direction: Vector3(0.6, 0.48, 0.64))
        ]
        let initial = truth(s)
        let r = run(s, initial: initial)
        let cal = try #require(r.calibrator.calibration)
        #expect((cal.hardIronOffsetMicrotesla - initial.hardIronOffsetMicrotesla).norm < tolerance, "\(cal)")
        for f in r.accepted {
            #expect(
                (f.calibration.hardIronOffsetMicrotesla - initial.hardIronOffsetMicrotesla).norm < tolerance, "\(f)")
        }
    }

    @Test("the simulator's magnet pass is a dipole: 190 uT at 10 cm, 7 uT at 30 cm for 1 A m^2")
    func magnetPassIsADipole() {
        func peak(_ d: Double) -> Double {
            WorldFieldSource.magnetPass(
                closestSeconds: 0, distanceMeters: d, speedMetersPerSecond: 1, momentAm2: Vector3(0, 0.95, 0)
            ).fieldMicrotesla(at: 0).norm
        }
        #expect(abs(peak(0.1) - 190) < 1 && abs(peak(0.3) - 7.04) < 0.1, "\(peak(0.1)) \(peak(0.3))")
    }
}
