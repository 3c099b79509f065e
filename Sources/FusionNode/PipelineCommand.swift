#if canImport(Glibc)
    import Glibc
#endif
import Pipeline

/// `fusion-node --config FILE [--list-stages | --stage NAME | --supervise [--max-restarts N]]`.
enum PipelineCommand {
    static let usage = """
        fusion-node --config pipeline.yaml                 every stage in this process (inproc)
        fusion-node --config pipeline.yaml --stage NAME    one stage, on the endpoints the file gives
        fusion-node --config pipeline.yaml --list-stages   stage names, one per line
        fusion-node --config pipeline.yaml --supervise     every stage in its own process; a crashed
                                                           stage is restarted (--max-restarts N, default 3)
        """

    static func load(_ path: String) throws -> PipelineConfig {
        var environment: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { environment[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return try PipelineConfig.load(path: path, environment: environment)
    }

    static func run(_ args: [String]) async throws -> Int32 {
        let a = try Arguments(
            args, valued: ["--config", "--stage", "--max-restarts"], flags: ["--list-stages", "--supervise"])
        guard let path = a.string("--config"), a.positionals.isEmpty else { throw UsageError(message: usage) }
        let config = try load(path)
        if a.has("--list-stages") {
            for s in config.stages { print(s.name) }
            return 0
        }
        PipelineSignals.install()
        if a.has("--supervise") {
            return try Supervisor(
                configPath: path, config: config, maxRestarts: try a.integer("--max-restarts", minimum: 0) ?? 3
            ).run()
        }
        let reports: [StageReport]
        if let name = a.string("--stage") {
            reports = [try await PipelineRunner.runStage(config, named: name)]
        } else {
            reports = try await PipelineRunner.runAll(config)
        }
        for r in reports { writeStandardError("fusion-node: \(r)\n") }
        return 0
    }
}

/// Starts every stage as a child process (`--stage NAME`), restarts one that crashes, forwards
/// SIGINT/SIGTERM, and exits 0 when every stage has finished cleanly.
struct Supervisor {
    let configPath: String
    let config: PipelineConfig
    let maxRestarts: Int

    func spawn(_ stage: String) throws -> pid_t {
        let pid = try spawnSelf(["--config", configPath, "--stage", stage])
        writeStandardError("fusion-node: supervisor: started \(stage) (pid \(pid))\n")
        return pid
    }

    func run() throws -> Int32 {
        var running: [pid_t: String] = [:]
        var restarts: [String: Int] = [:]
        var failed = false
        for s in config.stages { running[try spawn(s.name)] = s.name }
        var forwarded = false
        while !running.isEmpty {
            if PipelineSignals.stopRequested && !forwarded {
                forwarded = true
                for pid in running.keys { kill(pid, SIGTERM) }
            }
            var status: Int32 = 0
            let pid = waitpid(-1, &status, WNOHANG)
            if pid <= 0 {
                usleep(50_000)
                continue
            }
            guard let stage = running.removeValue(forKey: pid) else { continue }
            let signaled = (status & 0x7f) != 0 && (status & 0x7f) != 0x7f
            let code = (status >> 8) & 0xff
            if !signaled && code == 0 {
                writeStandardError("fusion-node: supervisor: \(stage) finished\n")
                continue
            }
            let why = signaled ? "killed by signal \(status & 0x7f)" : "exited with status \(code)"
            if forwarded {
                writeStandardError("fusion-node: supervisor: \(stage) \(why) while stopping\n")
                if !signaled || (status & 0x7f) != SIGTERM { failed = true }
                continue
            }
            let n = restarts[stage, default: 0]
            if n < maxRestarts {
                restarts[stage] = n + 1
                writeStandardError(
                    "fusion-node: supervisor: \(stage) \(why); restarting (\(n + 1) of \(maxRestarts))\n")
                usleep(UInt32(200_000 * (n + 1)))
                running[try spawn(stage)] = stage
            } else {
                writeStandardError(
                    "fusion-node: supervisor: \(stage) \(why); giving up after \(maxRestarts) restarts\n")
                failed = true
                for pid in running.keys { kill(pid, SIGTERM) }
                forwarded = true
            }
        }
        return failed ? 1 : 0
    }
}
