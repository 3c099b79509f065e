import Foundation

/// A serial executor backed by one dedicated thread. Stage actors run on it, so the blocking ZeroMQ
/// calls in their loops never occupy Swift's cooperative thread pool (two threads on this machine).
final class ThreadExecutor: SerialExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false

    /// Why the thread could not be pinned to its CPUs, if it could not (read after the first job).
    private(set) var pinningFailure: CPUAffinity.Failure?

    init(name: String, cpus: [Int] = []) {
        // Named from inside: on Linux a new thread inherits its creator's name, and Foundation's
        // setter does not rename a thread from outside. Names are at most 15 bytes.
        let short = String(name.utf8.prefix(15)) ?? "stage"
        let thread = Thread { [self] in
            // pthread_setname_np needs _GNU_SOURCE, which Swift's Glibc module lacks; /proc does the same.
            if let f = fopen("/proc/thread-self/comm", "w") {
                fputs(short, f)
                fclose(f)
            }
            do throws(CPUAffinity.Failure) { try CPUAffinity.pinCurrentThread(to: cpus) } catch {
                self.pinningFailure = error
            }
            self.runLoop()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.append(unowned)
        condition.signal()
        condition.unlock()
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }

    /// Lets the thread end once its queued jobs have run.
    func shutdown() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func runLoop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty && stopping {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedSerialExecutor())
        }
    }
}
