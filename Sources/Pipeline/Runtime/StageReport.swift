/// What a stage did, for the end-of-run report (stderr) and the tests.
/// One vocabulary for every stage: "received" counts frames read from the stage's inputs,
/// "published" frames it published on the bus to the stages reading it (sources and transforms only;
/// a sink's notes say what it wrote or sent), "malformed" and "unexpected" frames it refused.
public struct StageReport: Sendable, CustomStringConvertible {
    public var stage: String
    /// The stage's role, which decides which counts are meaningful.
    public var role: StageRole = .transform
    public var received = 0
    public var published = 0
    public var malformed = 0
    public var unexpected = 0
    public var dropped = 0
    /// Data skipped or lost (refused frames, undecodable messages, damage read past).
    public var losses = 0
    /// Causes found that make the stage's output wrong (named in its notes), without loss.
    public var knownWrong = 0
    public var notes: [String] = []

    /// How a calibration stage's note says why it accepted no fit: this, then the reason.
    public static let noCalibrationFitPrefix = "no fit accepted: "
    /// The reason a calibration stage gave for accepting no fit; nil when its notes give none.
    public var noCalibrationFitReason: String? {
        notes.first { $0.hasPrefix(Self.noCalibrationFitPrefix) }.map {
            String($0.dropFirst(Self.noCalibrationFitPrefix.count))
        }
    }

    public init(stage: String, role: StageRole = .transform) {
        self.stage = stage
        self.role = role
    }

    public var description: String {
        var counts: [String] = []
        if role != .source { counts.append("received \(received)") }
        if role != .sink { counts.append("published \(published)") }
        if malformed > 0 { counts.append("malformed \(malformed)") }
        if unexpected > 0 { counts.append("unexpected \(unexpected)") }
        if dropped > 0 { counts.append("dropped \(dropped)") }
        return "\(stage): " + counts.joined(separator: ", ")
            + (notes.isEmpty ? "" : "; " + notes.joined(separator: "; "))
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
        case .stageFailed(let s, let r): return "stage '\(s)': \(r)"
        }
    }
}

/// Why a stage could not start or go on, in the user's words; the runner adds the stage's name.
struct StageFailure: Error, CustomStringConvertible {
    let reason: String
    init(_ reason: String) { self.reason = reason }
    var description: String { reason }
}
