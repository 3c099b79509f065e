#if canImport(Glibc)
    import Glibc
#endif

/// Set by SIGINT/SIGTERM/SIGHUP handlers (1) or by a stage that asks the pipeline to stop (2, e.g. stdout
/// closed); every stage loop polls it.
nonisolated(unsafe) var pipelineStopRequested: sig_atomic_t = 0

public enum PipelineSignals {
    /// Installs SIGINT/SIGTERM handlers that ask every stage to drain and stop; SIGHUP (the terminal
    /// gone) does the same, so a run or a watch whose terminal closed ends instead of spinning on it.
    public static func install() {
        signal(SIGINT) { _ in pipelineStopRequested = 1 }
        signal(SIGTERM) { _ in pipelineStopRequested = 1 }
        signal(SIGHUP) { _ in pipelineStopRequested = 1 }
        signal(SIGPIPE, SIG_IGN)
    }
    public static var stopRequested: Bool { pipelineStopRequested != 0 }
    /// True when SIGINT or SIGTERM (not a stage) stopped the run.
    public static var interruptedBySignal: Bool { pipelineStopRequested == 1 }
    /// For stages, tests and embedding: ask the running pipeline to stop, or clear the request.
    public static func requestStop(_ stop: Bool = true) { pipelineStopRequested = stop ? 2 : 0 }
}
