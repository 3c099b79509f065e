import Foundation
import MessageBus

/// A transform's or sink's input side: reads every input until each has ended, handing each bus
/// message to the stage the way its `inputHandling` asks.
struct InputReader {
    let inputs: [BusSocket]
    let names: [String]
    let transform: TransformLogic
    let stage: String
    let log: @Sendable (String) -> Void
    var open: Set<Int>
    /// Each input's sequence numbers (see `InputSequence`), and its topics' (`TopicSequences`).
    var sequences: [InputSequence]
    var topicSequences: [TopicSequences]
    /// A message read before the stage was ready for it (while recomputing), handled first.
    var pending: (message: BusMessage, input: Int)?
    /// Each input's retransmit endpoint (nil: its publisher keeps nothing), asked for what a gap
    /// skipped; and, per input, frames recovered that way and requests that went unanswered.
    let retransmitClients: [RetransmitClient?]
    var recovered: [UInt64]
    var recoveries: [Int]
    var unanswered: [Int]
    var unansweredInARow: [Int]
    /// True while handling retransmitted messages (a gap among them is not asked for again).
    var recovering = false
    /// One output buffer for the whole run, published whenever it holds a full batch.
    var outgoing: [WireFrame] = []
    var inPlace: InPlacePass

    init(
        inputs: [BusSocket], names: [String], transform: TransformLogic, stage: String,
        numbering: InputSequence.Numbering = .live, joining: Bool = false, retransmitClients: [RetransmitClient?] = [],
        log: @escaping @Sendable (String) -> Void
    ) {
        sequences = inputs.map { _ in InputSequence(numbering, joining: joining) }
        topicSequences = inputs.map { _ in TopicSequences() }
        self.retransmitClients = inputs.indices.map { $0 < retransmitClients.count ? retransmitClients[$0] : nil }
        recovered = inputs.map { _ in 0 }
        recoveries = inputs.map { _ in 0 }
        unanswered = inputs.map { _ in 0 }
        unansweredInARow = inputs.map { _ in 0 }
        self.inputs = inputs
        self.names = names
        self.transform = transform
        self.stage = stage
        self.log = log
        open = Set(inputs.indices)
        outgoing.reserveCapacity(2 * Publisher.maximumBatchFrames)
        inPlace = InPlacePass(transform)
    }

    /// Inputs that ended on a failure upstream, or never ended (a stop that went unanswered).
    var upstreamFailed: Set<String> = []

    /// Reads until every input has ended (or a stop request has gone unanswered for 2 s).
    mutating func consume(_ publisher: inout Publisher, _ report: inout StageReport) throws {
        if let (message, input) = pending {
            pending = nil
            try handle(message, from: input, &publisher, &report)
            try flush(&publisher, &report)
        }
        var stopSeen: Double?
        while !open.isEmpty {
            // A reader gone (a crashed stage being restarted): stop reading until it is back, so the
            // queues fill and back-pressure holds the stream upstream instead of losing it here.
            try publisher.waitForReaders(pausing: true)
            let ready = try BusPoller.readable(inputs, timeoutMilliseconds: 100)
            if ready.isEmpty, publisher.stop.requested {
                let now = Clocks.monotonicSeconds()
                if stopSeen == nil { stopSeen = now }
                if now - stopSeen! > 2 {
                    let silent = open.sorted().map { names[$0] }.joined(separator: ", ")
                    report.notes.append("stopped without end of stream from \(silent)")
                    for i in open { upstreamFailed.insert(names[i]) }
                    break
                }
            }
            for i in ready {
                // Drain what is queued on this input (bounded, so other inputs get their turn).
                var drained = 0
                while drained < 256, let message = try inputs[i].receiveMessage(timeoutMilliseconds: 0) {
                    drained += 1
                    try handle(message, from: i, &publisher, &report)
                }
                try flush(&publisher, &report)
                if drained < 256 { try transform.inputDrained() }
            }
        }
        transform.inputsComplete = upstreamFailed.isEmpty && !publisher.stop.abandoned
        try transform.finish { try publisher.publish($0, report: &report) }
    }

