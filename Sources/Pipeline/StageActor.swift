import Foundation
import MessageBus
import CZeroMQ

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

/// Where a stage publishes and what it connects to.
struct StageWiring {
    var bind: String?
    var inputs: [(name: String, endpoint: String)]
    /// Subscriptions to wait for before publishing (the stages reading this one).
    var expectedSubscribers: Int
}

/// One pipeline stage: an actor on its own thread that owns its sockets and its logic.
actor StageActor {
    nonisolated let executor: ThreadExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    let config: StageConfig
    let wiring: StageWiring
    let context: BusContext
    let log: @Sendable (String) -> Void

    /// Bus messages queued per connection on each side before the sender waits (it never drops):
    /// 0.2 s of single samples at 1 kHz, or 200 batches in bulk replay. Deeper queues bought no
    /// throughput in `bench pipeline`, only memory (RSS of the one-process run: 48 MB at 100, about
    /// 110-145 MB at 10,000).
    static let highWaterMark: Int32 = 200

    init(config: StageConfig, wiring: StageWiring, context: BusContext, cpus: [Int] = [], log: @escaping @Sendable (String) -> Void) {
        self.config = config; self.wiring = wiring; self.context = context; self.log = log
        executor = ThreadExecutor(name: "stage-\(config.name)", cpus: cpus)
    }

    /// Runs the stage to the end of its stream (or a stop request) and reports.
    func run() throws -> StageReport {
        defer { executor.shutdown() }
        if let failure = executor.pinningFailure { throw PipelineRunError.stageFailed(stage: config.name, reason: "\(failure)") }
        var report = StageReport(stage: config.name)
        // The logic first: a bag that cannot be opened fails before anyone waits for this stage.
        let logic = try makeStageLogic(config, log: log)
        let output = try wiring.bind.map { try readerFollowingPublisher(context, endpoint: $0, highWaterMark: Self.highWaterMark, stage: config.name) }
        defer { output?.close() }
        var inputs: [BusSocket] = []
        defer { inputs.forEach { $0.close() } }
        for (_, endpoint) in wiring.inputs {
            let s = try BusSocket(context, .sub)
            try s.setOption(ZMQ_RCVHWM, Self.highWaterMark)
            try s.subscribe([])
            try s.connect(endpoint)
            inputs.append(s)
        }
        var publisher = Publisher(socket: output, stage: config.name, expectedReaders: wiring.expectedSubscribers, endpoint: wiring.bind ?? "?", log: log)
        try publisher.waitForReaders(pausing: false)

        if let source = logic as? SourceLogic {
            let pauses = config.settings.bool("pause_without_subscribers")
            do {
                try source.run { frames throws in
                    if PipelineSignals.stopRequested { throw StopRequested() }
                    if pauses { source.pausedSeconds += try publisher.waitForReaders(pausing: true) }
                    try publisher.publish(frames, report: &report)
                }
            } catch is StopRequested {
                report.notes.append("stopped on request")
            }
            try publisher.publish(try source.finish(), report: &report)
        } else if let transform = logic as? TransformLogic {
            try consume(inputs, transform, &publisher, &report)
        }
        try publisher.publish([WireFrame.endOfStream(from: config.name)], report: &report, counted: false)
        if publisher.pauses > 0 {
            report.notes.append("paused \(publisher.pauses) time(s), \(format(publisher.pausedSeconds, 2)) s in all, while a reader was missing")
        }
        report.notes += logic.notes
        return report
    }

    /// Reads every input until each has ended (or a stop request has gone unanswered for 2 s).
    func consume(_ inputs: [BusSocket], _ transform: TransformLogic, _ publisher: inout Publisher, _ report: inout StageReport) throws {
        var open = Set(inputs.indices)
        var stopSeen: Double?
        // One output buffer for the whole run, published whenever it holds a full batch: a small,
        // reused working set instead of a fresh array grown per drain.
        var outgoing: [WireFrame] = []
        outgoing.reserveCapacity(2 * Publisher.maximumBatchFrames)
        var inPlace = InPlacePass(transform)
        while !open.isEmpty {
            // A reader gone (a crashed stage being restarted): stop reading until it is back, so the
            // queues fill and back-pressure holds the stream upstream instead of losing it here.
            try publisher.waitForReaders(pausing: true)
            let ready = try BusPoller.readable(inputs, timeoutMilliseconds: 100)
            if ready.isEmpty, PipelineSignals.stopRequested {
                let now = ProcessInfo.processInfo.systemUptime
                if stopSeen == nil { stopSeen = now }
                if now - stopSeen! > 2 { report.notes.append("stopped without end of stream from \(open.map { wiring.inputs[$0].name }.joined(separator: ", "))"); break }
            }
            for i in ready {
                // Drain what is queued on this input (bounded, so other inputs get their turn),
                // publishing in batches.
                var drained = 0
                while drained < 256, let message = try inputs[i].receiveMessage(timeoutMilliseconds: 0) {
                    drained += 1
                    if !transform.observesFrames, let count = WireFrame.dataFrameCount(UnsafeRawBufferPointer(message.bytes)) {
                        // Pass-through without unpacking (the end of stream is always a lone frame).
                        report.received += count
                        try publisher.publish(outgoing, report: &report)
                        outgoing.removeAll(keepingCapacity: true)
                        try publisher.forward(message, frames: count, report: &report)
                        continue
                    }
                    if let passed = try inPlace.run(message) {
                        // Handled in place: the message goes on as it is (patched), or the frames the
                        // pass made.
                        report.received += passed.frames
                        if let whole = passed.message {
                            try publisher.publish(outgoing, report: &report)
                            outgoing.removeAll(keepingCapacity: true)
                            try publisher.forward(whole, frames: passed.frames, report: &report)
                        }
                        outgoing += inPlace.output
                        if outgoing.count >= Publisher.maximumBatchFrames {
                            try publisher.publish(outgoing, report: &report)
                            outgoing.removeAll(keepingCapacity: true)
                        }
                        continue
                    }
                    let bytes = message.array
                    var frames: [WireFrame]
                    do { frames = try WireFrame.frames(in: bytes) } catch {
                        report.malformed += 1
                        log("\(config.name): malformed frame from '\(wiring.inputs[i].name)' (\(bytes.count) bytes): \(error)")
                        continue
                    }
                    var ended = false
                    let before = outgoing.count
                    let count = frames.count
                    for index in 0..<count {
                        // Moved out of the array, so a stage that patches the payload owns it alone.
                        var frame = WireFrame.empty
                        swap(&frame, &frames[index])
                        if frame.isEndOfStream { open.remove(i); ended = true; continue }
                        report.received += 1
                        let topic = frame.topic
                        do {
                            try transform.process(frame, into: &outgoing)
                        } catch let e as UnexpectedFrame {
                            report.unexpected += 1
                            if report.unexpected <= 10 { log("\(config.name): \(e) on topic '\(topic)' from '\(wiring.inputs[i].name)'") }
                        }
                    }
                    if transform.forwardsUnchanged && !ended && outgoing.count - before == count {
                        // Nothing changed: pass this bus message on as it came, after what came before it.
                        outgoing.removeLast(count)
                        try publisher.publish(outgoing, report: &report)
                        outgoing.removeAll(keepingCapacity: true)
                        try publisher.forward(message, frames: count, report: &report)
                    }
                    if outgoing.count >= Publisher.maximumBatchFrames {
                        try publisher.publish(outgoing, report: &report)
                        outgoing.removeAll(keepingCapacity: true)
                    }
                }
                try publisher.publish(outgoing, report: &report)
                outgoing.removeAll(keepingCapacity: true)
            }
        }
        try publisher.publish(try transform.finish(), report: &report)
    }
}

