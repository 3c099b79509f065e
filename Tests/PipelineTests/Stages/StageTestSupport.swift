import Foundation
import WireFormat
import MessageBus
@testable import Pipeline

/// A stage's logic built through the registry from a one-stage pipeline text (its settings
/// indented by four spaces), with a simulator as its input when it needs one.
func stageLogic(_ type: String, _ settings: String = "", log: @escaping @Sendable (String) -> Void = { _ in }) throws
    -> StageLogic
{
    let isSource = StageType.named(type)!.isSource
    let text =
        "stages:\n  up:\n    type: simulator\n  s:\n    type: \(type)\n" + (isSource ? "" : "    inputs: [up]\n")
        + settings
    return try PipelineConfig.parse(text, file: "t.yaml", environment: [:]).stage(named: "s")!.makeLogic(log: log)
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
