import Testing
import Foundation
import YAML
@testable import Pipeline

func parse(_ text: String, env: [String: String] = [:]) throws(PipelineConfigError) -> PipelineConfig {
    try PipelineConfig.parse(text, file: "test.yaml", environment: env)
}

/// The error a configuration gives, or nil if it is accepted.
func configError(_ text: String, env: [String: String] = [:]) -> PipelineConfigError? {
    do {
        _ = try parse(text, env: env)
        return nil
    } catch { return error }
}

@Suite("Pipeline configuration")
struct PipelineConfigTests {
    @Test("a valid graph is ordered with inputs first, with defaults filled in")
    func valid() throws {
        let config = try parse(
            """
            stages:
              out:
                type: csv
                inputs: [fusion]
                path: /tmp/x.csv
              fusion:
                type: fusion
                inputs: [src]
              src:
                type: simulator
                duration_s: 2
            """)
        #expect(config.stages.map(\.name) == ["src", "fusion", "out"])
        #expect(config.stage(named: "src")!.settings.number("rate_hz") == 100)
        #expect(config.stage(named: "fusion")!.settings.string("filter") == "kalman")
        #expect(config.consumerCount(of: "fusion") == 1)
        // Default ipc endpoints live in a private directory, never at a fixed path in /tmp itself.
        #expect(config.stage(named: "fusion")!.endpoint == "ipc:///tmp/gyrocompass-\(getuid())/test-fusion")
    }

    @Test(
        "every error names file, line, column and what was expected",
        arguments: [
            ("stages:\n  a:\n    type: teleporter\n", 3, 11, "unknown stage type 'teleporter'"),
            ("stages:\n  a:\n    type: simulator\n    speed: 3\n", 4, 5, "unknown setting 'speed'"),
            ("stages:\n  a:\n    type: fusion\n", 3, 5, "needs 'inputs'"),
            (
                "stages:\n  a:\n    type: simulator\n  b:\n    type: fusion\n    inputs: [nowhere]\n", 4, 3,
                "unknown input 'nowhere'"
            ),
            ("stages:\n  a:\n    type: simulator\n  a:\n    type: simulator\n", 4, 3, "duplicate key 'a'"),
            ("stages:\n  a:\n    type: simulator\n    rate_hz: fast\n", 4, 14, "must be a number, found 'fast'"),
            ("stages:\n  a:\n    type: simulator\n    realtime: maybe\n", 4, 15, "must be true or false"),
            (
                "stages:\n  a:\n    type: simulator\n    endpoint: http://x\n", 4, 15,
                "must start with ipc://, tcp:// or inproc://"
            ),
            (
                "stages:\n  s:\n    type: simulator\n  a:\n    type: fusion\n    inputs: [b]\n  b:\n    type: "
                    + "fusion\n    inputs: [a]\n",
                4, 3, "form a cycle"
            ),
            (
                "stages:\n  s:\n    type: simulator\n  o:\n    type: stdout\n    inputs: [s]\n  x:\n    type: "
                    + "fusion\n    inputs: [o]\n",
                7, 3, "a stdout sink"
            ),
            ("stages:\n  a:\n    type: simulator\n    inputs: [b]\n", 4, 13, "takes no inputs"),
            ("stages:\n  a:\n    type: bag\n", 3, 5, "needs 'path'"),
            (
                "stages:\n  a:\n    type: fusion\n    inputs: [a]\n    filter: magic\n", 5, 13,
                "must be one of kalman, complementary"
            ),
            ("stages: [1, 2\n", 2, 1, "YAML syntax error"),
            ("stagez: {}\n", 1, 1, "unknown top-level key 'stagez'"),
            ("stages:\n  a:\n    type: bag\n    path: ${NOPE}\n", 4, 11, "environment variable NOPE is not set"),
            ("stages:\n  a:\n    type: simulator\n    seed: 1.5\n", 4, 11, "must be an integer"),
            (
                "stages:\n  a:\n    type: simulator\n  p:\n    type: publish\n    inputs: [a]\n    endpoint: "
                    + "tcp://127.0.0.1:1\n",
                7, 15, "connect to 'bind'"
            ),
            ("cpus: [0, -1]\nstages:\n  a:\n    type: simulator\n", 1, 11, "must be an integer >= 0"),
            ("cpus: [100000]\nstages:\n  a:\n    type: simulator\n", 1, 8, "CPU 100000 does not exist"),
            ("cpus: 0\nstages:\n  a:\n    type: simulator\n", 1, 7, "'cpus' must be a non-empty list"),
            (
                "stages:\n  a:\n    type: simulator\n  f:\n    type: fusion\n    inputs: [a]\n"
                    + "    filter: complementary\n    smooth: true\n",
                8, 13, "needs filter kalman"
            ),
            (
                "stages:\n  a:\n    type: simulator\n  f:\n    type: fusion\n    inputs: [a, a]\n", 6, 17,
                "lists input 'a' twice"
            ),
        ])
    func errors(_ text: String, line: Int, column: Int, message: String) throws {
        let e = try #require(configError(text))
        #expect(e.file == "test.yaml")
        #expect(e.mark == YAMLMark(line: line, column: column), "\(e)")
        #expect(e.message.contains(message), "\(e)")
        #expect(e.description.hasPrefix("test.yaml:\(line):\(column): "))
    }

