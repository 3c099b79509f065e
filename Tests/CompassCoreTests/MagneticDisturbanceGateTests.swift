import Testing
import Foundation
@testable import CompassCore

/// The disturbance gate on its own, fed synthetic sequences at 100 Hz: a reference field of 50 uT at a
/// dip of 60 degrees, with the compass-minus-gyro heading given directly as the innovation (no filter
/// corrections applied). Each test states the physics it checks.
@Suite("Magnetic disturbance gate")
struct MagneticDisturbanceGateTests {
    static let dt = 0.01

    /// One reading's verdict, at `t` seconds.
    struct Verdict {
        let t: Double
        let use: Bool
        let flags: FusionFlags
    }

    /// Whether every verdict satisfies `p` (`allSatisfy` rethrows, which `#expect` does not take).
    static func all(_ v: [Verdict], _ p: (Verdict) -> Bool) -> Bool {
        for x in v where !p(x) { return false }
        return true
    }

    static func gate(_ adjust: (inout MagneticGateSettings) -> Void = { _ in }) -> MagneticDisturbanceGate {
        var settings = MagneticGateSettings()
        settings.referenceFieldMicrotesla = 50
        settings.referenceDipDegrees = 60
        adjust(&settings)
        return MagneticDisturbanceGate(settings: settings)
    }

    /// Feeds `seconds` of readings; the closures give strength (uT), dip (deg) and the compass-minus-gyro
    /// heading (deg) at time t, and the gyro's rotation per step (rad).
    static func feed(
        _ gate: inout MagneticDisturbanceGate, from start: Double = 0, seconds: Double,
        strength: (Double) -> Double = { _ in 50 }, dip: (Double) -> Double = { _ in 60 },
        heading: (Double) -> Double = { _ in 0 }, rotation: Double = 0, verticalBiasSigma: Double = 0,
        tiltSigma: Double = 0
    ) -> [Verdict] {
        var out: [Verdict] = []
        for k in 0..<Int((seconds / dt).rounded()) {
            let t = start + Double(k) * dt
            gate.noteRotation(radians: rotation)
            let (use, flags) = gate.assess(
                strengthMicrotesla: strength(t), dipDegrees: dip(t), headingInnovation: heading(t) * radiansPerDegree,
                headingVariance: 1e-6, verticalBiasSigma: verticalBiasSigma, tiltSigma: tiltSigma, dt: dt)
            if use { gate.noteApplied() }
            out.append(Verdict(t: t, use: use, flags: flags))
        }
        return out
    }

    @Test("without a reference it learns one from the first second of readings and uses them meanwhile")
    func learnsTheReference() {
        var g = MagneticDisturbanceGate()
        #expect(g.isLearning)
        let v = Self.feed(&g, seconds: 1.5, strength: { 44 + sin($0 * 40) }, dip: { _ in 62 })
        #expect(!g.isLearning && Self.all(v) { $0.use })
        #expect(abs(g.referenceFieldMicrotesla! - 44) < 0.1 && abs(g.referenceDipDegrees! - 62) < 1e-9)
    }

    @Test("a steady field passes every reading, noise of a consumer sensor included")
    func steadyFieldPasses() {
        var g = Self.gate()
        var noise = SystemRandomNumberGenerator()
        let v = Self.feed(
            &g, seconds: 60, strength: { _ in 50 + Double.random(in: -0.8...0.8, using: &noise) },
            dip: { _ in 60 + Double.random(in: -1...1, using: &noise) })
        #expect(Self.all(v) { $0.use })
    }

    @Test("a magnet raising the strength by 16 % is rejected within half a second and used again after it goes")
    func strengthStep() {
        var g = Self.gate()
        let v = Self.feed(&g, seconds: 10, strength: { $0 >= 2 && $0 < 5 ? 58 : 50 })
        let rejected = v.filter { !$0.use }
        #expect(rejected.first.map { $0.t >= 2 && $0.t < 2.5 } == true, "\(rejected.first?.t ?? -1)")
        // While the magnet is there the reason is the strength; the last 0.5 s of rejection (every check
        // passing again, the recovery time) carry no reason.
        #expect(Self.all(rejected) { $0.t >= 5 || $0.flags.contains(.magneticStrengthDisturbed) })
        #expect(Self.all(rejected) { $0.flags.contains(.magnetometerRejected) })
        // The low-pass settles, then every check must pass for 0.5 s.
        #expect(rejected.last.map { $0.t > 5.3 && $0.t < 6.5 } == true, "\(rejected.last?.t ?? -1)")
        #expect(Self.all(v) { $0.t <= 6.5 || $0.use })
    }

    @Test("steel tilting the field by 8 degrees of dip is rejected with the dip as its reason")
    func dipStep() {
        var g = Self.gate()
        let v = Self.feed(&g, seconds: 6, dip: { $0 >= 2 ? 68 : 60 })
        let rejected = v.filter { !$0.use }
        #expect(!rejected.isEmpty && Self.all(rejected) { $0.flags.contains(.magneticDipDisturbed) })
        #expect(Self.all(rejected) { !$0.flags.contains(.magneticStrengthDisturbed) })
    }

