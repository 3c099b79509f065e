import CompassCore
import IMUSimulator
import Pipeline

#if canImport(Glibc)
    import Glibc
#endif

/// `fusion-node bench smooth`: the offline smoother's throughput and memory on a long simulated
/// recording, next to the forward filter alone on the same samples in the same run, with both
/// filters' heading error against the simulator's truth.
enum SmootherBench {
    static let help = CommandHelp(
        path: "bench smooth",
        summary: "Time the offline smoother (forward + backward pass) against the forward filter alone on a long "
            + "simulated recording; report its peak memory and both heading errors against the truth.",
        options: [
            OptionHelp("--hours", "H", "length of the simulated recording", default: "1"),
            OptionHelp("--rate", "HZ", "IMU and magnetometer samples per second", default: "285.7"),
            OptionHelp("--rounds", "N", "interleaved rounds; the best of each is reported", default: "3"),
        ],
        details: """
            The recording mixes rest, turns, walking, figure eights and tilts, with a magnet held near for
            10 s every 5 minutes. Memory is the growth of the process's peak resident set during one
            smoothing run (the samples themselves are allocated before), from /proc/self/status.
            """,
        examples: ["fusion-node bench smooth --hours 1 --rounds 3"])

    static func run(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(0...0)
        let hours = try a.double("--hours", minimum: 0.001, maximum: 100) ?? 1
        let rate = try a.double("--rate", minimum: 1, maximum: 10_000) ?? 285.7
        let rounds = try a.integer("--rounds", minimum: 1) ?? 3
        let count = Int(hours * 3600 * rate)
        var imu: [ImuSample] = [], mag: [MagnetometerSample?] = [], truth: [Double] = []
        imu.reserveCapacity(count)
        mag.reserveCapacity(count)
        truth.reserveCapacity(count)
        for s in IMUSimulator(scenario: scenario(rate: rate, seconds: hours * 3600)).prefix(count) {
            imu.append(s.imu)
            mag.append(s.magnetometer)
            truth.append(s.trueHeadingDegrees ?? .nan)
        }
        print("samples=\(count) hours=\(format(hours, 3)) rate_hz=\(format(rate, 1))")

        var bestForward = Double.infinity, bestSmooth = Double.infinity
        var forwardError = 0.0, smoothError = 0.0, peakGrowth = 0.0
        for round in 0..<rounds {
            var t0 = Clocks.monotonicSeconds()
            var filter = KalmanFilter()
            var forwardSquares = ErrorSum()
            for i in imu.indices {
                if let o = filter.update(imu: imu[i], magnetometer: mag[i]) { forwardSquares.add(o, truth[i]) }
            }
            bestForward = min(bestForward, Clocks.monotonicSeconds() - t0)
            forwardError = forwardSquares.rms

            let before = residentMegabytes()
            resetPeakResident()
            t0 = Clocks.monotonicSeconds()
            var smoother = KalmanSmoother()
            for i in imu.indices { smoother.add(imu: imu[i], magnetometer: mag[i]) }
            var smoothSquares = ErrorSum()
            smoother.finish { i, o, _, _ in smoothSquares.add(o, truth[i]) }
            bestSmooth = min(bestSmooth, Clocks.monotonicSeconds() - t0)
            smoothError = smoothSquares.rms
            if round == 0, let b = before, let peak = peakResidentMegabytes() { peakGrowth = peak - b }
        }
        let n = Double(count)
        print(
            "forward_samples_per_second=\(format(n / bestForward, 0)) "
                + "smoother_samples_per_second=\(format(n / bestSmooth, 0)) "
                + "smoother_over_forward_time=\(format(bestSmooth / bestForward, 2))")
        print(
            "smoother_peak_memory_mb=\(format(peakGrowth, 1)) bytes_per_sample=\(format(peakGrowth * 1_048_576 / n, 0))"
        )
        print(
            "heading_rmse_deg forward=\(format(forwardError, 3)) smoothed=\(format(smoothError, 3)) "
                + "(against the simulator's truth, after the first 10 s)")
        return .complete
    }

    /// Mixed motion with a magnet near for 10 s every 5 minutes.
    static func scenario(rate: Double, seconds: Double) -> SimulationScenario {
        var s = SimulationScenario()
        s.seed = 7
        s.sampleRateHz = rate
        s.startHeadingDegrees = 30
        s.sensors.gyroInitialBias = Vector3(0.004, -0.003, 0.005)
        s.motion = [
            .rest(seconds: 5), .turn(degreesPerSecond: 45, seconds: 8), .walking(seconds: 20, stepsPerSecond: 1.8),
            .figureEight(seconds: 10), .rotate(sensorAxis: Vector3(1, 0.3, 0), degreesPerSecond: 40, seconds: 6),
            .moveTo(headingDegrees: 200, pitchDegrees: 15, rollDegrees: -10, seconds: 3), .rest(seconds: 3),
            .turn(degreesPerSecond: -30, seconds: 10),
            .moveTo(headingDegrees: 30, pitchDegrees: 0, rollDegrees: 0, seconds: 3),
        ]
        s.loops = true
        s.disturbances = stride(from: 150.0, to: seconds, by: 300).map {
            ScheduledDisturbance(
                startSeconds: $0, durationSeconds: 10, fieldMicrotesla: Vector3(20, 5, 0), rampSeconds: 1)
        }
        return s
    }

    /// Root mean square heading error after the first 10 s (the filter's start).
    struct ErrorSum {
        var sum = 0.0, count = 0
        var start: Double?
        mutating func add(_ o: FusionOutput, _ truth: Double) {
            if start == nil { start = o.timestamp }
            guard o.timestamp - start! >= 10, let h = o.orientation.headingDegrees, truth.isFinite else { return }
            let e = signedDegrees(h - truth)
            sum += e * e
            count += 1
        }
        var rms: Double { count > 0 ? (sum / Double(count)).squareRoot() : .nan }
    }

    static func statusValue(_ key: String) -> Double? {
        guard let f = fopen("/proc/self/status", "r") else { return nil }
        defer { fclose(f) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, 256, f) != nil {
            let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix(key + ":") {
                let kb = text.dropFirst(key.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first
                    .flatMap { Double($0) }
                return kb.map { $0 / 1024 }
            }
        }
        return nil
    }
    static func residentMegabytes() -> Double? { statusValue("VmRSS") }
    static func peakResidentMegabytes() -> Double? { statusValue("VmHWM") }
    /// Linux resets the peak resident set (VmHWM) to the current one when "5" is written here.
    static func resetPeakResident() {
        guard let f = fopen("/proc/self/clear_refs", "w") else { return }
        fputs("5", f)
        fclose(f)
    }
}
