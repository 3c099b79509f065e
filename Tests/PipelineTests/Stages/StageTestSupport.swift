import Foundation
import CompassCore
import IMUSimulator
import WireFormat
import MessageBus
@testable import Pipeline

/// A stage's logic built through the registry from a pipeline text (its settings indented by four
/// spaces): a transform reads a simulator, a sink reads fusion (so every pipeline topic is upstream).
func stageLogic(
    _ type: String, _ settings: String = "", output: OutputAfterRestart = .firstRun,
    log: @escaping @Sendable (String) -> Void = { _ in }
) throws -> StageLogic {
    try PipelineConfig.parse(stageTestPipeline(type, settings), file: "t.yaml", environment: [:]).stage(named: "s")!
        .makeLogic(log: log, output: output)
}

/// The pipeline text `stageLogic` builds its stage from; the stage's own lines start at line 8.
func stageTestPipeline(_ type: String, _ settings: String) -> String {
    let role = StageType.named(type)!.role
    let input = role == .sink ? "    inputs: [f]\n" : role == .transform ? "    inputs: [up]\n" : ""
    return "stages:\n  up:\n    type: simulator\n  f:\n    type: fusion\n    inputs: [up]\n  s:\n    type: \(type)\n"
        + input + settings
}

/// Every frame a source emits until its end.
func emitted(by source: SourceLogic) throws -> [WireFrame] {
    var frames: [WireFrame] = []
    try source.run {
        frames += $0
        return 0
    }
    return frames
}

/// Frames through a transform or sink's general path, then its finish.
func processed(_ frames: [WireFrame], by stage: TransformLogic) throws -> [WireFrame] {
    var out: [WireFrame] = []
    for f in frames { try stage.process(f, into: &out) }
    return out + (try stage.finish())
}

func temporaryPath(_ name: String) -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("gc-\(UUID().uuidString)-\(name)").path
}

/// The settings a type needs before it loads: its required ones, and those its own check asks for
/// (a csv stage needs one of its paths), as paths in a temporary directory.
func minimalSettings(_ type: StageType) -> String {
    let required = type.settings.filter { $0.defaultValue == nil }.map(\.name) + (type.name == "csv" ? ["path"] : [])
    return required.map { "    \($0): \(temporaryPath($0))\n" }.joined()
}

/// The heading error (degrees) of every `heading` frame from `from` seconds on against the simulator's
/// truth for `scenario` (its first `count` samples), with the frame's reported 95 % bound.
func headingErrors(_ frames: [WireFrame], scenario: SimulationScenario, count: Int, from: Double) throws -> [(
    error: Double, bound: Double
)] {
    var truth: [Quaternion] = []
    var simulator = IMUSimulator(scenario: scenario)
    while truth.count < count, let x = simulator.next() { truth.append(x.trueOrientation) }
    var errors: [(error: Double, bound: Double)] = []
    for f in frames where f.topic == PipelineTopics.heading {
        let h = try HeadingMessage(cdrBytes: f.payload)
        let t = h.header.stamp.seconds - scenario.startTime
        let i = Int((t * scenario.sampleRateHz).rounded())
        guard t >= from, i < truth.count else { continue }
        let e = (h.orientation.normalized * truth[i].normalized.conjugate).normalized
        errors.append((2 * atan2(abs(e.z), abs(e.w)) * degreesPerRadian, h.headingAccuracy))
    }
    return errors
}

/// Heading RMSE in degrees of the `heading` frames from `from` seconds on (see `headingErrors`).
func headingRMSE(_ frames: [WireFrame], scenario: SimulationScenario, count: Int, from: Double) throws -> Double {
    headingRMSE(try headingErrors(frames, scenario: scenario, count: count, from: from))
}

/// RMSE of `headingErrors`, degrees.
func headingRMSE(_ errors: [(error: Double, bound: Double)]) -> Double {
    (errors.reduce(0.0) { $0 + $1.error * $1.error } / Double(max(1, errors.count))).squareRoot()
}

/// Share of `headingErrors` within their reported 95 % bound (a bound that is not finite covers
/// everything).
func boundCoverage(_ errors: [(error: Double, bound: Double)]) -> Double {
    let covered = errors.filter { !$0.bound.isFinite || $0.error <= $0.bound }.count
    return Double(covered) / Double(max(1, errors.count))
}
