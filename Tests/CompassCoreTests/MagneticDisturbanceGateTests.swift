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
        heading: (Double) -> Double = { _ in 0 }, rotation: Double = 0
    ) -> [Verdict] {
        var out: [Verdict] = []
        for k in 0..<Int((seconds / dt).rounded()) {
            let t = start + Double(k) * dt
            gate.noteRotation(radians: rotation)
            let (use, flags) = gate.assess(
                strengthMicrotesla: strength(t), dipDegrees: dip(t), headingInnovation: heading(t) * radiansPerDegree,
                headingVariance: 1e-6, dt: dt)
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
}
