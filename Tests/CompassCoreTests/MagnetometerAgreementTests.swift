import Testing
import CompassCore

@Suite("Several magnetometers judged against each other")
struct MagnetometerAgreementTests {
    let degree = radiansPerDegree

    /// Feeds `seconds` of readings at 100 Hz, each magnetometer at its innovation (degrees); returns
    /// whether each one's last reading was used.
    func feed(
        _ agreement: inout MagnetometerAgreement, innovations: [Double], deviations: [Double]? = nil,
        gates: [Bool]? = nil, from start: Double = 0, seconds: Double = 3
    ) -> [Bool] {
        var used = Array(repeating: false, count: innovations.count)
        var t = start
        while t < start + seconds {
            for i in innovations.indices {
                used[i] = agreement.assess(
                    i, innovation: innovations[i] * degree, gyroDeviation: (deviations?[i] ?? 0) * degree,
                    gateAccepts: gates?[i] ?? true, calibrated: true, dt: 0.01, at: t)
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
}
