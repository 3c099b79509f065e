import Testing
import CompassCore

@Suite("Several magnetometers judged against each other")
struct MagnetometerAgreementTests {
    let degree = radiansPerDegree

    /// Feeds `seconds` of readings at 100 Hz, each magnetometer at its innovation (degrees); returns
    /// whether each one's last reading was used.
    func feed(
        _ agreement: inout MagnetometerAgreement, innovations: [Double], deviations: [Double]? = nil,
        gates: [Bool]? = nil, strengths: [Double]? = nil, dips: [Double]? = nil, references: [Double]? = nil,
        from start: Double = 0, seconds: Double = 3
    ) -> [Bool] {
        var used = Array(repeating: false, count: innovations.count)
        var t = start
        while t < start + seconds {
            for i in innovations.indices {
                used[i] = agreement.assess(
                    i, innovation: innovations[i] * degree, gyroDeviation: (deviations?[i] ?? 0) * degree,
                    gateAccepts: gates?[i] ?? true, calibrated: true, dt: 0.01, at: t,
                    strengthMicrotesla: strengths?[i] ?? .nan, dipDegrees: dips?[i] ?? .nan,
                    referenceStrengthMicrotesla: references?[i])
            }
            t += 0.01
        }
        return used
    }

    @Test("three magnetometers: the one away from the median is outvoted, and taken back once it agrees")
    func threeOutvoteOne() {
        var a = MagnetometerAgreement(names: ["a", "b", "c"])
        #expect(feed(&a, innovations: [0.5, -0.5, 0]) == [true, true, true])
        #expect(feed(&a, innovations: [0.5, -0.5, 8], from: 3) == [true, true, false])
        #expect(a.health[2].isOutvoted && a.health[2].outvoted > 0)
        // Back within the limit but not within half of it: still out (hysteresis).
        #expect(feed(&a, innovations: [0.5, -0.5, 2.5], from: 6) == [true, true, false])
        #expect(feed(&a, innovations: [0.5, -0.5, 0.5], from: 9) == [true, true, true])
        #expect(a.health[2].changes == 2)
    }

    @Test("two magnetometers: the one that turned against the gyro is outvoted, and stays the suspect")
    func twoDecideByTheGyro() {
        var a = MagnetometerAgreement(names: ["primary", "mast"])
        _ = feed(&a, innovations: [0, 0])
        // A magnet at the primary: its compass turns against the gyro (deviation 6 deg), the mast's not.
        #expect(feed(&a, innovations: [6, -1], deviations: [6, 0.2], from: 3) == [false, true])
        #expect(a.health[0].isOutvoted && !a.health[1].isOutvoted)
        // Later the primary's gate has taken the magnet's field as normal (its deviation back near 0, the
        // mast's a little above it): the primary stays the suspect while the two disagree.
        #expect(feed(&a, innovations: [6, -1], deviations: [0.1, 0.5], from: 6) == [false, true])
        #expect(a.health[1].outvoted == 0)
    }

    @Test("a magnetometer its own gate rejects has no vote; alone, nobody is outvoted")
    func rejectedHasNoVote() {
        var a = MagnetometerAgreement(names: ["a", "b"])
        #expect(feed(&a, innovations: [0, 9], gates: [false, true]) == [false, true])
        #expect(a.health[0].rejectedByGate == a.health[0].readings && a.health[1].outvoted == 0)
    }

    @Test("a magnetometer gone quiet has no say after staleSeconds")
    func staleHasNoSay() {
        var a = MagnetometerAgreement(names: ["a", "b", "c"])
        _ = feed(&a, innovations: [0, 0, 0])
        // b and c stop; a alone moves away: without voters there is nobody to outvote it.
        #expect(feed(&a, innovations: [9], from: 3) == [true])
        #expect(!a.health[0].isOutvoted)
    }

    @Test("a field that agrees in heading but not in dip is outvoted, and taken back once it agrees")
    func dipDisagreement() {
        var a = MagnetometerAgreement(names: ["a", "b", "c"])
        #expect(feed(&a, innovations: [0, 0, 0], dips: [66, 67, 66.5]) == [true, true, true])
        // A magnet straight above c: its heading stands, its field dips 8 degrees less.
        #expect(feed(&a, innovations: [0, 0, 0], dips: [66, 67, 58.5], from: 3) == [true, true, false])
        #expect(a.health[2].isOutvoted && a.health[2].disagreement == .dip)
        #expect(feed(&a, innovations: [0, 0, 0], dips: [66, 67, 66], from: 6) == [true, true, true])
    }

    @Test("strength is compared as a share of each sensor's own radius, so gains may differ")
    func strengthShares() {
        var a = MagnetometerAgreement(names: ["a", "b", "c"])
        // Three sensors whose fits have radii 50, 35 and 60 uT: each at its radius agrees.
        a.noteCalibration(0, radiusMicrotesla: 50)
        a.noteCalibration(1, radiusMicrotesla: 35)
        a.noteCalibration(2, radiusMicrotesla: 60)
        #expect(feed(&a, innovations: [0, 0, 0], strengths: [50, 35, 60]) == [true, true, true])
        // Steel next to b adds 20 % to its field without turning it.
        #expect(feed(&a, innovations: [0, 0, 0], strengths: [50, 42, 60], from: 3) == [true, false, true])
        #expect(a.health[1].disagreement == .strength)
        #expect(abs(a.health[1].averagedStrengthShare - 1.2) < 0.01)
    }

    @Test("without a calibration radius the share is taken of the gate's first reference strength")
    func strengthFromTheGate() {
        var a = MagnetometerAgreement(names: ["a", "b"])
        _ = feed(&a, innovations: [0, 0], strengths: [48, 48], references: [48, 48])
        // The first sensor's gate later adopts a magnet's field as its new reference: its share is still
        // taken of the field it had first, and of two it is the one left out, being further from its
        // radius, even though the other turned more against the gyro.
        #expect(
            feed(
                &a, innovations: [0, 0], deviations: [0, 1], strengths: [60, 48], references: [60, 48], from: 3)
                == [false, true])
        #expect(a.health[0].disagreement == .strength)
    }
}
