import MessageBus

/// What a stage's logic gets from the runtime when it is built.
public struct StageContext: Sendable {
    /// The stage's name in the pipeline file.
    public let stage: String
    /// One line to stderr (or the test's log), prefixed by nothing: the logic names itself.
    public let log: @Sendable (String) -> Void
    /// The pipeline's CURVE keys, for stages that bind endpoints of their own (publish sinks).
    public var security: CurveSecurity? = nil
    /// Whether this process replaces one of the same stage that was killed, and what it does with
    /// the killed one's output.
    public var output: OutputAfterRestart = .firstRun
    /// The run's stop request: sources poll it, and a stage that cannot go on asks for it.
    public var stop = StopToken()
}

/// What a stage's process does with the output of the one it replaces (`--stage NAME --resume`).
public enum OutputAfterRestart: Sendable, Equatable {
    /// Not a replacement: the output starts new.
    case firstRun
    /// The input is live: a sink continues the killed one's output instead of starting it again.
    case continues
    /// The stage recomputes its whole input (`RestartBehaviour.recomputesInput`): a sink writes its
    /// output again from the start, replacing what the killed one wrote.
    case rewrites
}

extension StageConfig {
    /// This stage's logic, built by its registered type.
    func makeLogic(
        log: @escaping @Sendable (String) -> Void, security: CurveSecurity? = nil, stop: StopToken = StopToken(),
        output: OutputAfterRestart = .firstRun
    ) throws -> StageLogic {
        try type.make(settings, StageContext(stage: name, log: log, security: security, output: output, stop: stop))
    }
}
