#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import Pipeline

/// `fusion-node --config FILE [--list-stages | --stage NAME | --supervise [--max-restarts N]]`, with
/// `--duration S` and `--set STAGE.SETTING=VALUE` overrides checked like the file.
enum PipelineCommand {
    static let help = CommandHelp(
        path: "--config", summary: "Run a pipeline file: a graph of stages (sources, transforms, sinks) over ZeroMQ.",
        positionals: "FILE",
        options: [
            OptionHelp("--stage", "NAME", "run one stage, on the endpoints the file gives"),
            OptionHelp("--list-stages", nil, "print the stage names, one per line"),
            OptionHelp("--supervise", nil, "every stage in its own process; a crashed stage is restarted"),
            OptionHelp("--max-restarts", "N", "restarts per stage under --supervise", default: "3"),
            OptionHelp(
                "--resume", nil,
                "with --stage: replaces a killed process of that stage (the supervisor passes it); recomputes a "
                    + "reproducible input, else sinks continue"),
            OptionHelp("--duration", "SECONDS", "set 'duration' of every source that has one"),
            OptionHelp(
                "--set", "STAGE.SETTING=VALUE", "override one setting (a list as [a, b]); may be repeated",
                repeatable: true),
            OptionHelp("--check", nil, "validate the file (and overrides) and exit"),
            OptionHelp("--overwrite", nil, "replace output files (CSV, report, truth) that exist; recordings never"),
        ],
        details: "fusion-node stages lists every stage type and setting. ${VAR} and ${VAR:-default} in the file come "
            + "from the environment.",
        examples: [
            "fusion-node --config Pipelines/default.yaml --duration 10",
            "BAG=run.mcap fusion-node --config Pipelines/replay-bag.yaml --set fusion.filter=complementary",
            "fusion-node --config Pipelines/replay-bag-multiprocess.yaml --supervise",
        ])

