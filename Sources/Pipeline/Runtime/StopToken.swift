#if canImport(Glibc)
    import Glibc
#endif

import Foundation
import Synchronization

/// One run's request to stop, polled by every stage loop. A run gets its own (`PipelineRunner` takes
/// one), so runs in one process (tests, an application embedding the pipeline) stop independently and
/// nothing about stopping is global. The command line maps SIGINT, SIGTERM and SIGHUP onto a token
/// (`handleSignals()`); a stage asks for a stop (standard output closed); the runner asks for one when a
/// stage fails; a stage process whose supervisor died abandons its run (`endWith(parent:log:)`).
/// Thread-safe: an atomic, cheap enough to poll per message.
public final class StopToken: Sendable {
    /// Why the run stops.
    public enum Reason: Int, Sendable {
        /// SIGINT, SIGTERM or SIGHUP (the terminal gone).
        case signal = 1
        /// A stage or the runner asked (standard output closed, another stage failed).
        case stage = 2
        /// The process that started the run is gone: the outputs are incomplete whatever the inputs said.
        case abandoned = 3
    }

    private let state = Atomic<Int>(0)
    /// The process this run must not outlive; 0 = none.
    private let parent = Atomic<Int32>(0)

    public init() {}

    /// True once anything asked the run to stop.
    public var requested: Bool { state.load(ordering: .relaxed) != 0 }

    /// Why the run stops; nil while it runs.
    public var reason: Reason? { Reason(rawValue: state.load(ordering: .relaxed)) }

    /// True when a signal (not a stage) stopped the run, or it was abandoned.
    public var interruptedBySignal: Bool { reason == .signal || abandoned }

    /// True when the run was abandoned (`request(.abandoned)`, or the parent given to
    /// `endWith(parent:log:)` is gone, asked of the kernel now: a stage finishing in the 0.2 s before the
    /// watcher notices must not take an upstream stage's clean end for the whole stream): sinks keep their
    /// outputs under their `.partial` names.
    public var abandoned: Bool {
        if reason == .abandoned { return true }
        let p = parent.load(ordering: .relaxed)
        if p != 0 && getppid() != p {
            request(.abandoned)
            return true
        }
        return false
    }

    /// Asks the run to stop. An abandoned run stays abandoned, and a signal overrides a stage's request
    /// (the user interrupted it either way).
    public func request(_ reason: Reason = .stage) {
        switch reason {
        case .abandoned: state.store(reason.rawValue, ordering: .relaxed)
        case .stage: _ = state.compareExchange(expected: 0, desired: reason.rawValue, ordering: .relaxed)
        case .signal:
            var current = state.load(ordering: .relaxed)
            while current == 0 || current == Reason.stage.rawValue {
                let (exchanged, now) = state.compareExchange(
                    expected: current, desired: reason.rawValue, ordering: .relaxed)
                if exchanged { return }
                current = now
            }
        }
    }

    /// Maps SIGINT, SIGTERM and SIGHUP onto this token (their default actions are replaced: the stages
    /// drain and stop instead), and ignores SIGPIPE (a closed reader is an error the writer sees). Meant
    /// once per process, by the command line: the handlers write the signal's number into a pipe (the
    /// one thing a handler may safely do, whichever thread the kernel picks), and a thread of this
    /// token's reads it and asks the token to stop. Returns the token, for
    /// `let stop = StopToken().handleSignals()`.
    @discardableResult
    public func handleSignals() -> StopToken {
        let fd = signalPipe.read
        guard fd >= 0 else { return self }
        signal(SIGPIPE, SIG_IGN)
        for number in [SIGINT, SIGTERM, SIGHUP] {
            signal(number) { received in
                var byte = UInt8(truncatingIfNeeded: received)
                _ = write(signalPipe.write, &byte, 1)
            }
        }
        let reader = Thread { [weak self] in
            var byte: UInt8 = 0
            while true {
                let n = read(fd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                guard n == 1 else { return }
                guard let token = self else {
                    // The run is over: the signal does what it does by default.
                    signal(Int32(byte), SIG_DFL)
                    kill(getpid(), Int32(byte))
                    return
                }
                token.request(.signal)
            }
        }
        reader.name = "signals"
        reader.start()
        return self
    }

    /// Abandons the run once `parent` is no longer this process's parent (it was killed, even with
    /// SIGKILL, which leaves it no chance to stop its children): a thread polls every 0.2 s (the kernel's
    /// parent-death signal follows the thread that spawned the child, and parents spawn from pool threads
    /// that may exit), and `abandoned` asks at once. Does nothing when `parent` is not the parent now.
    public func endWith(parent: pid_t, log: @escaping @Sendable (String) -> Void) {
        guard parent > 1, getppid() == parent else { return }
        self.parent.store(parent, ordering: .relaxed)
        let watcher = Thread { [weak self] in
            while getppid() == parent {
                if self == nil { return }
                usleep(200_000)
            }
            log("the process that started this run (pid \(parent)) is gone; stopping, outputs kept as .partial")
            self?.request(.abandoned)
        }
        watcher.name = "parent-watch"
        watcher.start()
    }
}

/// The pipe the stop signals' handlers write into: created once, before the first handler is installed,
/// and never changed (a constant, not state). The write end does not block: a handler never waits.
private let signalPipe: (read: Int32, write: Int32) = {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else { return (-1, -1) }
    _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
    _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
    _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
    return (fds[0], fds[1])
}()
