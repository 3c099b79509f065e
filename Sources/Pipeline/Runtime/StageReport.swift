/// What a stage did, for the end-of-run report (stderr) and the tests.
public struct StageReport: Sendable, CustomStringConvertible {
    public var stage: String
    public var received = 0
    public var published = 0
    public var malformed = 0
    public var unexpected = 0
    public var dropped = 0
    public var notes: [String] = []
    public var description: String {
        "\(stage): received \(received), published \(published)"
            + (malformed > 0 ? ", malformed \(malformed)" : "") + (unexpected > 0 ? ", unexpected \(unexpected)" : "")
            + (dropped > 0 ? ", dropped \(dropped)" : "") + (notes.isEmpty ? "" : "; " + notes.joined(separator: "; "))
    }
}

/// Thrown inside a source to end it early (stop requested).
struct StopRequested: Error {}

/// Why a run could not start or finish.
public enum PipelineRunError: Error, CustomStringConvertible {
    case cannotBind(stage: String, endpoint: String, reason: String)
    case unknownStage(String, available: [String])
    case stageFailed(stage: String, reason: String)
    public var description: String {
        switch self {
        case .cannotBind(let s, let e, let r): return "stage '\(s)' cannot bind \(e): \(r)"
        case .unknownStage(let s, let a):
            return "no stage '\(s)' in the pipeline (stages: \(a.joined(separator: ", ")))"
        case .stageFailed(let s, let r): return "stage '\(s)' failed: \(r)"
        }
    }
}
