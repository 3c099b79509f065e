import Testing
import Foundation
#if canImport(Glibc)
    import Glibc
#endif
@testable import Pipeline

/// A run's stop request: its own per run, with the reasons kept as the command line reads them.
@Suite("Stop token")
struct StopTokenTests {
    let dir: String = {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("gc-stop-\(UUID().uuidString)").path
        try! FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }()

    @Test("reasons: the first stage request is kept, a signal overrides it, abandoned stays abandoned")
    func reasons() {
        let token = StopToken()
        #expect(!token.requested && token.reason == nil && !token.abandoned)
        token.request(.stage)
        #expect(token.requested && token.reason == .stage && !token.interruptedBySignal)
        token.request(.signal)
        #expect(token.reason == .signal && token.interruptedBySignal)
        token.request(.abandoned)
        token.request(.signal)
        token.request(.stage)
        #expect(token.reason == .abandoned && token.abandoned && token.interruptedBySignal)
    }

    @Test("SIGINT handled by a token asks that run to stop and leaves the process running")
    func signalMapsOntoTheToken() async throws {
        let token = StopToken().handleSignals()
        let other = StopToken()
        kill(getpid(), SIGINT)  // process-directed, as a terminal's Ctrl-C is
        for _ in 0..<100 where !token.requested { try await Task.sleep(for: .milliseconds(10)) }
        #expect(token.reason == .signal)
        #expect(!other.requested, "a token that handles no signal is left alone")
    }

    /// A real-time simulator, fused, to a csv sink.
    func liveRun(_ name: String, seconds: Double) throws -> PipelineConfig {
        try PipelineConfig.parse(
            """
            stages:
              sim: {type: simulator, rate_hz: 100, duration_s: \(seconds), realtime: true}
              fusion: {type: fusion, inputs: [sim]}
              out: {type: csv, inputs: [fusion], path: \(dir)/\(name).csv}
            """, file: "\(name).yaml", environment: [:])
    }

    @Test("two runs in one process: stopping one ends it early and the other runs to its end")
    func runsStopIndependently() async throws {
        let stopped = StopToken(), untouched = StopToken()
        async let short = PipelineRunner.runAll(try liveRun("stopped", seconds: 60), stop: stopped, log: { _ in })
        async let whole = PipelineRunner.runAll(try liveRun("whole", seconds: 1.5), stop: untouched, log: { _ in })
        // Stopped once it writes (the sink creates its file with the first row), however loaded the machine.
        for _ in 0..<3000 where !FileManager.default.fileExists(atPath: "\(dir)/stopped.csv.partial") {
            try await Task.sleep(for: .milliseconds(10))
        }
        stopped.request(.stage)
        _ = try await (short, whole)
        #expect(!untouched.requested)
        let rows = { (name: String) in
            (try? String(contentsOfFile: "\(dir)/\(name).csv", encoding: .utf8))?.split(separator: "\n").count ?? 0
        }
        // 1.5 s at 100 Hz, all of it, with a header; the stopped one finished its file with what it had.
        #expect(rows("whole") >= 150, "the untouched run wrote \(rows("whole")) rows")
        #expect(rows("stopped") > 1 && rows("stopped") < 5000, "the stopped run wrote \(rows("stopped")) rows")
    }
}
