import CompassCore
import WireFormat
import MessageBus

/// What every stage's logic has: notes for the end-of-run report. A stage's logic never sees
/// ZeroMQ: it receives frames and emits frames; the runtime (`StageActor`) owns sockets, batching,
/// back-pressure, reader counting and end of stream. Each logic lives on its stage's thread only.
class StageLogic: @unchecked Sendable {
    var notes: [String] = []
    /// Data the stage skipped or could not read (undecodable messages, damage read past), for the
    /// report and the exit code; frames the runtime refused are counted there.
    var losses = 0
    /// Causes found that make the output wrong, each named in a note (a magnetometer mounted otherwise
    /// than given): the run ends with exit 4 unless loss makes it 3.
    var knownWrong = 0
    /// False when an input ended on a failure upstream, or never ended (a stop that went unanswered):
    /// what the stage received is not the whole stream, and a sink must not present it as complete.
    /// Set before `finish`.
    var inputsComplete = true
}

/// A source: drives the stream, handing frames to `emit` (which applies back-pressure and returns
/// the seconds it waited for a missing reader, which wall-clock pacing leaves out).
protocol SourceLogic: StageLogic {
    func run(emit: ([WireFrame]) throws -> Double) throws
    /// Whether the stream waits while a stage reading it is gone (`pause_without_subscribers`).
    var pausesWithoutSubscribers: Bool { get }
}

/// A transform: turns each input frame into output frames, appended to `output` (one buffer per
/// drained batch, not an array per frame). The runtime drives sinks through this protocol too
/// (`SinkLogic` supplies a `process` that emits nothing).
protocol TransformLogic: StageLogic {
    /// How the runtime hands this stage its input; the one switch the actor loop reads.
    var inputHandling: InputHandling { get }
    /// One decoded frame (the general path).
    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws
    /// Called whenever the stage has read everything queued on an input (the read burst is over):
    /// the place to flush what a sink buffers, so live data streams while bulk replays still write in
    /// large blocks.
    func inputDrained() throws
    /// Called once every input has ended: flush and return the last frames.
    func finish() throws -> [WireFrame]
    /// `finish` for a stage whose last frames are many (a smoother emits a whole recording at the
    /// end): hands them to `emit` in batches, so they are never all in memory at once.
    func finish(emit: ([WireFrame]) throws -> Void) throws
}

extension TransformLogic {
    func inputDrained() throws {}
    func finish(emit: ([WireFrame]) throws -> Void) throws { try emit(finish()) }
}

/// A sink: reads its inputs and publishes nothing on the bus (it writes a file or a terminal, or
/// sends on an endpoint of its own or over DDS). It never produces frames for the graph: the type
/// says so, not a convention.
protocol SinkLogic: TransformLogic {
    /// One decoded frame (the general path).
    func consume(_ frame: consuming WireFrame) throws
    /// Called once every input has ended: flush and close what the sink writes.
    func close() throws
}

extension SinkLogic {
    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws { try consume(frame) }
    func finish() throws -> [WireFrame] {
        try close()
        return []
    }
}

/// How a transform or sink reads its input. Everything else in the actor loop is the same for
/// every stage.
enum InputHandling: Equatable {
    /// Bus messages go on as they came, never unpacked (a stage with nothing to do, such as an
    /// identity calibration).
    case passThrough
    /// Every frame is decoded and handed to `process`.
    case decoded
    /// Frames are read where they arrived (`InPlaceTransform`); a message the in-place pass
    /// refuses (malformed, big endian, a frame the stage must decode) takes `process` instead.
    case inPlace(InPlaceOutput)
}

/// What goes on after an in-place pass over one bus message.
enum InPlaceOutput: Equatable {
    /// The message itself, with the stage's changes written into its payloads (calibration).
    case patchedMessage
    /// The message itself, unchanged: the stage only observes it (gating).
    case sameMessage
    /// Only the frames the stage made (fusion), or none (a sink that measures).
    case ownFramesOnly
}

/// A transform or sink that reads frames where they arrived: no frames decoded into arrays, no
/// copies. This is the one place a stage has two code paths: the general `process` handles what
/// the in-place pass refuses, so both must give the same frames in the same order (a test runs
/// every in-place stage of the registry through both). Two passes keep it exact: only when every
/// frame of a message passed the first does the second change state and bytes.
protocol InPlaceTransform: TransformLogic {
    /// First pass: what `apply` needs from this frame, or nil when the frame needs the general path.
    func inPlaceSample(_ frame: WireFrame.View) -> InPlaceSample?
    /// Second pass: updates the stage, patches the frame's payload where needed, appends frames to
    /// publish (after the message, when it goes on).
    func apply(_ sample: InPlaceSample, to frame: WireFrame.View, extra: inout [WireFrame]) throws
}

/// What an in-place stage read from one frame in its first pass, for its second.
enum InPlaceSample {
    case imu(header: RosHeader, angularVelocity: Vector3, linearAcceleration: Vector3, offset: Int?)
    case magnetometer(header: RosHeader, field: Vector3, offset: Int?)
    /// A motor current (amperes drawn), read in stream order with the readings around it.
    case current(header: RosHeader, drawnAmperes: Double)
    /// A frame the stage passes on untouched.
    case unchanged

    /// Where the vector the stage may change starts in the payload (little-endian payloads only).
    var offset: Int? {
        switch self {
        case .imu(_, _, _, let o), .magnetometer(_, _, let o): return o
        case .current, .unchanged: return nil
        }
    }
}

/// A frame a stage does not handle (type or encoding), counted and logged, never fatal.
struct UnexpectedFrame: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}
