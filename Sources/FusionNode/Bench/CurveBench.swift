#if canImport(Glibc)
    import Glibc
#endif
import MessageBus
import Pipeline
import YAML

/// `fusion-node bench curve`: what CurveZMQ costs. The four-stage pipeline with every stage in its own
/// process over tcp loopback, plain and with a `security` block, in interleaved rounds: steady-state
/// throughput, then latency at a steady 1 kHz.
enum CurveBench {
    static let help = CommandHelp(
        path: "bench curve", summary: "Five processes over tcp loopback, plain against CURVE in the same run.",
        options: [
            OptionHelp("--samples", "N", "samples per throughput run", default: "300000"),
            OptionHelp("--rounds", "R", "interleaved rounds (plain, CURVE); medians at the end", default: "3"),
            OptionHelp("--latency-seconds", "S", "length of each 1 kHz latency run", default: "6"),
            OptionHelp(
                "--compression", "auto|lz4|none", "the pipeline's compression, in both runs (auto: lz4 on tcp)",
                default: "auto"),
        ],
        examples: ["fusion-node bench curve --rounds 5", "fusion-node bench curve --compression none"])

    static func run(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, help)
        let samples = try a.integer("--samples", minimum: 1000) ?? 300_000
        let rounds = try a.integer("--rounds", minimum: 1) ?? 3
        let latencySeconds = try a.double("--latency-seconds", minimum: 2, maximum: 600) ?? 6
        let compressionName = a.string("--compression") ?? "auto"
        guard CompressionPolicy(rawValue: compressionName) != nil else {
            throw UsageError(
                message: "--compression must be auto, lz4 or none, found '\(compressionName)'", command: help.path)
        }
        let stop = StopToken().handleSignals()
        let (dir, security) = try keysDirectory()
        let stages = ["source", "calibration", "fusion", "sink"]
        var port = 20_000 + Int(getpid() % 2000) * 10

        /// One run of the four processes: the sink's report (rate, p99 latency in microseconds) and the
        /// CPU time the four used, in microseconds per sample (steadier than the rate on a shared
        /// machine: it does not count time spent waiting for the CPU).
        func once(curve: Bool, samples: Int, rate: Double, realtime: Bool) throws -> (
            rate: Double, p99: Double?, cpuMicroseconds: Double
        ) {
            port += 10
            let report = dir + "/report-\(port).json", path = dir + "/p-\(port).yaml"
            let w = try BufferedFileWriter(path: path)
            try w.write(
                PipelineBench.pipelineText(
                    samples: samples, rate: rate, realtime: realtime, directory: nil, report: report, tcpBasePort: port,
                    header: "compression: \(compressionName)\n" + (curve ? security : "")))
            try w.close()
            let cpuBefore = childCPUSeconds()
            _ = try PipelineBench.runProcesses(path, stages: stages, stop: stop)
            let r = PipelineBench.sinkReport(report)
            return (r.rate, r.p99, (childCPUSeconds() - cpuBefore) / Double(samples) * 1e6)
        }
        var plainRates: [Double] = [], curveRates: [Double] = [], plainP99: [Double] = [], curveP99: [Double] = []
        var cpuRatios: [Double] = []
        for round in 1...rounds {
            let plain = try once(curve: false, samples: samples, rate: 1000, realtime: false)
            let secured = try once(curve: true, samples: samples, rate: 1000, realtime: false)
            let plainLatency = try once(curve: false, samples: Int(latencySeconds * 1000), rate: 1000, realtime: true)
            let curveLatency = try once(curve: true, samples: Int(latencySeconds * 1000), rate: 1000, realtime: true)
            plainRates.append(plain.rate)
            curveRates.append(secured.rate)
            plainP99.append(plainLatency.p99 ?? .nan)
            curveP99.append(curveLatency.p99 ?? .nan)
            cpuRatios.append(secured.cpuMicroseconds / plain.cpuMicroseconds)
            print(
                "round \(round): four processes over tcp: plain \(format(plain.rate, 0)) samples/s, CURVE "
                    + "\(format(secured.rate, 0)) samples/s (\(format(secured.rate / plain.rate, 3)) x); CPU "
                    + "\(format(plain.cpuMicroseconds, 2)) / \(format(secured.cpuMicroseconds, 2)) us per sample "
                    + "(\(format(cpuRatios.last!, 3)) x); 1 kHz p99 "
                    + "plain "
                    + "\(format((plainLatency.p99 ?? .nan) / 1000, 2)) ms, CURVE "
                    + "\(format((curveLatency.p99 ?? .nan) / 1000, 2)) ms"
            )
        }
        let ratios = zip(curveRates, plainRates).map { $0 / $1 }
        print(
            "median over \(rounds) round(s): plain \(format(PipelineBench.median(plainRates), 0)) samples/s, CURVE "
                + "\(format(PipelineBench.median(curveRates), 0)) samples/s; CURVE/plain throughput ratio median "
                + "\(format(PipelineBench.median(ratios), 3)) "
                + "(\(format(ratios.min()!, 3))-\(format(ratios.max()!, 3))); CURVE/plain CPU per sample median "
                + "\(format(PipelineBench.median(cpuRatios), 3)); "
                + "p99 at 1 kHz plain \(format(PipelineBench.median(plainP99) / 1000, 2)) ms, CURVE "
                + "\(format(PipelineBench.median(curveP99) / 1000, 2)) ms")
        return .complete
    }

    /// A new temporary folder with a server and a client key pair and an empty allowed-clients folder,
    /// and the pipeline's `security` section naming them.
    static func keysDirectory() throws -> (directory: String, security: String) {
        var template = Array("/tmp/gyrocompass-curve-XXXXXX".utf8CString)
        guard let pointer = mkdtemp(&template) else { throw UsageError(message: "cannot create a temporary folder") }
        let dir = String(cString: pointer)
        mkdir(dir + "/allowed", 0o700)
        try CurveKeyPair.generate().write(name: dir + "/server")
        try CurveKeyPair.generate().write(name: dir + "/client")
        let security =
            "security:\n  server_key: \(dir)/server\n  client_key: \(dir)/client\n  allowed_clients: \(dir)/allowed\n"
        return (dir, security)
    }

    /// CPU seconds (user and system) of every child process waited for so far.
    static func childCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
