#if canImport(Glibc)
    import Glibc
#endif

/// Pins threads to CPUs. sched_setaffinity is a GNU extension that Swift's Glibc module does not
/// import, so it is looked up in the C library at run time.
enum CPUAffinity {
    /// CPUs the system has configured (online or not).
    static var configuredCPUs: Int { max(1, sysconf(Int32(_SC_NPROCESSORS_CONF))) }

    struct Failure: Error, CustomStringConvertible {
        let cpus: [Int]
        let reason: String
        var description: String { "cannot pin to CPU(s) \(cpus.map(String.init).joined(separator: ", ")): \(reason)" }
    }

    private typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32

    /// Restricts the calling thread (and the threads it creates afterwards) to `cpus`.
    static func pinCurrentThread(to cpus: [Int]) throws(Failure) {
        guard !cpus.isEmpty else { return }
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sched_setaffinity") else {
            throw Failure(cpus: cpus, reason: "sched_setaffinity is not available")
        }
        let setAffinity = unsafeBitCast(symbol, to: SetAffinity.self)
        var set = cpu_set_t()
        let fits = withUnsafeMutableBytes(of: &set) { bits -> Bool in
            for cpu in cpus {
                guard cpu >= 0, cpu / 8 < bits.count else { return false }
                bits[cpu / 8] |= UInt8(1) << UInt8(cpu % 8)
            }
            return true
        }
        guard fits else { throw Failure(cpus: cpus, reason: "CPU number out of range") }
        let rc = withUnsafeBytes(of: &set) { setAffinity(0, $0.count, $0.baseAddress!) }
        guard rc == 0 else { throw Failure(cpus: cpus, reason: String(cString: strerror(errno))) }
    }
}
