#if canImport(Glibc)
    import Glibc
#endif

import Foundation

/// Set by SIGINT/SIGTERM/SIGHUP handlers (1), by a stage that asks the pipeline to stop (2, e.g. stdout
/// closed) or when the run is abandoned (3: the process that started it is gone); every stage loop polls it.
nonisolated(unsafe) var pipelineStopRequested: sig_atomic_t = 0
/// The process this run must not outlive (`PipelineSignals.endWith(parent:)`); 0 = none. Set once,
/// before any stage starts.
nonisolated(unsafe) var pipelineParent: pid_t = 0

public enum PipelineSignals {
    /// Installs SIGINT/SIGTERM handlers that ask every stage to drain and stop; SIGHUP (the terminal
    /// gone) does the same, so a run or a watch whose terminal closed ends instead of spinning on it.
    public static func install() {
        signal(SIGINT) { _ in if pipelineStopRequested != 3 { pipelineStopRequested = 1 } }
        signal(SIGTERM) { _ in if pipelineStopRequested != 3 { pipelineStopRequested = 1 } }
        signal(SIGHUP) { _ in if pipelineStopRequested != 3 { pipelineStopRequested = 1 } }
        signal(SIGPIPE, SIG_IGN)
    }
    public static var stopRequested: Bool { pipelineStopRequested != 0 }
    /// True when SIGINT or SIGTERM (not a stage) stopped the run, or it was abandoned.
    public static var interruptedBySignal: Bool { pipelineStopRequested == 1 || pipelineStopRequested == 3 }
    /// True when the run was abandoned (`abandon()`, or the parent given to `endWith(parent:)` is gone,
    /// asked of the kernel now: a stage finishing in the 0.2 s before the watcher notices must not take
    /// an upstream stage's clean end for the whole stream): its outputs are incomplete whatever their
    /// inputs said, so sinks keep them under their `.partial` names.
    public static var abandoned: Bool {
        if pipelineStopRequested == 3 { return true }
        if pipelineParent != 0 && getppid() != pipelineParent {
            abandon()
            return true
        }
        return false
    }

    /// Stops the run, abandoning it, once `parent` is no longer this process's parent (it was killed,
    /// even with SIGKILL, which leaves it no chance to stop its children): a thread polls every 0.2 s
    /// (the kernel's parent-death signal follows the thread that spawned the child, and parents spawn
    /// from pool threads that may exit), and `abandoned` asks at once. Does nothing when `parent` is
    /// not the parent now.
    public static func endWith(parent: pid_t, log: @escaping @Sendable (String) -> Void) {
        guard parent > 1, getppid() == parent else { return }
        pipelineParent = parent
        let watcher = Thread {
            while getppid() == parent { usleep(200_000) }
            log("the process that started this run (pid \(parent)) is gone; stopping, outputs kept as .partial")
            abandon()
        }
        watcher.name = "parent-watch"
        watcher.start()
    }
    /// Stops the run as incomplete: a stage process whose supervisor was killed cannot know how much of
    /// the stream it was meant to see, so nothing it wrote may look finished.
    public static func abandon() { pipelineStopRequested = 3 }
    /// For stages, tests and embedding: ask the running pipeline to stop, or clear the request.
    public static func requestStop(_ stop: Bool = true) { pipelineStopRequested = stop ? 2 : 0 }
}
