#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import MessageBus
import Pipeline
import YAML

/// `fusion-node bench pipeline`: source -> calibration -> fusion -> sink, in one process
/// and with every stage in its own process over ipc, next to raw libzmq one-hop throughput measured
/// in the same run; then source-to-sink latency at a steady 1 kHz across four processes.
enum PipelineBench {
    static func pipelineText(
        samples: Int, rate: Double, realtime: Bool, directory: String?, report: String, cpus: [Int] = [],
        tcpBasePort: Int? = nil, header: String = ""
    ) -> String {
        let names = ["source", "calibration", "fusion"]
        func endpoint(_ name: String) -> String {
            if let port = tcpBasePort { return "\n    endpoint: tcp://127.0.0.1:\(port + names.firstIndex(of: name)!)" }
            return directory.map { "\n    endpoint: ipc://\($0)/\(name)" } ?? ""
        }
        return header + (cpus.isEmpty ? "" : "cpus: [\(cpus.map(String.init).joined(separator: ", "))]\n") + """
            stages:
              source:
                type: simulator
                rate_hz: \(rate)
                duration_s: \(Double(samples) / rate)
                realtime: \(realtime)
                hard_iron_ut: [1, -2, 0.5]
                stamp: \(realtime ? "wall" : "simulated")\(endpoint("source"))
              calibration:
                type: calibration
                inputs: [source]
                hard_iron_ut: [1, -2, 0.5]\(endpoint("calibration"))
              fusion:
                type: fusion
                inputs: [calibration]\(endpoint("fusion"))
              sink:
                type: measure
                inputs: [fusion]
                report_path: \(report)
            """
    }

    /// Raw one-hop throughput: XPUB (no-drop, back-pressure) to SUB, 64-byte messages.
    static func rawZeroMQ(_ endpoint: String, messages: Int) throws -> Double {
        let context = BusContext()
        let pub = try BusSocket(context, .xpub)
        try pub.set(.publisherNoDrop, 1)
        try pub.set(.sendHighWaterMark, 10_000)
        try pub.bind(endpoint)
        let sub = try BusSocket(context, .sub)
        try sub.set(.receiveHighWaterMark, 10_000)
        try sub.subscribe([])
        try sub.connect(endpoint)
        while try pub.receive(timeoutMilliseconds: 100)?.first != 1 {}
        let payload = [UInt8](repeating: 7, count: 64)
        let t0 = Clocks.monotonicSeconds()
        var sent = 0, received = 0
        while received < messages {
            while sent < messages, try pub.send(payload, blocking: false) { sent += 1 }
            while let _ = try sub.receive(timeoutMilliseconds: 0) { received += 1 }
        }
        return Double(messages) / (Clocks.monotonicSeconds() - t0)
    }

    /// Steady-state rate (first to last message at the sink) and latency from a measure sink's report.
    static func sinkReport(_ path: String) -> (rate: Double, p50: Double?, p99: Double?, max: Double?) {
        guard let text = YAMLParser.readFile(path) else { return (0, nil, nil, nil) }
        func value(_ key: String) -> Double? {
            guard let r = text.split(separator: ",").first(where: { $0.contains("\"\(key)\"") }) else { return nil }
            return Double(r.split(separator: ":").last!.filter { "0123456789.e-+".contains($0) })
        }
        let n = value("messages") ?? 0, s = value("seconds") ?? 0
        return (s > 0 ? n / s : 0, value("p50_us"), value("p99_us"), value("max_us"))
    }

