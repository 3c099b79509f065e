import Foundation
import MessageBus

/// Runs a validated pipeline: every stage in this process (inproc transport), or one stage on the
/// endpoints the configuration gives (ipc or tcp), connecting to its inputs' endpoints.
public enum PipelineRunner {
    /// Logs to stderr, one line per call.
    public static let standardErrorLog: @Sendable (String) -> Void = { line in
        try? FileHandle.standardError.write(contentsOf: Data(("fusion-node: " + line + "\n").utf8))
    }

    /// All stages in this process. Returns each stage's report once every stage has finished, or
    /// `stop` is requested and they have drained (a failing stage requests it for the others).
    public static func runAll(
        _ config: PipelineConfig, stop: StopToken = StopToken(),
        log: @escaping @Sendable (String) -> Void = standardErrorLog
    ) async throws -> [StageReport] {
        // In one process stages talk over inproc; only publish sinks bind addresses of their own.
        try config.prepareEndpoints(for: Set(config.stages.filter(\.type.isSink).map(\.name)), log: log)
        let context = try BusContext(ioThreadCPUs: config.cpus)
        let prefix = "inproc://\(UInt32.random(in: 0...UInt32.max))-"
        let actors = config.stages.map { s in
            StageActor(
                config: s,
                wiring: StageWiring(
                    bind: s.type.isSink ? nil : prefix + s.name,
                    inputs: s.inputs.map { ($0, prefix + $0) },
                    readers: config.consumers(of: s.name), readerTimeoutSeconds: config.readerTimeoutSeconds,
                    security: config.security, inputNumbering: config.inputNumbering(of: s.name)),
                context: context, cpus: config.cpus, maximumMessageBytes: config.maximumMessageBytes, stop: stop,
                log: log)
        }
        return try await runActors(actors, stop: stop)
    }

    /// One stage, on its configured endpoint.
    /// `resuming`: this process replaces a killed one of the same stage (see `OutputAfterRestart`).
    public static func runStage(
        _ config: PipelineConfig, named name: String, resuming: Bool = false, stop: StopToken = StopToken(),
        log: @escaping @Sendable (String) -> Void = standardErrorLog
    ) async throws -> StageReport {
        guard let s = config.stage(named: name) else {
            throw PipelineRunError.unknownStage(name, available: config.stages.map(\.name))
        }
        do { try config.prepareEndpoints(for: [name], log: log) } catch {
            throw PipelineRunError.stageFailed(stage: name, reason: "\(error)")
        }
        let context = try BusContext(ioThreadCPUs: config.cpus)
        // With CURVE, this process's server sockets (the stage's endpoint and its retransmit endpoint) ask
        // the context's ZAP handler about every client. Only the pipeline's own stages read them: the
        // allowed client keys are for publish sinks, which admit them on their own context.
        let zap = try config.security.map { security in
            try ZapHandler(context: context, allowedClientKeys: [security.client.publicKey]) { log("\(name): \($0)") }
        }
        let inputs = s.inputs.map { input in (input, config.stage(named: input)!.endpoint) }
        let actor = StageActor(
            config: s,
            wiring: StageWiring(
                bind: s.type.isSink ? nil : s.endpoint, inputs: inputs,
                readers: config.consumers(of: s.name), readerTimeoutSeconds: config.readerTimeoutSeconds,
                security: config.security, compression: config.compression(on: s.endpoint), resuming: resuming,
                inputNumbering: config.inputNumbering(of: s.name),
                recomputation: resuming ? config.recomputation(for: s.name) : nil,
                retransmit: config.retransmitEndpoint(of: s.name).map { ($0, config.retransmit) },
                inputRetransmitEndpoints: s.inputs.map { config.retransmitEndpoint(of: $0) }),
            context: context, cpus: config.cpus, maximumMessageBytes: config.maximumMessageBytes, stop: stop, log: log)
        let report: StageReport
        do { report = try await runActors([actor], stop: stop)[0] } catch {
            zap?.stop()
            throw error
        }
        zap?.stop()
        // This process is about to exit: what its closed output still queues for a slow reader (the
        // end of stream among it) must reach that reader first.
        if !context.finishDelivery(waitingAtMostSeconds: 10) {
            log("\(name): its readers did not take everything it sent within 10 s; what was left is lost")
        }
        return report
    }

    static func runActors(_ actors: [StageActor], stop: StopToken) async throws -> [StageReport] {
        try await withThrowingTaskGroup(of: Result<StageReport, Error>.self) { group in
            for a in actors {
                group.addTask {
                    do { return .success(try await a.run()) } catch {
                        // One stage failed: ask the others to stop rather than wait for it forever.
                        stop.request(.stage)
                        if let named = error as? PipelineRunError { return .failure(named) }
                        return .failure(PipelineRunError.stageFailed(stage: a.config.name, reason: "\(error)"))
                    }
                }
            }
            var reports: [StageReport] = []
            var firstError: Error?
            for try await r in group {
                switch r {
                case .success(let report): reports.append(report)
                case .failure(let e): if firstError == nil { firstError = e }
                }
            }
            if let firstError {
                // What the stages that did finish kept of an incomplete stream (a partial file) is said
                // before the error.
                for report in reports {
                    for note in report.notes where note.hasPrefix("INCOMPLETE") {
                        actors.first?.log("\(report.stage): \(note)")
                    }
                }
                throw firstError
            }
            let order = actors.map(\.config.name)
            return reports.sorted { order.firstIndex(of: $0.stage)! < order.firstIndex(of: $1.stage)! }
        }
    }
}
