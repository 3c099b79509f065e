import Testing
import CompassCore
import IMUSimulator

@Suite("Guided calibration")
struct CalibrationGuideTests {
    /// Readings of a 48 uT field seen along `count` random directions, with a hard iron and noise.
    func readings(count: Int, upperOnly: Bool, seed: UInt64) -> [Vector3] {
        var rng = SeededGenerator(seed: seed)
        let hard = Vector3(30, -20, 10)
        return (0..<count).map { _ in
            var d = Vector3(rng.nextNormal(), rng.nextNormal(), rng.nextNormal()).normalized!
            if upperOnly && d.z < 0 { d = Vector3(d.x, d.y, -d.z) }
            return hard + d * 48 + Vector3(rng.nextNormal(), rng.nextNormal(), rng.nextNormal()) * 0.3
        }
    }

    @Test("half the sphere: not complete, the missing side named; the whole sphere: the fit passes")
    func coverageDecides() throws {
        var half = CalibrationGuide()
        for (i, r) in readings(count: 3000, upperOnly: true, seed: 1).enumerated() {
            #expect(half.add(r, time: Double(i) * 0.01) == nil)
        }
        #expect(!half.isComplete && half.coverage < 0.75 && half.progressPercent < 85)
        #expect(half.missingAxes.first == "-z")
        var whole = CalibrationGuide()
        var done: CalibrationFit?
        for (i, r) in readings(count: 3000, upperOnly: false, seed: 2).enumerated() where done == nil {
            done = whole.add(r, time: Double(i) * 0.01)
        }
        let fit = try #require(done)
        #expect(whole.progressPercent == 100 && whole.missingAxes.count <= 3)
        #expect((fit.calibration.hardIronOffsetMicrotesla - Vector3(30, -20, 10)).norm < 0.2)
    }

    @Test("the expected strength and the fit level are limits: a field 30 % off the model's is refused")
    func limitsRefuse() {
        var settings = CalibrationGuideSettings()
        settings.expectedStrengthMicrotesla = 48 / 1.3
        var guide = CalibrationGuide(settings: settings)
        for (i, r) in readings(count: 3000, upperOnly: false, seed: 3).enumerated() {
            _ = guide.add(r, time: Double(i) * 0.01)
        }
        #expect(!guide.isComplete)
        let refusal = String(describing: guide.latest?.refusal)
        guard case .radius(let radius, let plausible)? = guide.latest?.refusal else {
            Issue.record("a field 30 % off the model's must be refused for its strength: \(refusal)")
            return
        }
        #expect(!plausible.contains(radius))
        settings.expectedStrengthMicrotesla = nil
        settings.fitLevel = .strict
        var noisy = CalibrationGuide(settings: settings)
        for (i, r) in readings(count: 3000, upperOnly: false, seed: 4).enumerated() {
            _ = noisy.add(r + Vector3(0, 0, Double(i % 7) - 3), time: Double(i) * 0.01)
        }
        #expect(!noisy.isComplete)
        guard case .residual(let rms, let limit)? = noisy.latest?.refusal else {
            Issue.record("a noisy field must be refused for its residual: \(String(describing: noisy.latest?.refusal))")
            return
        }
        #expect(rms > limit && limit == CalibrationFitLevel.strict.maximumResidualMicrotesla)
    }
}

@Test("a calibration turned into body axes gives the body-axes field of the turned reading")
func calibrationTurnedByMounting() {
    let cal = MagnetometerCalibration(
        hardIronOffsetMicrotesla: Vector3(20, -5, 11),
        softIronCorrection: Matrix3(1.1, 0.02, 0, 0.02, 0.9, 0.01, 0, 0.01, 1),
        fieldRadiusMicrotesla: 48)
    let r = MountingRotation.parse("roll_180_yaw_90")!.matrix
    let turned = cal.turned(by: r)
    for raw in [Vector3(30, 10, -40), Vector3(-12, 44, 3), Vector3(0, 0, 50)] {
        #expect((turned.apply(r * raw) - r * cal.apply(raw)).norm < 1e-9)
    }
    #expect(turned.fieldRadiusMicrotesla == 48)
}
