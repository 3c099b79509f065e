#if canImport(Glibc)
    import Glibc
#endif

/// Starts this executable again with `arguments` (argv[0] kept), inheriting the environment.
func spawnSelf(_ arguments: [String]) throws -> pid_t {
    let argv: [String] = [CommandLine.arguments[0]] + arguments
    var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    defer { cArgs.forEach { free($0) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, "/proc/self/exe", nil, nil, &cArgs, environ)
    guard rc == 0 else {
        throw UsageError(message: "cannot start \(arguments.joined(separator: " ")): \(String(cString: strerror(rc)))")
    }
    return pid
}