/// The in-place path of an `InPlaceTransform` (see there), with its buffers reused across messages.
struct InPlacePass {
    let transform: InPlaceTransform?
    var views: [WireFrame.View] = []
    var samples: [InPlaceSample] = []
    /// Frames added by the stage, each after the input frame at the same index of `positions`.
    var added: [WireFrame] = []
    var positions: [Int] = []
    /// What to publish for the last message besides the message itself (see `run`).
    var output: [WireFrame] = []

    init(_ transform: TransformLogic) {
        self.transform = transform as? InPlaceTransform
    }

    /// Handles `message` in place if the stage and every frame allow it; nil when the message needs
    /// the general path, with nothing changed. Otherwise returns the number of frames read and the
    /// message to pass on as it is (patched; a private copy when the stage writes and the content is
    /// shared), or nil with `output` holding the frames to publish instead: the stage's new frames,
    /// or, when a passing stage added some (status), the message's frames with those inserted right
    /// after the frame that caused them, exactly as the general path orders them.
    mutating func run(_ message: BusMessage) throws -> (message: BusMessage?, frames: Int)? {
        guard let transform, transform.worksInPlace else { return nil }
        views.removeAll(keepingCapacity: true); samples.removeAll(keepingCapacity: true)
        added.removeAll(keepingCapacity: true); positions.removeAll(keepingCapacity: true); output.removeAll(keepingCapacity: true)
        guard WireFrame.views(in: message.bytes, into: &views) else { return nil }
        for view in views {
            guard let sample = transform.inPlaceSample(view) else { return nil }
            samples.append(sample)
        }
        var target = message
        if transform.writesInPlace && message.isShared {
            target = try message.unsharedCopy()
            views.removeAll(keepingCapacity: true)
            _ = WireFrame.views(in: target.bytes, into: &views)   // same layout, now in the copy
        }
        for i in views.indices {
            let before = added.count
            try transform.apply(samples[i], to: views[i], extra: &added)
            for _ in before..<added.count { positions.append(i) }
        }
        guard transform.forwardsMessage else { output = added; return (nil, views.count) }
        if added.isEmpty { return (target, views.count) }
        var next = 0
        for (i, view) in views.enumerated() {
            output.append(WireFrame(topic: view.topic, type: view.type, encoding: view.encoding, payload: Array(UnsafeRawBufferPointer(view.payload))))
            while next < added.count && positions[next] == i { output.append(added[next]); next += 1 }
        }
        return (nil, views.count)
    }
}