    @Test("a file without a sink is refused at its stages; a graph driven stage by stage may have none")
    func noSink() throws {
        let text = "stages:\n  a:\n    type: simulator\n  f:\n    type: fusion\n    inputs: [a]\n"
        let path = temporaryPath("nosink.yaml")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: PipelineConfigError.self) {
            try PipelineConfig.load(path: path, environment: [:])
        }
        do {
            _ = try PipelineConfig.load(path: path, environment: [:])
        } catch {
            #expect(error.mark == YAMLMark(line: 2, column: 3) && error.message.contains("no sink"), "\(error)")
        }
        #expect((try? PipelineConfig.parse(text, file: "t.yaml", environment: [:])) != nil)
    }

    @Test("cpus pins every stage thread: parsed, and applied to a new thread")
    func cpus() throws {
        #expect(try parse("cpus: [0]\nstages:\n  a:\n    type: simulator\n").cpus == [0])
        #expect(try parse("stages:\n  a:\n    type: simulator\n").cpus == [])
        #expect(try parse("cpus: [\"${CPU:-0}\"]\nstages:\n  a:\n    type: simulator\n").cpus == [0])
        // A stage thread pinned to CPU 0 sees only CPU 0 in its allowed list.
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var allowed = ""
        let thread = Thread {
            do { try CPUAffinity.pinCurrentThread(to: [0]) } catch { allowed = "\(error)" }
            if allowed.isEmpty, let status = try? String(contentsOfFile: "/proc/thread-self/status", encoding: .utf8) {
                allowed =
                    status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") }.map {
                        String($0.dropFirst(18)).trimmingCharacters(in: .whitespaces)
                    } ?? "?"
            }
            done.signal()
        }
        thread.start()
        done.wait()
        #expect(allowed == "0")
        #expect(throws: CPUAffinity.Failure.self) { try CPUAffinity.pinCurrentThread(to: [1 << 20]) }
    }

    @Test("compression: auto packs tcp and CURVE endpoints, lz4 every endpoint but inproc, none nothing")
    func compression() throws {
        let graph = "stages:\n  a:\n    type: simulator\n"
        let auto = try parse(graph)
        #expect(auto.compression == .auto)
        #expect(auto.compression(on: "tcp://127.0.0.1:5000") == .lz4)
        #expect(auto.compression(on: "ipc:///run/x") == .none && auto.compression(on: "inproc://x") == .none)
        let lz4 = try parse("compression: ${PACK:-lz4}\n" + graph)
        #expect(lz4.compression(on: "ipc:///run/x") == .lz4 && lz4.compression(on: "inproc://x") == .none)
        #expect(try parse("compression: none\n" + graph).compression(on: "tcp://h:1") == .none)
        let e = try #require(configError("compression: zstd\n" + graph))
        #expect(e.mark == YAMLMark(line: 1, column: 14) && e.message.contains("auto, lz4, none"), "\(e)")
    }

    @Test("retransmission: live publishers only, endpoints derived or given, clashes and bad values refused")
    func retransmit() throws {
        let live = """
            stages:
              serial:
                type: lines
                endpoint: tcp://127.0.0.1:5601
              fusion:
                type: fusion
                inputs: [serial]
                endpoint: ipc:///tmp/f
              out:
                type: csv
                inputs: [fusion]
                path: x.csv
            """
        let c = try parse(live)
        #expect(c.retransmit == RetransmitSettings() && c.retransmit.seconds == 5)
        #expect(c.retransmitEndpoint(of: "serial") == "tcp://127.0.0.1:5602")
        #expect(c.retransmitEndpoint(of: "fusion") == "ipc:///tmp/f-resend" && c.retransmitEndpoint(of: "out") == nil)
        #expect(c.restartIsLossless("out") && !c.restartIsLossless("fusion"))
        let off = try parse("retransmit: {seconds: 0}\n" + live)
        #expect(off.retransmitEndpoint(of: "fusion") == nil && !off.restartIsLossless("out"))
        let sized = try parse("retransmit:\n  seconds: 2.5\n  max_bytes: 8192\n" + live)
        #expect(sized.retransmit.seconds == 2.5 && sized.retransmit.maximumBytes == 8192)
        // A recording is recomputed, never retransmitted.
        let replay = try parse("stages:\n  a:\n    type: bag\n    path: x\n  b:\n    type: fusion\n    inputs: [a]\n")
        #expect(replay.retransmitEndpoint(of: "a") == nil && replay.retransmitEndpoint(of: "b") == nil)

        let clash = configError(live.replacingOccurrences(of: "ipc:///tmp/f", with: "tcp://127.0.0.1:5602"))
        #expect(clash?.message.contains("the retransmit endpoint of stage 'serial', tcp://127.0.0.1:5602, is") == true)
        let given = try parse(
            live.replacingOccurrences(
                of: "endpoint: tcp://127.0.0.1:5601",
                with: "endpoint: tcp://127.0.0.1:5601\n    retransmit_endpoint: tcp://127.0.0.1:5700"))
        #expect(given.retransmitEndpoint(of: "serial") == "tcp://127.0.0.1:5700")
        let wildcard = configError(live.replacingOccurrences(of: "5601", with: "*"))
        #expect(wildcard?.message.contains("give it 'retransmit_endpoint'") == true, "\(String(describing: wildcard))")
        for (text, expected) in [
            ("retransmit: {seconds: 61}\n", "'seconds' must be a number from 0 to 60"),
            ("retransmit: {seconds: nan}\n", "'seconds' must be a number from 0 to 60"),
            ("retransmit: {max_bytes: 10}\n", "'max_bytes' must be an integer from 4096"),
            ("retransmit: {secs: 1}\n", "unknown retransmit key 'secs'"),
            ("retransmit: 5\n", "'retransmit' must be a mapping"),
        ] {
            let e = try #require(configError(text + live))
            #expect(e.message.contains(expected) && e.mark.line == 1, "\(e)")
        }
        let onSink = configError(live + "\n    retransmit_endpoint: ipc:///tmp/y")
        #expect(onSink?.message.contains("publishes nothing to retransmit") == true)
    }

    @Test("${VAR} and ${VAR:-default} are replaced from the environment")
    func environment() throws {
        let text = "stages:\n  a:\n    type: bag\n    path: ${BAG}/x.mcap\n    rate: ${RATE:-2}\n"
        let c = try parse(text, env: ["BAG": "/data"])
        #expect(c.stages[0].settings.string("path") == "/data/x.mcap")
        #expect(c.stages[0].settings.number("rate") == 2)
        #expect(try parse(text, env: ["BAG": "/d", "RATE": "0.5"]).stages[0].settings.number("rate") == 0.5)
        #expect(
            configError("stages:\n  a:\n    type: bag\n    path: ${BAG\n")?.message.contains("unterminated") == true)
    }

    @Test("shared endpoints are refused")
    func endpoints() {
        let e = configError(
            """
            stages:
              a:
                type: simulator
                endpoint: ipc:///tmp/same
              b:
                type: fusion
                inputs: [a]
                endpoint: ipc:///tmp/same
            """)
        #expect(e?.message.contains("share the endpoint") == true)
    }

    @Test("a pipeline name that is not a plain word, or a second YAML document, is refused at its line")
    func nameAndDocuments() {
        let graph =
            "stages:\n  s: {type: simulator}\n  f: {type: fusion, inputs: [s]}\n  o: {type: summary, inputs: [f]}\n"
        for (text, line, words) in [
            ("name: ../../tmp/x\n" + graph, 1, "'name' must be"),
            ("name: a.b\n" + graph, 1, "'name' must be"),
            (graph + "---\nstages: {}\n", 5, "a second YAML document"),
        ] {
            do {
                _ = try PipelineConfig.parse(text, file: "p.yaml", environment: [:])
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.mark.line == line && error.message.contains(words), "\(error)")
            }
        }
        #expect((try? PipelineConfig.parse("name: robot_1-a\n" + graph, file: "p.yaml", environment: [:])) != nil)
    }

    @Test("every shipped pipeline in Pipelines/ parses")
    func shipped() throws {
        let root = "/" + #filePath.split(separator: "/").dropLast(4).joined(separator: "/") + "/Pipelines"
        let names = try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.hasSuffix(".yaml") }.sorted()
        #expect(names.count >= 8)
        for name in names {
            // calibrate-*.yaml hold a source for `fusion-node calibrate --config`, no sink.
            let config = try PipelineConfig.load(
                path: root + "/" + name, environment: ["BAG": "/tmp/bag", "CSV": "/tmp/x.csv"],
                requireSink: !name.hasPrefix("calibrate-"))
            #expect(!config.stages.isEmpty, "\(name)")
        }
    }
}