    static var environment: [String: String] {
        var environment: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { environment[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return environment
    }

    /// The overrides the command line gives, in order.
    static func overrides(_ a: Arguments) throws -> [SettingOverride] {
        var out: [SettingOverride] = []
        if let d = a.string("--duration") {
            out.append(
                SettingOverride(
                    stage: SettingOverride.everySource, setting: "duration_s", value: d, origin: "--duration \(d)"))
        }
        for text in a.strings("--set") { out.append(try SettingOverride(parsing: text, origin: "--set \(text)")) }
        return out
    }

    /// The override options as given, for the supervisor's child processes.
    static func overrideArguments(_ a: Arguments) -> [String] {
        (a.string("--duration").map { ["--duration", $0] } ?? []) + a.strings("--set").flatMap { ["--set", $0] }
            + (a.has("--overwrite") ? ["--overwrite"] : [])
    }

    static func run(_ args: [String]) async throws -> ExitCode {
        let a = try Arguments(args.filter { $0 != "--config" }, help)
        try a.requirePositionals(1...1)
        let path = a.positionals[0]
        for (option, needs) in [("--resume", "--stage"), ("--max-restarts", "--supervise")]
        where (a.has(option) || a.string(option) != nil) && !(a.has(needs) || a.string(needs) != nil) {
            throw UsageError(message: "\(option) applies to \(needs), which was not given", command: "--config")
        }
        let config = try PipelineConfig.load(
            path: path, environment: environment, overrides: try overrides(a))
        warnOfFormerNames(config)
        if a.has("--check") {
            print("\(path): valid, \(config.stages.count) stages: \(config.stages.map(\.name).joined(separator: ", "))")
            return .complete
        }
        if a.has("--list-stages") {
            for s in config.stages { print(s.name) }
            return .complete
        }
        // A stage that is not in the file is a usage error, found before anything starts.
        if let name = a.string("--stage"), config.stage(named: name) == nil {
            let names = config.stages.map(\.name)
            throw UsageError(
                message: "--stage \(name): no such stage in \(path)\(didYouMean(name, in: names)) (stages: "
                    + "\(names.joined(separator: ", ")))", command: "--config")
        }
        // A stage continuing after a restart (--resume) continues its own files.
        if !a.has("--resume") {
            try config.refuseExistingOutputs(only: a.string("--stage").map { [$0] }, overwriting: a.has("--overwrite"))
        }
        let stop = StopToken().handleSignals()
        endWithParent(stop)
        if a.has("--supervise") {
            return try Supervisor(
                configPath: path, config: config, maxRestarts: try a.integer("--max-restarts", minimum: 0) ?? 3,
                extraArguments: overrideArguments(a), stop: stop
            ).run()
        }
        let reports: [StageReport]
        if let name = a.string("--stage") {
            reports = [try await PipelineRunner.runStage(config, named: name, resuming: a.has("--resume"), stop: stop)]
        } else {
            reports = try await PipelineRunner.runAll(config, stop: stop)
        }
        for r in reports { writeStandardError("fusion-node: \(r)\n") }
        if stop.interruptedBySignal { return .interrupted }
        return .finished(reports)
    }
}

extension PipelineCommand {
    /// In a run started by another fusion-node (a supervisor's stage, a benchmark's process): stop,
    /// abandoning the run, once that process is no longer the parent (`StopToken.endWith`), so no
    /// stage outlives a parent that was killed and no sink renames a file holding part of the stream
    /// onto its final name. A variable inherited from further up (the parent is another) is ignored.
    static func endWithParent(_ stop: StopToken) {
        guard let parent = getenv(parentPidVariable).flatMap({ pid_t(String(cString: $0)) }) else { return }
        stop.endWith(parent: parent) { writeStandardError("fusion-node: \($0)\n") }
    }
}

/// Starts every stage as a child process (`--stage NAME`), restarts one that crashes, forwards
/// SIGINT/SIGTERM, and exits 0 when every stage has finished cleanly.
struct Supervisor {
    let configPath: String
    let config: PipelineConfig
    let maxRestarts: Int
    /// The command line's overrides, passed on to every stage process.
    var extraArguments: [String] = []
    /// The run's stop request (signals): forwarded to every stage process as SIGTERM.
    var stop = StopToken()

    func spawn(_ stage: String, resuming: Bool = false) throws -> pid_t {
        setenv(EndpointPolicy.runVariable, String(getpid()), 1)
        let pid = try spawnSelf(
            ["--config", configPath, "--stage", stage] + (resuming ? ["--resume"] : []) + extraArguments)
        writeStandardError("fusion-node: supervisor: started \(stage) (pid \(pid))\n")
        return pid
    }

    func run() throws -> ExitCode {
        var running: [pid_t: String] = [:]
        var restarts: [String: Int] = [:]
        var failed = false
        var finishedWithLoss = false
        var finishedWithWarning = false
        for s in config.stages { running[try spawn(s.name)] = s.name }
        var forwarded = false
        while !running.isEmpty {
            if stop.requested && !forwarded {
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
            if !signaled && code == ExitCode.finishedWithLoss.rawValue {
                // It ran to its end and reported what it lost: restarting it would not bring that back.
                writeStandardError("fusion-node: supervisor: \(stage) finished with loss reported\n")
                finishedWithLoss = true
                continue
            }
            if !signaled && code == ExitCode.finishedWithWarning.rawValue {
                writeStandardError("fusion-node: supervisor: \(stage) finished with a warning (see its summary)\n")
                finishedWithWarning = true
                continue
            }
            let why = signaled ? "killed by signal \(status & 0x7f)" : "exited with status \(code)"
            if forwarded {
                // Asked to stop, a stage ends with SIGTERM's default action or exits 130 (interrupted
                // before its input ended): a clean stop, not a failure.
                let stoppedCleanly = signaled ? (status & 0x7f) == SIGTERM : code == ExitCode.interrupted.rawValue
                if stoppedCleanly {
                    writeStandardError("fusion-node: supervisor: \(stage) stopped\n")
                } else {
                    writeStandardError("fusion-node: supervisor: \(stage) \(why) while stopping\n")
                    failed = true
                }
                continue
            }
            let n = restarts[stage, default: 0]
            if n < maxRestarts {
                restarts[stage] = n + 1
                writeStandardError(
                    "fusion-node: supervisor: \(stage) \(why); restarting (\(n + 1) of \(maxRestarts))\n")
                usleep(UInt32(200_000 * (n + 1)))
                running[try spawn(stage, resuming: true)] = stage
            } else {
                writeStandardError(
                    "fusion-node: supervisor: \(stage) \(why); giving up after \(maxRestarts) restarts\n")
                failed = true
                for pid in running.keys { kill(pid, SIGTERM) }
                forwarded = true
            }
        }
        return outcome(
            restarts: restarts, failed: failed, finishedWithLoss: finishedWithLoss,
            finishedWithWarning: finishedWithWarning)
    }

    /// The supervised run's exit code once every stage has ended, saying what the restarts cost: nothing
    /// when every restarted stage rebuilds what it held, what was in flight otherwise (exit 3).
    func outcome(restarts: [String: Int], failed: Bool, finishedWithLoss: Bool, finishedWithWarning: Bool) -> ExitCode {
        if failed { return .failed }
        if stop.interruptedBySignal { return .interrupted }
        let total = restarts.values.reduce(0, +)
        if total > 0 {
            let perStage = restarts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            let lossy = restarts.keys.filter { !config.restartIsLossless($0) }.sorted()
            if lossy.isEmpty {
                // Reproducible streams: a source played again, a stage recomputed its input; readers
                // dropped by number what they had already read. Live file sinks read again what their
                // inputs still held (a replacement that found a gap reported it: exit 3 above).
                if !finishedWithLoss {
                    writeStandardError(
                        "fusion-node: supervisor: \(total) restart(s) (\(perStage)); each rebuilt what the killed "
                            + "process held (from the recording, or its input's retransmit buffer): nothing lost\n")
                }
            } else {
                writeStandardError(
                    "fusion-node: supervisor: \(total) restart(s) (\(perStage)); what was in flight inside a killed "
                        + "\(lossy.joined(separator: ", ")) process is lost (a live stream, or output sent outside the "
                        + "pipeline): exit 3\n")
                return .finishedWithLoss
            }
        }
        if finishedWithLoss { return .finishedWithLoss }
        return finishedWithWarning ? .finishedWithWarning : .complete
    }
}

/// Warns once per run of every setting a pipeline gave under its former name; a process a run started
/// (which loads the same file) leaves that to the one that started it.
func warnOfFormerNames(_ config: PipelineConfig) {
    guard PipelineCommand.environment[parentPidVariable] == nil else { return }
    for d in config.deprecations { writeStandardError("fusion-node: warning: \(d)\n") }
}