/// An XPUB socket bound to `endpoint` that applies back-pressure instead of dropping (XPUB no-drop)
/// and reports every subscription and unsubscription, so its readers can be counted (`ReaderCount`).
func readerFollowingPublisher(_ context: BusContext, endpoint: String, highWaterMark: Int32, stage: String) throws -> BusSocket {
    let s = try BusSocket(context, .xpub)
    try s.setOption(ZMQ_SNDHWM, highWaterMark)
    try s.setOption(ZMQ_XPUB_NODROP, 1)      // back-pressure instead of silent drops
    try s.setOption(ZMQ_XPUB_VERBOSE, 1)     // see every subscription
    try s.setOption(ZMQ_XPUB_VERBOSER, 1)    // and every unsubscription (a reader gone)
    do { try s.bind(endpoint) } catch { throw PipelineRunError.cannotBind(stage: stage, endpoint: endpoint, reason: "\(error)") }
    return s
}

/// The readers of a `readerFollowingPublisher` socket: +1 per subscription message, -1 per
/// unsubscription (including a reader's subscriptions when its connection ends).
struct ReaderCount {
    private(set) var value = 0

    /// Counts the (un)subscription messages that arrived, waiting at most `timeoutMilliseconds` for
    /// the first; true when one arrived.
    @discardableResult
    mutating func read(_ socket: BusSocket, timeoutMilliseconds: Int32) throws -> Bool {
        var any = false
        var timeout = timeoutMilliseconds
        while let message = try socket.receive(timeoutMilliseconds: timeout) {
            if message.first == 1 { value += 1 } else if message.first == 0 { value = max(0, value - 1) }
            any = true
            timeout = 0
        }
        return any
    }

    /// Waits until `wanted` readers are connected or a stop is requested, polling every 0.5 s;
    /// `waiting` is told how many are missing every `logEveryPolls` quiet polls.
    mutating func wait(_ socket: BusSocket, for wanted: Int, logEveryPolls: Int, _ waiting: (Int) -> Void) throws {
        var quiet = 0
        while value < wanted && !PipelineSignals.stopRequested {
            if try !read(socket, timeoutMilliseconds: 500) {
                quiet += 1
                if quiet % logEveryPolls == 0 { waiting(wanted - value) }
            }
        }
    }
}