@Test("the built-in default pipeline parses for every filter")
func builtInDefault() throws {
    for filter in ["kalman", "complementary"] {
        let c = try PipelineConfig.parse(
            BuiltInPipelines.defaultText(durationSeconds: 3, filter: filter, seed: 2), file: "<builtin>",
            environment: [:])
        #expect(c.stages.map(\.name) == ["source", "calibration", "fusion", "console", "summary", "headings"])
    }
}

@Suite("Endpoint policy")
struct EndpointPolicyTests {
    @Test("default ipc endpoints sit in a private directory, under XDG_RUNTIME_DIR when set")
    func privateDirectory() throws {
        let text = "stages:\n  a:\n    type: simulator\n  b:\n    type: fusion\n    inputs: [a]\n"
        #expect(
            try parse(text, env: ["XDG_RUNTIME_DIR": "/run/user/1000"]).stage(named: "a")!.endpoint
                == "ipc:///run/user/1000/gyrocompass/test-a")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gc-private-\(UUID().uuidString)").path
        try EndpointPolicy.preparePrivateDirectory(dir)
        let mode = try FileManager.default.attributesOfItem(atPath: dir)[.posixPermissions] as! Int
        #expect(mode == 0o700)
        chmod(dir, 0o777)
        #expect(throws: StageFailure.self) { try EndpointPolicy.preparePrivateDirectory(dir) }
    }

    @Test(
        "binding an address other hosts can reach needs insecure: true",
        arguments: [
            ("tcp://*:5600", false), ("tcp://0.0.0.0:5600", false), ("tcp://192.168.1.5:5600", false),
            ("tcp://127.0.0.1:5600", true), ("tcp://localhost:5600", true), ("tcp://[::1]:5600", true),
        ])
    func nonLoopback(_ endpoint: String, _ accepted: Bool) throws {
        let text =
            "stages:\n  a:\n    type: simulator\n  p:\n    type: publish\n    inputs: [a]\n    bind: \(endpoint)\n"
            + "    topics: [imu/data_raw]\n"
        let e = configError(text)
        #expect((e == nil) == accepted, "\(String(describing: e))")
        if !accepted { #expect(e?.message.contains("insecure: true") == true && e?.mark.line == 7) }
        #expect(configError("insecure: true\n" + text) == nil)
    }
}

