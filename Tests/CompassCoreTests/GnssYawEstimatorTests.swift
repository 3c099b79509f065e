import Testing
import Foundation
import CompassCore

@Suite("GNSS yaw hypotheses")
struct GnssYawEstimatorTests {
    /// A car on flat ground whose attitude filter has its heading `offsetDegrees` wrong (true minus
    /// the filter's, clockwise): the force it integrates is the true one turned back by that much.
    /// `accelerations` gives the true horizontal acceleration (east, north) at each time. Receiver at
    /// 10 Hz with `noise` m/s per axis. Returns the bank's offset (degrees) and 1-sigma (degrees) after
    /// each epoch.
    func drive(
        offsetDegrees: Double, seconds: Double, noise: Double = 0.08, seed: UInt64 = 1,
        acceleration: (Double) -> (Double, Double)
    ) -> [(time: Double, offset: Double, sigma: Double)] {
        var bank = GnssYawEstimator()
        var rng = SplitMix(seed: seed)
        let delta = offsetDegrees * radiansPerDegree
        var v = (0.0, 0.0)
        var integral = Vector3.zero
        var out: [(Double, Double, Double)] = []
        let dt = 0.01
        var t = 0.0
        bank.start(velocity: .zero, variance: noise * noise)
        for step in 1...Int(seconds / dt) {
            t = Double(step) * dt
            let (ax, ay) = acceleration(t)
            v.0 += ax * dt
            v.1 += ay * dt
            // The filter's earth frame is turned counter-clockwise by delta from the true one.
            let c = cos(delta), s = sin(delta)
            integral += Vector3(ax * c - ay * s, ax * s + ay * c, 9.81) * dt
            if step % 10 == 0 {
                let measured = Vector3(v.0 + noise * rng.gaussian(), v.1 + noise * rng.gaussian(), 0)
                bank.update(forceIntegral: integral, seconds: 0.1, velocity: measured, variance: noise * noise)
                integral = .zero
                let o = bank.offset!
                out.append((t, o.radians * degreesPerRadian, o.variance.squareRoot() * degreesPerRadian))
            }
        }
        return out
    }

    @Test("pulling away finds the heading, whatever the filter's heading was")
    func pullingAway() {
        for offset in [0.0, 37, 100, -150, 179] {
            // Standing 5 s, then 2 m/s^2 towards 30 degrees for 4 s, then cruising.
            let track = drive(offsetDegrees: offset, seconds: 20) { t in
                guard t >= 5 && t < 9 else { return (0, 0) }
                return (2 * sin(30 * radiansPerDegree), 2 * cos(30 * radiansPerDegree))
            }
            let standing = track.first { $0.time >= 4.9 }!
            #expect(standing.sigma > 60, "still: nothing to tell the headings apart: \(standing)")
            let end = track.last!
            let error = abs(wrappedRadians((end.offset - offset) * radiansPerDegree)) * degreesPerRadian
            #expect(error < 3 && end.sigma < 5, "offset \(offset): \(end)")
            #expect(error < 3 * end.sigma + 1, "honest: \(end)")
        }
    }

    @Test("a gentle start (0.4 m/s^2) and a turn at constant speed each find the heading")
    func gentleStartAndTurn() {
        let gentle = drive(offsetDegrees: -60, seconds: 20) { t in
            t >= 2 && t < 12 ? (0, 0.4) : (0, 0)
        }
        let g = gentle.last!
        #expect(abs(g.offset + 60) < 4 && g.sigma < 12, "\(g)")
        // Already at 10 m/s north (the bank started from that velocity), then a 20 deg/s turn for 4 s: the
        // centripetal acceleration is 3.5 m/s^2.
        let rate = 20 * radiansPerDegree
        var bank = GnssYawEstimator()
        bank.start(velocity: Vector3(0, 10, 0), variance: 0.01)
        var heading = 0.0, integral = Vector3.zero
        let delta = 135 * radiansPerDegree
        for step in 1...600 {
            let t = Double(step) * 0.01
            if t >= 1 && t < 5 { heading += rate * 0.01 }
            let turning = t >= 1 && t < 5
            // Centripetal: speed times rate, to the right of the direction of travel.
            let a = turning ? 10 * rate : 0
            let (ax, ay) = (a * cos(heading), -a * sin(heading))
            let c = cos(delta), s = sin(delta)
            integral += Vector3(ax * c - ay * s, ax * s + ay * c, 9.81) * 0.01
            if step % 10 == 0 {
                bank.update(
                    forceIntegral: integral, seconds: 0.1, velocity: Vector3(10 * sin(heading), 10 * cos(heading), 0),
                    variance: 0.01)
                integral = .zero
            }
        }
        let o = bank.offset!
        #expect(abs(o.radians * degreesPerRadian - 135) < 4 && o.variance.squareRoot() * degreesPerRadian < 6)
    }

    @Test("cruising straight at constant speed leaves every heading possible")
    func cruisingIsAmbiguous() {
        var bank = GnssYawEstimator()
        bank.start(velocity: Vector3(7, 7, 0), variance: 0.01)
        for _ in 0..<300 {
            bank.update(forceIntegral: Vector3(0, 0, 0.981), seconds: 0.1, velocity: Vector3(7, 7, 0), variance: 0.01)
        }
        #expect(bank.offset!.variance.squareRoot() * degreesPerRadian > 60)
        #expect(bank.largestWeight < 0.2)
    }
}

/// A small seeded generator for the tests' noise.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> Double {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return (Double(z >> 11) + 0.5) / Double(1 << 53)
    }
    mutating func gaussian() -> Double { (-2 * log(next())).squareRoot() * cos(2 * .pi * next()) }
}
