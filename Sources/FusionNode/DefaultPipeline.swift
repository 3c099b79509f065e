import CompassCore
import IMUSimulator

/// The built-in demonstration scenario: rest, a slow turn, the calibration figure-eight, walking,
/// a magnet held near the sensor, and some tilting, looping forever.
enum DefaultScenario {
    static func make(seed: UInt64) -> SimulationScenario {
        var s = SimulationScenario()
        s.seed = seed
        s.sampleRateHz = 100
        s.startHeadingDegrees = 30
        s.motion = [
            .rest(seconds: 3),
            .turn(degreesPerSecond: 45, seconds: 4),
            .moveTo(headingDegrees: 120, pitchDegrees: 20, rollDegrees: -15, seconds: 2),
            .rest(seconds: 2),
            .walking(seconds: 6, stepsPerSecond: 1.8),
            .figureEight(seconds: 8),
            .moveTo(headingDegrees: 30, pitchDegrees: 0, rollDegrees: 0, seconds: 2),
        ]
        s.disturbances = [ScheduledDisturbance(startSeconds: 16, durationSeconds: 3,
                                               fieldMicrotesla: Vector3(20, 0, 0), frame: .world)]
        return s
    }
}

/// The first, simplest honest stage chain: raw samples -> tilt-compensated compass -> text line.
/// (The fusion filters and the ZeroMQ pipeline replace this chain as they land.)
struct SimulatorCompassStage {
    mutating func update(_ sample: SimulatedSample) -> String? {
        let truth = sample.trueHeadingDegrees.map { fmt($0, 1) } ?? "nan"
        switch TiltCompensatedCompass.reading(field: sample.magnetometer.fieldMicrotesla,
                                              specificForce: sample.imu.specificForce) {
        case .success(let r):
            let name = CardinalDirection.name(forHeadingDegrees: r.headingDegrees) ?? "?"
            return "t=\(fmt(sample.imu.timestamp, 2)) heading=\(fmt(r.headingDegrees, 1)) (\(name)) truth=\(truth)"
                + " dip=\(fmt(r.dipDegrees, 1)) field=\(fmt(r.fieldStrength, 1))uT"
        case .failure(let e):
            return "t=\(fmt(sample.imu.timestamp, 2)) heading=none (\(e)) truth=\(truth)"
        }
    }
}

/// Fixed-point formatting without Foundation.
func fmt(_ x: Double, _ decimals: Int) -> String {
    guard x.isFinite else { return "nan" }
    var p = 1.0
    for _ in 0..<decimals { p *= 10 }
    let r = (abs(x) * p).rounded()
    let whole = Int(r / p)
    var frac = String(Int(r.truncatingRemainder(dividingBy: p)))
    while frac.count < decimals { frac = "0" + frac }
    return (x < 0 && r != 0 ? "-" : "") + String(whole) + (decimals > 0 ? "." + frac : "")
}
