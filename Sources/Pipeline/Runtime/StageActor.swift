import Foundation
import MessageBus

/// Where a stage publishes and what it connects to.
struct StageWiring {
    var bind: String?
    var inputs: [(name: String, endpoint: String)]
    /// The stages reading this one: their subscriptions are waited for before publishing.
    var readers: [String]
    /// How long to wait for them before failing (`PipelineConfig.readerTimeoutSeconds`).
    var readerTimeoutSeconds = PipelineConfig.defaultReaderTimeoutSeconds
    /// CURVE keys for tcp and ipc endpoints (inproc stays plain: it never leaves the process).
    var security: CurveSecurity? = nil
    /// How this stage packs the batches it publishes.
    var compression: FrameCompression = .none
    /// The stage was restarted (a supervisor's restart): sinks continue what the killed one wrote,
    /// unless the stage recomputes its input (then it writes everything again).
    var resuming = false
    /// How the inputs number their frames (one input whose stream is reproducible, or live).
    var inputNumbering: InputSequence.Numbering = .live
    /// A restarted stage that rebuilds its input: the stages from the source to that input
    /// (`PipelineConfig.recomputation(for:)`).
    var recomputation: [StageConfig]? = nil
    /// Where this stage serves retransmissions of what it publishes (a live stream), and for how long.
    var retransmit: (endpoint: String, settings: RetransmitSettings)? = nil
    /// Where each input serves retransmissions (nil: it keeps none), in the order of `inputs`.
    var inputRetransmitEndpoints: [String?] = []
}

