#if canImport(Glibc)
    import Glibc
#endif

/// Starts this executable again with `arguments` (argv[0] kept), inheriting the environment; with
/// `stdout`, the child's standard output is that descriptor.
func spawnSelf(_ arguments: [String], stdout: Int32? = nil) throws -> pid_t {
    let argv: [String] = [CommandLine.arguments[0]] + arguments
    var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    defer { cArgs.forEach { free($0) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let stdout { posix_spawn_file_actions_adddup2(&actions, stdout, 1) }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, "/proc/self/exe", &actions, nil, &cArgs, environ)
    guard rc == 0 else {
        throw UsageError(message: "cannot start \(arguments.joined(separator: " ")): \(String(cString: strerror(rc)))")
    }
    return pid
}
