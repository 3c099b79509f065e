import Foundation
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