/// Publishes frames with back-pressure: several frames go out as one bus message (a batch), at most
/// `maximumBatchFrames` frames or about `maximumBatchBytes` bytes each, far below the frame limit.
struct Publisher {
    let socket: BusSocket?
    let stage: String
    /// The stages reading this one.
    let expectedReaders: Int
    let endpoint: String
    let log: @Sendable (String) -> Void
    private(set) var readers = ReaderCount()
    private(set) var pauses = 0
    private(set) var pausedSeconds = 0.0
    static let maximumBatchFrames = 256
    static let maximumBatchBytes = 1 << 20

    init(socket: BusSocket?, stage: String, expectedReaders: Int, endpoint: String, log: @escaping @Sendable (String) -> Void) {
        self.socket = socket; self.stage = stage; self.expectedReaders = expectedReaders; self.endpoint = endpoint; self.log = log
    }

    /// Counts the (un)subscription messages that arrived (see `ReaderCount.read`).
    @discardableResult
    mutating func readSubscriptions(timeoutMilliseconds: Int32) throws -> Bool {
        guard let socket else { return false }
        return try readers.read(socket, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// Holds the stage until every expected reader is connected (or a stop is requested): at start,
    /// so nothing is published into the void, and, `pausing`, whenever a reader has gone. Returns
    /// the seconds waited.
    @discardableResult
    mutating func waitForReaders(pausing: Bool) throws -> Double {
        guard let socket else { return 0 }
        try readers.read(socket, timeoutMilliseconds: 0)
        guard readers.value < expectedReaders, !PipelineSignals.stopRequested else { return 0 }
        let started = ProcessInfo.processInfo.systemUptime
        if pausing {
            pauses += 1
            log("\(stage): paused: \(readers.value) of \(expectedReaders) reader(s) connected on \(endpoint)")
        }
        try readers.wait(socket, for: expectedReaders, logEveryPolls: 10) { [stage, expectedReaders, endpoint, log] missing in
            log("\(stage): waiting for \(missing) of \(expectedReaders) reader(s) on \(endpoint)")
        }
        let seconds = ProcessInfo.processInfo.systemUptime - started
        if pausing {
            pausedSeconds += seconds
            log("\(stage): resumed after \(format(seconds, 2)) s")
        }
        return seconds
    }

    mutating func publish(_ frames: [WireFrame], report: inout StageReport, counted: Bool = true) throws {
        guard socket != nil, !frames.isEmpty else { return }
        var start = 0
        while start < frames.count {
            var end = start, bytes = 0
            frames.withUnsafeBufferPointer { all in   // borrowed: no copy per frame
                while end < all.count && end - start < Self.maximumBatchFrames && (bytes < Self.maximumBatchBytes || end == start) {
                    bytes += all[end].payload.count + 64
                    end += 1
                }
            }
            let slice = frames[start..<end]
            if let socket {
                let message = try BusMessage(size: WireFrame.encodedSize(slice))
                WireFrame.encode(slice, into: message.bytes)
                while try !socket.send(message, blocking: false) {
                    if try waitForRoom(counted: counted) { return }
                }
            }
            if counted { report.published += slice.count }
            start = end
        }
    }

    /// Passes on a received bus message as it is (no copy).
    mutating func forward(_ message: BusMessage, frames: Int, report: inout StageReport) throws {
        guard let socket else { return }
        while try !socket.send(message, blocking: false) {
            if try waitForRoom(counted: true) { return }
        }
        report.published += frames
    }

    /// The slowest subscriber's queue is full: waits for room, draining subscription messages. True
    /// when the send should be given up (an uncounted message while stopping).
    mutating func waitForRoom(counted: Bool) throws -> Bool {
        try readSubscriptions(timeoutMilliseconds: 1)
        return PipelineSignals.stopRequested && !counted
    }
}

/// Why a run could not start or finish.
public enum PipelineRunError: Error, CustomStringConvertible {
    case cannotBind(stage: String, endpoint: String, reason: String)
    case unknownStage(String, available: [String])
    case stageFailed(stage: String, reason: String)
    public var description: String {
        switch self {
        case .cannotBind(let s, let e, let r): return "stage '\(s)' cannot bind \(e): \(r)"
        case .unknownStage(let s, let a): return "no stage '\(s)' in the pipeline (stages: \(a.joined(separator: ", ")))"
        case .stageFailed(let s, let r): return "stage '\(s)' failed: \(r)"
        }
    }
}
