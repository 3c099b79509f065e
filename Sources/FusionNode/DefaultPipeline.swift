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

/// The built-in chain: simulated samples -> fusion filter -> one text line per update.
/// (The ZeroMQ pipeline replaces this chain as it lands.)
struct SimulatorFusionStage {
    var filter: any OrientationFilter

    mutating func update(_ sample: SimulatedSample) -> String? {
        let truth = sample.trueHeadingDegrees.map { fmt($0, 1) } ?? "nan"
        guard let o = filter.update(imu: sample.imu, magnetometer: sample.magnetometer) else { return nil }
        let heading = o.headingDegrees.map { fmt($0, 1) } ?? "none"
        let name = o.headingDegrees.flatMap { CardinalDirection.name(forHeadingDegrees: $0) } ?? "-"
        let accuracy = o.headingAccuracyDegrees.map { "+-" + fmt($0, 1) } ?? "+-?"
        let flags = o.flags.description
        return "t=\(fmt(o.timestamp, 2)) heading=\(heading) (\(name)) \(accuracy) truth=\(truth)" + (flags.isEmpty ? "" : " [\(flags)]")
    }
}