    @Test("a compass that turns 20 degrees while the gyro says still is rejected as inconsistent with the gyro")
    func headingStepWithoutRotation() {
        var g = Self.gate { $0.startupSeconds = 0 }
        let v = Self.feed(&g, seconds: 8, heading: { $0 >= 4 ? 20 : 0 })
        let rejected = v.filter { !$0.use }
        #expect(rejected.first.map { $0.t >= 4 && $0.t < 5 } == true, "\(rejected.first?.t ?? -1)")
        #expect(Self.all(rejected) { $0.flags.contains(.magneticGyroInconsistent) })
        #expect(Self.all(v) { $0.t >= 4 || $0.use })
    }

    @Test("gyro drift of 0.2 deg/s moves the compass-minus-gyro heading slowly: never rejected")
    func slowDriftPasses() {
        var g = Self.gate { $0.startupSeconds = 0 }
        let v = Self.feed(&g, seconds: 120, heading: { 0.2 * $0 })
        #expect(Self.all(v) { $0.use })
    }

    @Test("a steady new field (a building's, or a calibration the gate was not told of) becomes the reference")
    func newFieldAdopted() {
        var g = Self.gate()
        let v = Self.feed(&g, seconds: 30, strength: { $0 >= 2 ? 57 : 50 })
        let adopted = v.first { $0.flags.contains(.magneticReferenceChanged) }
        // newFieldSeconds (20 s) after the change was first seen, then used.
        #expect(adopted.map { $0.t > 21 && $0.t < 23 } == true, "\(adopted?.t ?? -1)")
        #expect(abs(g.referenceFieldMicrotesla! - 57) < 0.5)
        #expect(Self.all(v) { $0.t <= 24 || $0.use })
    }

    @Test("a gyro drifting within its stated bias uncertainty while a magnet is rejected is used again after it")
    func driftDuringARejectionIsNotLockedIn() {
        // A magnet raises the strength from 5 to 25 s, while the gyro drifts 1 deg/s against a bias
        // uncertainty of 0.5 deg/s (1 sigma): the frozen baseline falls 20 degrees behind. With the
        // allowance for the time it stood frozen (3 x 0.5 x (8 + 20) = 42 degrees) the compass is used
        // again once the magnet has gone; without it (12 degrees) it never would be.
        func run(biasSigma: Double) -> [Verdict] {
            var g = Self.gate { $0.startupSeconds = 0 }
            return Self.feed(
                &g, seconds: 60, strength: { $0 >= 5 && $0 < 25 ? 58 : 50 }, heading: { 1.0 * $0 },
                verticalBiasSigma: biasSigma * radiansPerDegree)
        }
        let v = run(biasSigma: 0.5)
        #expect(Self.all(v) { $0.t < 5.5 || $0.t > 25 || !$0.use })
        #expect(Self.all(v) { $0.t < 27 || $0.use })
        // A bias the filter is sure of (0.05 deg/s) does not explain 20 degrees: that stays out.
        #expect(Self.all(run(biasSigma: 0.05)) { $0.t < 27 || !$0.use })
    }

    @Test("a disturbance that turns the compass by 20 degrees and stays is kept out by a sure gyro")
    func stepStaysRejected() {
        // A bias uncertainty of 0.02 deg/s widens the allowance by 0.06 degrees per second of rejection:
        // the 16 degrees beyond the floor are not reached within the run.
        var g = Self.gate { $0.startupSeconds = 0 }
        let v = Self.feed(&g, seconds: 40, heading: { $0 >= 4 ? 20 : 0 }, verticalBiasSigma: 0.02 * radiansPerDegree)
        #expect(!v.contains { $0.flags.contains(.magneticReferenceChanged) })
        #expect(Self.all(v) { $0.t < 5 || !$0.use })
    }

    @Test("a reference learned low in a walker's swing of the field is renewed to the field's average")
    func learnedReferenceFollowsTheAverage() {
        // The first second reads 30 uT; afterwards the field swings 44 +- 10 uT once a second (a phone in a
        // swinging hand). Judged on the 0.25-s low-pass (+-12 %) it is never steady and the 30 uT would stay;
        // on the 3-s average (+-0.5 uT) it is steady, and 44 becomes the reference.
        var g = MagneticDisturbanceGate()
        _ = Self.feed(&g, seconds: 60, strength: { $0 < 1 ? 30 : 44 + 10 * sin(2 * .pi * $0) }, dip: { _ in 60 })
        #expect(g.referenceFieldMicrotesla.map { abs($0 - 44) < 2 } == true, "\(g.referenceFieldMicrotesla ?? 0)")
        // A reference given (the World Magnetic Model's) stays what it is.
        var given = Self.gate()
        _ = Self.feed(&given, seconds: 60, strength: { 44 + 10 * sin(2 * .pi * $0) })
        #expect(given.referenceFieldMicrotesla == 50)
    }

    @Test("the dip tolerance widens by three sigma of the filter's tilt uncertainty")
    func dipToleranceFollowsTheTilt() {
        var sure = Self.gate()
        let rejected = Self.feed(&sure, seconds: 3, dip: { _ in 67 })
        #expect(rejected.contains { $0.flags.contains(.magneticDipDisturbed) })
        // 3 x 2 degrees with 5 degrees: sqrt(25 + 36) = 7.8 degrees.
        var unsure = Self.gate()
        let passed = Self.feed(&unsure, seconds: 3, dip: { _ in 67 }, tiltSigma: 2 * radiansPerDegree)
        #expect(Self.all(passed) { $0.use })
    }
}
