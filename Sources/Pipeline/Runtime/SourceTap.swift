import CompassCore
import MessageBus
import WireFormat

/// One sample a tapped source gave, decoded: what a tool that is not a pipeline (the guided
/// calibration) needs from a live sensor.
public enum TappedSample: Sendable {
    /// Header stamp (s), angular velocity (rad/s), specific force (m/s^2).
    case imu(time: Double, rate: Vector3, specificForce: Vector3)
    /// Header stamp (s), field (microtesla).
    case magnetometer(time: Double, fieldMicrotesla: Vector3)
}

/// Runs one source stage of a pipeline file on the calling thread and hands its IMU and magnetometer
/// samples to a closure, without the rest of the graph: the same sources (`lines`, `ros2_source`,
/// `simulator`, `bag`) with the same settings and checks as in a pipeline.
public enum SourceTap {
    struct Stop: Error {}

    /// The source stages of `config`, by name.
    public static func sourceNames(_ config: PipelineConfig) -> [String] {
        config.stages.filter { $0.type.role == .source }.map(\.name)
    }

    /// Runs source `name` until it ends, `take` returns false, or `stop` is requested (Ctrl-C).
    /// Frames that do not decode are counted in the returned number and skipped.
    @discardableResult
    public static func run(
        _ config: PipelineConfig, source name: String, stop: StopToken, log: @escaping @Sendable (String) -> Void,
        take: (TappedSample) -> Bool
    ) throws -> Int {
        guard let stage = config.stage(named: name), stage.type.role == .source,
            let source = try stage.makeLogic(log: log, stop: stop) as? SourceLogic
        else { throw StageFailure("\(config.file): '\(name)' is not a source stage") }
        var undecodable = 0
        do {
            try source.run { frames in
                for frame in frames {
                    if stop.requested { throw Stop() }
                    let sample: TappedSample
                    switch frame.topic {
                    case PipelineTopics.imuRaw:
                        guard let m = try? imuSample(frame) else {
                            undecodable += 1
                            continue
                        }
                        sample = .imu(
                            time: m.header.stamp.seconds, rate: m.angularVelocity, specificForce: m.linearAcceleration)
                    case PipelineTopics.magnetometer:
                        guard let m = try? magneticSample(frame) else {
                            undecodable += 1
                            continue
                        }
                        sample = .magnetometer(time: m.header.stamp.seconds, fieldMicrotesla: m.field * 1e6)
                    default:
                        continue
                    }
                    if !take(sample) { throw Stop() }
                }
                return 0
            }
        } catch is Stop {}
        return undecodable
    }
}