    /// One bus message, as the stage's input handling asks.
    mutating func handle(
        _ message: BusMessage, from input: Int, _ publisher: inout Publisher, _ report: inout StageReport
    ) throws {
        var skipping = 0
        if let numbers = WireFrame.sequence(of: UnsafeRawBufferPointer(message.bytes)) {
            if !recovering, let missed = sequences[input].gap(before: numbers.first) {
                try recover(missed, from: input, &publisher, &report)
            }
            switch sequences[input].admit(first: numbers.first, count: numbers.count) {
            case .all: break
            case .none: return
            case .skippingFirst(let n): skipping = n
            }
            if let census = WireFrame.census(of: UnsafeRawBufferPointer(message.bytes)) {
                topicSequences[input].admit(census)
            }
        }
        if skipping > 0 { return try decodeAndProcess(message, from: input, skipping: skipping, &publisher, &report) }
        switch transform.inputHandling {
        case .passThrough:
            // Unread (the end of stream is always a lone frame, so it is never counted here).
            if let count = WireFrame.dataFrameCount(UnsafeRawBufferPointer(message.bytes)) {
                report.received += count
                try flush(&publisher, &report)
                try publisher.forward(message, frames: count, report: &report)
                return
            }
        case .inPlace:
            if let passed = try inPlace.run(message) {
                report.received += passed.frames
                if let whole = passed.message {
                    try flush(&publisher, &report)
                    try publisher.forward(whole, frames: passed.frames, report: &report)
                }
                outgoing += inPlace.output
                if outgoing.count >= Publisher.maximumBatchFrames { try flush(&publisher, &report) }
                return
            }
        case .decoded:
            break
        }
        try decodeAndProcess(message, from: input, &publisher, &report)
    }

    /// The general path: every frame decoded and handed to `process` (but the first `skipping`,
    /// which this stage has already read).
    mutating func decodeAndProcess(
        _ message: BusMessage, from input: Int, skipping: Int = 0, _ publisher: inout Publisher,
        _ report: inout StageReport
    ) throws {
        let bytes = message.array
        var frames: [WireFrame]
        do { frames = try WireFrame.frames(in: bytes) } catch {
            report.malformed += 1
            log("\(stage): malformed frame from '\(names[input])' (\(bytes.count) bytes): \(error)")
            return
        }
        if skipping > 0 { frames.removeFirst(min(skipping, frames.count)) }
        let before = outgoing.count
        var ended = false
        for index in frames.indices {
            // Moved out of the array, so a stage that patches the payload owns it alone.
            var frame = WireFrame.empty
            swap(&frame, &frames[index])
            if frame.isEndOfStream {
                if frame.endsInFailure { upstreamFailed.insert(names[input]) }
                open.remove(input)
                ended = true
                continue
            }
            try process(frame, from: input, &report)
        }
        if transform.inputHandling == .passThrough && !ended && skipping == 0 && outgoing.count - before == frames.count
        {
            // A pass-through stage's frames came out as they went in: pass the message on as it came.
            outgoing.removeLast(frames.count)
            try flush(&publisher, &report)
            try publisher.forward(message, frames: frames.count, report: &report)
        }
        if outgoing.count >= Publisher.maximumBatchFrames { try flush(&publisher, &report) }
    }

    /// One frame through the stage's general path; a frame it does not handle is counted (and the
    /// first ten logged), never fatal.
    mutating func process(_ frame: consuming WireFrame, from input: Int, _ report: inout StageReport) throws {
        report.received += 1
        let topic = frame.topic
        do {
            try transform.process(frame, into: &outgoing)
        } catch let e as UnexpectedFrame {
            report.unexpected += 1
            if report.unexpected <= 10 { log("\(stage): \(e) on topic '\(topic)' from '\(names[input])'") }
        }
    }

    mutating func flush(_ publisher: inout Publisher, _ report: inout StageReport) throws {
        try publisher.publish(outgoing, report: &report)
        outgoing.removeAll(keepingCapacity: true)
    }
}