@Test("a run refuses to replace an existing output file, at its line; devices and new names pass")
func existingOutputsRefused() throws {
    let existing = FileManager.default.temporaryDirectory.appendingPathComponent("exists-\(getpid()).csv").path
    try "keep\n".write(toFile: existing, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(atPath: existing) }
    func config(_ path: String) throws -> PipelineConfig {
        try parse("stages:\n  a:\n    type: simulator\n  c:\n    type: csv\n    inputs: [a]\n    path: \(path)\n")
    }
    #expect(throws: Never.self) { try config("/dev/null").refuseExistingOutputs() }
    #expect(throws: Never.self) { try config(existing + ".new").refuseExistingOutputs() }
    #expect(throws: Never.self) { try config(existing).refuseExistingOutputs(only: ["a"]) }
    let refused = try config(existing)
    do {
        try refused.refuseExistingOutputs()
        Issue.record("an existing output was accepted")
    } catch {
        #expect(
            error.mark.line == 7 && error.message.contains("\(existing) exists")
                && error.message.contains("--overwrite"))
    }
    #expect(try String(contentsOfFile: existing, encoding: .utf8) == "keep\n")
}

@Suite("Endpoints of concurrent runs and how long a stage waits for its readers")
struct RunEndpointTests {
    let text =
        "name: p\nstages:\n  a:\n    type: simulator\n  b:\n    type: calibration\n    inputs: [a]\n"
        + "  c:\n    type: csv\n    inputs: [b]\n    path: /dev/null\n"