    static func median(_ v: [Double]) -> Double {
        let s = v.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    /// Runs each stage in a process of its own and waits for all; the first that fails stops the
    /// others (none is left running) and is named in the error.
    static func runProcesses(_ configPath: String, stages: [String], stop: StopToken) throws -> Double {
        let t0 = Clocks.monotonicSeconds()
        var running: [pid_t: String] = [:]
        var failure: String?
        func stopAll() {
            for pid in running.keys { kill(pid, SIGTERM) }
        }
        for stage in stages.reversed() {
            do { running[try spawnSelf(["--config", configPath, "--stage", stage])] = stage } catch {
                failure = "\(error)"
                stopAll()
                break
            }
        }
        var stopping = failure != nil
        while !running.isEmpty {
            if stop.requested && !stopping {
                stopping = true
                stopAll()
            }
            var status: Int32 = 0
            let pid = waitpid(-1, &status, WNOHANG)
            if pid <= 0 {
                usleep(20_000)
                continue
            }
            guard let stage = running.removeValue(forKey: pid) else { continue }
            if status != 0 && failure == nil && !stopping {
                let signaled = (status & 0x7f) != 0
                failure =
                    "stage '\(stage)' of \(configPath) "
                    + (signaled
                        ? "was killed by signal \(status & 0x7f)" : "exited with status \((status >> 8) & 0xff)")
                stopping = true
                stopAll()
            }
        }
        if let failure { throw CommandFailure(message: "bench pipeline: \(failure); the other stages were stopped") }
        if stop.requested { throw CommandFailure(message: "bench pipeline: stopped on request") }
        return Clocks.monotonicSeconds() - t0
    }

    static func run(_ args: [String]) async throws -> ExitCode {
        let a = try Arguments(args, BenchCommand.pipelineHelp)
        // Long enough that start-up (thread creation, first allocations) is a small part of the run
        // (docs/benchmarks.md).
        let samples = try a.integer("--samples", minimum: 1000) ?? 600_000
        let rounds = try a.integer("--rounds", minimum: 1) ?? 3
        let latencyRuns = try a.integer("--latency-runs", minimum: 0) ?? 1
        let stop = StopToken().handleSignals()
        var dirTemplate = Array("/tmp/gyrocompass-bench-XXXXXX".utf8CString)
        guard let dirPointer = mkdtemp(&dirTemplate) else {
            throw UsageError(message: "cannot create a temporary folder")
        }
        let dir = String(cString: dirPointer)
        defer { try? FileManager.default.removeItem(atPath: dir) }

        let stages = ["source", "calibration", "fusion", "sink"]
        let multiPath = dir + "/multi.yaml", multiReport = dir + "/multi.json", oneReport = dir + "/one.json"
        let w = try BufferedFileWriter(path: multiPath)
        try w.write(pipelineText(samples: samples, rate: 1000, realtime: false, directory: dir, report: multiReport))
        try w.close()

        // Interleaved rounds: this machine's speed drifts, so every number is set against the raw
        // libzmq baseline measured right before it.
        var rawInproc: [Double] = [], rawIpc: [Double] = [], oneRates: [Double] = [], multiRates: [Double] = []
        for round in 1...rounds {
            let inproc = try rawZeroMQ("inproc://raw-bench-\(round)", messages: 1_000_000)
            let ipc = try rawZeroMQ("ipc://\(dir)/raw-\(round)", messages: 1_000_000)
            let one = try PipelineConfig.parse(
                pipelineText(samples: samples, rate: 1000, realtime: false, directory: nil, report: oneReport),
                file: "<bench>", environment: [:])
            let t0 = Clocks.monotonicSeconds()
            let reports = try await PipelineRunner.runAll(one, stop: stop, log: { _ in })
            let oneSeconds = Clocks.monotonicSeconds() - t0
            let fused = reports.first { $0.stage == "fusion" }!.published / 2
            let oneRate = sinkReport(oneReport).rate
            // The previous round's report goes: a stage process refuses to replace an output.
            unlink(multiReport)
            let multiSeconds = try runProcesses(multiPath, stages: stages, stop: stop)
            let multiRate = sinkReport(multiReport).rate
            rawInproc.append(inproc)
            rawIpc.append(ipc)
            oneRates.append(oneRate)
            multiRates.append(multiRate)
            print(
                "round \(round): raw libzmq one hop (64-byte messages) inproc \(format(inproc, 0)) msg/s, ipc "
                    + "\(format(ipc, 0)) msg/s; "
                    + "one process, 5 stages (inproc) \(format(oneRate, 0)) samples/s steady state (end to end "
                    + "\(format(Double(fused) / oneSeconds, 0))); "
                    + "four processes (ipc) \(format(multiRate, 0)) samples/s steady state (end to end with "
                    + "process start-up \(format(Double(samples) / multiSeconds, 0)))"
            )
        }
        func range(_ v: [Double]) -> String { "\(format(v.min()!, 0))-\(format(v.max()!, 0))" }
        let oneRatio = zip(oneRates, rawInproc).map { $0 / $1 }, multiRatio = zip(multiRates, rawIpc).map { $0 / $1 }
        print(
            "one process, 5 stages (inproc): median \(format(median(oneRates), 0)) samples/s over \(rounds) "
                + "round(s) (\(range(oneRates))); "
                + "\(format(median(oneRatio), 3)) x the raw inproc one-hop message rate of the same round")
        print(
            "four processes (ipc): median \(format(median(multiRates), 0)) samples/s (\(range(multiRates))); "
                + "\(format(median(multiRatio), 3)) x the raw ipc one-hop message rate of the same round")

        mkdir(dir + "/l", 0o755)
        for run in 0..<latencyRuns { try latencyRun(run, directory: dir, stages: stages, stop: stop) }
        return .complete
    }

    /// One latency measurement at a steady 1 kHz: one ipc hop as the baseline, the four processes, and
    /// the same pinned to CPU 0; printed as one line.
    static func latencyRun(_ run: Int, directory dir: String, stages: [String], stop: StopToken) throws {
        // Baseline first: the same source straight into the sink, one ipc hop, no stage between.
        let hopPath = dir + "/hop.yaml", hopReport = dir + "/hop-\(run).json"
        let h = try BufferedFileWriter(path: hopPath)
        try h.write(
            """
            stages:
              source:
                type: simulator
                rate_hz: 1000
                duration_s: 11
                realtime: true
                stamp: wall
                endpoint: ipc://\(dir)/l/hop-source
              sink:
                type: measure
                inputs: [source]
                topic: imu/data_raw
                report_path: \(hopReport)
            """)
        try h.close()
        _ = try runProcesses(hopPath, stages: ["source", "sink"], stop: stop)
        let hop = sinkReport(hopReport)
        let latencyPath = dir + "/latency.yaml", latencyReport = dir + "/latency-\(run).json"
        let l = try BufferedFileWriter(path: latencyPath)
        try l.write(
            pipelineText(samples: 11_000, rate: 1000, realtime: true, directory: dir + "/l", report: latencyReport))
        try l.close()
        _ = try runProcesses(latencyPath, stages: stages, stop: stop)
        let lat = sinkReport(latencyReport)
        // The same four processes with every thread on CPU 0 (the pipeline's `cpus` setting).
        let pinnedPath = dir + "/pinned.yaml", pinnedReport = dir + "/pinned-\(run).json"
        let p = try BufferedFileWriter(path: pinnedPath)
        try p.write(
            pipelineText(
                samples: 11_000, rate: 1000, realtime: true, directory: dir + "/l", report: pinnedReport, cpus: [0])
        )
        try p.close()
        _ = try runProcesses(pinnedPath, stages: stages, stop: stop)
        let pinned = sinkReport(pinnedReport)
        print(
            "latency at a steady 1 kHz (source stamp to sink arrival, 10 s after a 1 s warm-up): across four "
                + "processes "
                + "p50 \(format(lat.p50 ?? .nan, 0)) us, p99 \(format(lat.p99 ?? .nan, 0)) us, max "
                + "\(format(lat.max ?? .nan, 0)) us; "
                + "the same pinned to CPU 0 (cpus: [0]) p50 \(format(pinned.p50 ?? .nan, 0)) us, p99 "
                + "\(format(pinned.p99 ?? .nan, 0)) us, max \(format(pinned.max ?? .nan, 0)) us; "
                + "baseline, source to sink in two processes (one ipc hop) p50 \(format(hop.p50 ?? .nan, 0)) "
                + "us, p99 \(format(hop.p99 ?? .nan, 0)) us"
        )
    }
}