/// One pipeline stage: an actor on its own thread that owns its sockets and its logic.
actor StageActor {
    nonisolated let executor: ThreadExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    let config: StageConfig
    let wiring: StageWiring
    let context: BusContext
    let log: @Sendable (String) -> Void
    /// The run's stop request, polled between messages and handed to the logic.
    let stop: StopToken
    /// Largest bus message an input accepts (the pipeline's `max_message_bytes`).
    let maximumMessageBytes: Int

    /// Bus messages queued per connection on each side before the sender waits (it never drops):
    /// 0.2 s of single samples at 1 kHz, or 200 batches in bulk replay. Deeper queues bought only
    /// memory (docs/results.md).
    static let highWaterMark: Int32 = 200

    init(
        config: StageConfig, wiring: StageWiring, context: BusContext, cpus: [Int] = [],
        maximumMessageBytes: Int = 2 * WireFrame.maximumBytes, stop: StopToken,
        log: @escaping @Sendable (String) -> Void
    ) {
        self.stop = stop
        self.maximumMessageBytes = maximumMessageBytes
        self.config = config
        self.wiring = wiring
        self.context = context
        self.log = log
        executor = ThreadExecutor(name: "stage-\(config.name)", cpus: cpus)
    }

    /// Runs the stage to the end of its stream (or a stop request) and reports.
    func run() throws -> StageReport {
        defer { executor.shutdown() }
        if let failure = executor.pinningFailure {
            throw StageFailure("\(failure)")
        }
        var report = StageReport(stage: config.name, role: config.type.role)
        // The logic first: a bag that cannot be opened fails before anyone waits for this stage.
        let logic = try config.makeLogic(
            log: log, security: wiring.security, stop: stop,
            output: !wiring.resuming ? .firstRun : wiring.recomputation == nil ? .continues : .rewrites)
        let output = try wiring.bind.map {
            try readerFollowingPublisher(
                context, endpoint: $0, highWaterMark: Self.highWaterMark, stage: config.name,
                curve: $0.hasPrefix("inproc://") ? nil : wiring.security?.server)
        }
        defer { output?.close() }
        // A live stream's publisher keeps what it sent for readers that missed it.
        let retransmitServer = try wiring.retransmit.map { r in
            do {
                return try RetransmitServer(
                    context, endpoint: r.endpoint,
                    buffer: RetransmitBuffer(seconds: r.settings.seconds, maximumBytes: r.settings.maximumBytes),
                    curve: r.endpoint.hasPrefix("inproc://") ? nil : wiring.security?.server)
            } catch {
                throw PipelineRunError.cannotBind(stage: config.name, endpoint: r.endpoint, reason: "\(error)")
            }
        }
        defer { retransmitServer?.stop() }
        let inputs = try connectInputs()
        defer { inputs.forEach { $0.close() } }
        let retransmitClients = try wiring.inputs.indices.map { i -> RetransmitClient? in
            guard i < wiring.inputRetransmitEndpoints.count, let endpoint = wiring.inputRetransmitEndpoints[i] else {
                return nil
            }
            let curve = wiring.security.map { (serverKey: $0.server.publicKey, keys: $0.client) }
            return try RetransmitClient(
                context, endpoint: endpoint, maximumMessageBytes: maximumMessageBytes,
                curve: endpoint.hasPrefix("inproc://") ? nil : curve)
        }
        defer { retransmitClients.forEach { $0?.close() } }
        var publisher = Publisher(
            socket: output, stage: config.name, readers: wiring.readers,
            readerTimeoutSeconds: wiring.readerTimeoutSeconds, endpoint: wiring.bind ?? "?",
            compression: wiring.compression, retained: retransmitServer?.buffer, stop: stop,
            log: log)
        try publisher.waitForReaders(pausing: false)

        // Frames the inputs' sequence numbers say never came, and whether an input ended failed.
        let (missing, failedUpstream) = try run(
            logic, inputs: inputs, retransmitClients: retransmitClients, &publisher, &report)
        if let server = retransmitServer, let note = Self.retransmitNote(server) { report.notes.append(note) }
        // An incomplete input makes an incomplete output: the failure travels down the graph. So does an
        // abandoned run's: a source stopped because its parent died did not reach its end.
        try publisher.publish(
            [WireFrame.endOfStream(from: config.name, failed: failedUpstream || stop.abandoned)],
            report: &report, counted: false)
        if publisher.pauses > 0 {
            report.notes.append(
                "paused \(publisher.pauses) time(s), \(format(publisher.pausedSeconds, 2)) s in all, while a "
                    + "reader was missing"
            )
        }
        if publisher.readers.refused > 0 {
            report.notes.append(publisher.readers.refusalSummary)
        }
        report.notes += logic.notes
        report.losses = logic.losses + report.malformed + report.unexpected + missing
        report.knownWrong = logic.knownWrong
        return report
    }

    /// A subscriber per input, each connected and subscribed to everything and to its readers' mark;
    /// the ones made before a failure are closed.
    func connectInputs() throws -> [BusSocket] {
        var inputs: [BusSocket] = []
        do {
            for (_, endpoint) in wiring.inputs {
                let s = try BusSocket(context, .sub)
                inputs.append(s)
                try s.set(.receiveHighWaterMark, Self.highWaterMark)
                try s.limitMessages(toBytes: maximumMessageBytes)
                if let security = wiring.security, !endpoint.hasPrefix("inproc://") {
                    try s.makeCurveClient(serverPublicKey: security.server.publicKey, keys: security.client)
                }
                try s.subscribe([])
                try s.subscribe(Publisher.readerMark(of: config.name))
                try s.connect(endpoint)
            }
        } catch {
            inputs.forEach { $0.close() }
            throw error
        }
        return inputs
    }

    /// Runs a source until its stream ends or a stop, or a transform or sink until every input has
    /// ended. Returns the frames the inputs' numbers say never came and whether an input ended failed.
    /// On a failure the readers are told at once that the stream is incomplete.
    func run(
        _ logic: StageLogic, inputs: [BusSocket], retransmitClients: [RetransmitClient?], _ publisher: inout Publisher,
        _ report: inout StageReport
    ) throws -> (missing: Int, failedUpstream: Bool) {
        var missing = 0
        var failedUpstream = false
        do {
            if let source = logic as? SourceLogic {
                let pauses = source.pausesWithoutSubscribers
                do {
                    try source.run { frames throws in
                        if stop.requested { throw StopRequested() }
                        let waited = pauses ? try publisher.waitForReaders(pausing: true) : 0
                        try publisher.publish(frames, report: &report)
                        return waited
                    }
                    // A source that checks for the stop itself (a looping bag between passes) ends quietly.
                    if stop.requested { throw StopRequested() }
                } catch is StopRequested {
                    report.notes.append("stopped on request")
                }
            } else if let transform = logic as? TransformLogic {
                var reader = InputReader(
                    inputs: inputs, names: wiring.inputs.map(\.name), transform: transform, stage: config.name,
                    numbering: wiring.inputNumbering, joining: wiring.resuming, retransmitClients: retransmitClients,
                    log: log)
                if let chain = wiring.recomputation {
                    try reader.recompute(from: chain, &publisher, &report)
                } else if wiring.resuming && config.type.continuesFromRetransmission {
                    try reader.catchUp(&publisher, &report)
                }
                try reader.consume(&publisher, &report)
                report.notes += reader.sequenceNotes()
                missing = reader.sequenceLosses
                failedUpstream = !reader.upstreamFailed.isEmpty
            }
        } catch {
            // Readers end at once, knowing the stream is incomplete, instead of waiting for a stop.
            try? publisher.publish(
                [WireFrame.endOfStream(from: config.name, failed: true)], report: &report, counted: false)
            throw error
        }
        return (missing, failedUpstream)
    }

    /// What the retransmit server sent again, when it was asked at all.
    static func retransmitNote(_ server: RetransmitServer) -> String? {
        let served = server.served
        guard served.requests > 0 else { return nil }
        let refused = server.refused
        return "sent \(served.messages) bus message(s) again for \(served.requests) retransmit request(s) on "
            + "\(server.endpoint)"
            + (refused > 0 ? "; \(refused) request(s) refused: the client had used up its budget" : "")
    }
}
