import Testing
import IMUSimulator
@testable import CompassCore

/// The bound uncalibrated readings earn from their own strength as the device turns: a hand-held
/// device yawing back and forth (a 20-s sway) with a little tilt, readings every 0.1 s with 0.2 uT
/// of noise, in the test earth field (48 uT, dip 66 degrees).
@Suite("Uncalibrated heading evidence")
struct UncalibratedHeadingEvidenceTests {
    /// Feeds `seconds` of readings with hard iron `offset` (uT) and a sway of `swayDegrees` about
    /// heading 30; returns the final bound and the raw compass's heading error there, both degrees.
    static func run(
        offset: Vector3, swayDegrees: Double, seconds: Double = 120, earthField: Vector3 = testEarthField
    ) -> (bound: Double, error: Double) {
        var evidence = UncalibratedHeadingEvidence()
        var noise = SeededGenerator(seed: 7)
        var rotation = Matrix3.identity, reading = Vector3.zero
        for k in 0...Int(seconds * 10) {
            let t = Double(k) * 0.1
            let heading = 30 + swayDegrees * _sinForTest(2 * Double.pi * t / 20)
            let q = Quaternion(
                headingDegrees: heading, pitchDegrees: 5 * _sinForTest(t / 3), rollDegrees: 4 * _cosForTest(t / 4))
            rotation = q.rotationMatrix
            let n = Vector3(noise.nextNormal(), noise.nextNormal(), noise.nextNormal()) * 0.2
            reading = q.inverseRotate(earthField) + offset + n
            evidence.add(reading, rotation: rotation, at: t)
        }
        let raw = rotation * reading
        let error = abs(atan2Small(raw.x, raw.y)) * degreesPerRadian
        return (evidence.headingBoundRadians(eastRow: rotation.row0) * degreesPerRadian, error)
    }

    @Test("a clean sensor that sways earns a finite bound")
    func cleanSensorThatSways() {
        let r = Self.run(offset: .zero, swayDegrees: 40)
        #expect(r.bound < 10, "bound \(r.bound)")
        #expect(r.bound >= r.error)
    }

    @Test("an offset of a few microtesla is counted: the bound covers the error it causes")
    func smallOffsetIsCovered() {
        let r = Self.run(offset: Vector3(6, -4, 3), swayDegrees: 40)
        #expect(r.error > 5, "the offset turns the raw compass by \(r.error)")
        #expect(r.bound >= r.error && r.bound < 60, "bound \(r.bound), error \(r.error)")
    }

    @Test("a device that never turns earns nothing")
    func stillDeviceEarnsNothing() {
        let r = Self.run(offset: .zero, swayDegrees: 0)
        #expect(r.bound == 180)
    }

    @Test("readings carrying a phone's hard iron earn nothing, however the device turns")
    func largeHardIronEarnsNothing() {
        #expect(Self.run(offset: Vector3(250, -300, 120), swayDegrees: 90).bound == 180)
    }

    @Test("too few readings earn nothing")
    func tooFewReadings() {
        #expect(Self.run(offset: .zero, swayDegrees: 40, seconds: 4).bound == 180)
    }

    @Test("forgetting starts over")
    func resetForgets() {
        var evidence = UncalibratedHeadingEvidence()
        for k in 0..<100 {
            let q = Quaternion(headingDegrees: Double(k) * 3, pitchDegrees: 0, rollDegrees: 0)
            evidence.add(q.inverseRotate(testEarthField), rotation: q.rotationMatrix, at: Double(k))
        }
        #expect(evidence.headingBoundRadians(eastRow: Vector3(1, 0, 0)) < 0.2)
        evidence.reset()
        #expect(evidence.headingBoundRadians(eastRow: Vector3(1, 0, 0)) == .pi)
    }
}