    @Test("a supervisor's run id gives default ipc endpoints of their own; anything else in it is ignored")
    func runIdentity() throws {
        let env = ["XDG_RUNTIME_DIR": "/run/user/7"]
        #expect(try parse(text, env: env).stage(named: "b")?.endpoint == "ipc:///run/user/7/gyrocompass/p-b")
        let run = env.merging([EndpointPolicy.runVariable: "4242"]) { a, _ in a }
        #expect(try parse(text, env: run).stage(named: "b")?.endpoint == "ipc:///run/user/7/gyrocompass/p-4242-b")
        let hostile = env.merging([EndpointPolicy.runVariable: "../../x"]) { a, _ in a }
        #expect(try parse(text, env: hostile).stage(named: "b")?.endpoint == "ipc:///run/user/7/gyrocompass/p-b")
    }

    @Test("reader_timeout_s is read, bounded and defaults to a minute")
    func readerTimeout() throws {
        #expect(try parse(text).readerTimeoutSeconds == 60)
        #expect(try parse("reader_timeout_s: 2.5\n" + text).readerTimeoutSeconds == 2.5)
        for bad in ["0", "-1", "1e9", "soon"] {
            let e = configError("reader_timeout_s: \(bad)\n" + text)
            #expect(e?.message.contains("'reader_timeout_s' must be a number of seconds from 1 to 86400") == true)
            #expect(e?.mark.line == 1)
        }
    }

    @Test("reproducibility follows the chain from its source, for long chains too")
    func reproducibleChains() throws {
        var lines = ["stages:", "  s0: {type: simulator}", "  live: {type: lines}"]
        for i in 1..<400 { lines.append("  s\(i): {type: calibration, inputs: [s\(i - 1)]}") }
        lines.append("  both: {type: fusion, inputs: [s399, live]}")
        lines.append("  c: {type: csv, inputs: [both], path: /dev/null}")
        let config = try parse(lines.joined(separator: "\n") + "\n")
        let reproducible = config.reproducibleStages()
        #expect(reproducible.count == 400 && reproducible.contains("s399"))
        #expect(!config.isReproducible("live") && !config.isReproducible("both") && !config.isReproducible("c"))
    }
}
