#if canImport(Glibc)
    import Glibc
#endif

/// The environment variable that tells a process started by `spawnSelf` which process started it.
let parentPidVariable = "GYROCOMPASS_PARENT_PID"

/// Starts this executable again with `arguments` (argv[0] kept), inheriting the environment plus
/// `parentPidVariable` (a pipeline run it starts ends with this process: `PipelineCommand.endWithParent`);
/// with `stdout`, the child's standard output is that descriptor.
func spawnSelf(_ arguments: [String], stdout: Int32? = nil) throws -> pid_t {
    let argv: [String] = [CommandLine.arguments[0]] + arguments
    var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    defer { cArgs.forEach { free($0) } }
    var environment = PipelineCommand.environment
    environment[parentPidVariable] = String(getpid())
    var cEnvironment: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { cEnvironment.forEach { free($0) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let stdout { posix_spawn_file_actions_adddup2(&actions, stdout, 1) }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, "/proc/self/exe", &actions, nil, &cArgs, &cEnvironment)
    guard rc == 0 else {
        throw UsageError(message: "cannot start \(arguments.joined(separator: " ")): \(String(cString: strerror(rc)))")
    }
    return pid
}
