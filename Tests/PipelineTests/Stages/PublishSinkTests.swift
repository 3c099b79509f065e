import Testing
import Foundation
import CompassCore
import WireFormat
import Bags
import MessageBus
@testable import Pipeline

extension PipelineRunTests {
    /// A 2 s simulated run at 100 Hz through fusion to a publish sink bound to `endpoint`, with the
    /// sink's further settings (one per line).
    static func simulatedRunPublished(on endpoint: String, _ settings: String) throws -> PipelineConfig {
        let indented = settings.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n")
        return try PipelineConfig.parse(
            """
            stages:
              sim:
                type: simulator
                rate_hz: 100
                duration_s: 2
                realtime: false
              fusion:
                type: fusion
                inputs: [sim]
              pub:
                type: publish
                inputs: [fusion]
                bind: \(endpoint)
            \(indented)
            """, file: "t.yaml", environment: [:])
    }

    @Test("a publish sink sends only while someone subscribes, and says how many it did not send")
    func publishFollowsSubscribers() async throws {
        let endpoint = "ipc://\(dir)/pub"
        func config(waitFor subscribers: Int) throws -> PipelineConfig {
            try Self.simulatedRunPublished(
                on: endpoint, "topics: [heading]\nmin_change_deg: 0\nwait_for_subscribers: \(subscribers)")
        }
        func sentCount(_ notes: [String]) -> Int? {
            notes.first { $0.hasPrefix("sent ") }.flatMap { $0.split(separator: " ").dropFirst().first }.flatMap {
                Int($0)
            }
        }
        // Nobody subscribes: nothing is counted as published, and the note says what was not sent.
        let alone = try await PipelineRunner.runAll(config(waitFor: 0), log: { _ in })
        let aloneNotes = alone.first { $0.stage == "pub" }!.notes
        #expect(
            aloneNotes.contains {
                $0.hasPrefix("sent 0 of ") && $0.contains("not sent while nobody subscribed")
            }, "\(aloneNotes)")

        // One subscriber: everything published arrives.
        let context = BusContext()
        let sub = try BusSocket(context, .sub)
        try sub.subscribe(Array("heading\0".utf8))
        try sub.connect(endpoint)
        async let run = PipelineRunner.runAll(config(waitFor: 1), log: { _ in })
        var received = 0, ended = false
        while let frame = try sub.receive(timeoutMilliseconds: 2000) {
            let decoded = try WireFrame.decode(frame)
            #expect(decoded.topic == "heading")
            if decoded.isEndOfStream {
                ended = true  // the publisher's end of stream, after every message
                break
            }
            #expect(!ended)
            received += 1
        }
        let notes = try await run.first { $0.stage == "pub" }!.notes
        #expect(received > 150 && sentCount(notes) == received, "received \(received); \(notes)")
        #expect(!notes.joined().contains("nobody subscribed"), "\(notes)")
        #expect(ended)
        sub.close()
    }

    @Test("latest_only keeps the newest message of each topic: a slow reader still gets every status, then the end")
    func latestOnlyKeepsEachTopic() async throws {
        let endpoint = "ipc://\(dir)/latest"
        let config = try PipelineConfig.parse(
            """
            stages:
              sim: {type: simulator, rate_hz: 100, duration_s: 4, realtime: true, hard_iron_ut: [20, -10, 5]}
              calibration: {type: calibration, inputs: [sim], online: true}
              fusion: {type: fusion, inputs: [calibration]}
              pub:
                type: publish
                inputs: [fusion]
                bind: \(endpoint)
                topics: [heading, calibration/status]
                latest_only: true
                wait_for_subscribers: 1
            """, file: "t.yaml", environment: [:])
        let context = BusContext()
        let sub = try BusSocket(context, .sub)
        try sub.subscribe(Array("heading\0".utf8))
        try sub.subscribe(Array("calibration/status\0".utf8))
        try sub.connect(endpoint)
        async let run = PipelineRunner.runAll(config, log: { _ in })
        var headings = 0, statuses = 0, ends: Set<String> = []
        while ends.count < 2, let bytes = try sub.receive(timeoutMilliseconds: 3000) {
            let frame = try WireFrame.decode(bytes)
            if frame.isEndOfStream {
                ends.insert(frame.topic)
            } else if frame.topic == "heading" {
                headings += 1
            } else {
                statuses += 1
            }
            usleep(20_000)  // 50 messages a second, half the headings' rate: they are superseded
        }
        let notes = try await run.first { $0.stage == "pub" }!.notes.joined()
        // The calibration stage reports once a second (and when a fit is accepted): each status waits
        // for the reader beside the newest heading instead of being replaced by it 10 ms later.
        #expect(statuses >= 3, "\(statuses) statuses, \(headings) headings; \(notes)")
        #expect(headings < 300 && notes.contains("superseded or dropped"), "\(headings); \(notes)")
        #expect(ends == ["heading", "calibration/status"])
        sub.close()
    }

    @Test("the publish sink's diagnostics topic carries the health, changing as the run does")
    func publishDiagnostics() async throws {
        let endpoint = "ipc://\(dir)/diag"
        // Paced to the wall clock so that reports (every 0.2 s) fall while the filter initialises,
        // then tracks, then while a magnet fades in from 2.5 s (5 s to full strength).
        let config = try PipelineConfig.parse(
            """
            stages:
              sim: {type: simulator, rate_hz: 100, duration_s: 4.5, realtime: true, magnet_ut: [300, 0, 0],
                    magnet_start_s: 2.5, magnet_duration_s: 10}
              fusion: {type: fusion, inputs: [sim]}
              pub: {type: publish, inputs: [fusion], bind: "\(endpoint)", topics: [heading],
                    diagnostics_topic: diagnostics, diagnostics_period_s: 0.2, wait_for_subscribers: 1}
            """, file: "t.yaml", environment: [:])
        let context = BusContext()
        let sub = try BusSocket(context, .sub)
        try sub.subscribe(Array("diagnostics\0".utf8))
        try sub.connect(endpoint)
        async let run = PipelineRunner.runAll(config, log: { _ in })
        var heading: [String] = [], interference: [UInt8] = [], ended = false
        while let frame = try sub.receive(timeoutMilliseconds: 3000) {
            let decoded = try WireFrame.decode(frame)
            if decoded.isEndOfStream {
                ended = true
                break
            }
            #expect(decoded.topic == "diagnostics" && decoded.type == DiagnosticArrayMessage.typeName)
            let array = try DiagnosticArrayMessage(cdrBytes: decoded.payload)
            let first = try #require(array.status.first)
            #expect(first.name == "gyrocompass: heading")
            heading.append(first.message)
            if let i = array.status.first(where: { $0.name == "gyrocompass: magnetic interference" }) {
                interference.append(i.level.rawValue)
            }
        }
        let notes = try await run.first { $0.stage == "pub" }!.notes
        #expect(ended)
        /// The values in the order they first appear.
        func changes<T: Equatable>(_ values: [T]) -> [T] {
            values.enumerated().filter { $0.offset == 0 || values[$0.offset - 1] != $0.element }.map(\.element)
        }
        #expect(heading.count >= 15, "\(heading)")
        let phases = changes(heading)
        #expect(phases.first == "initialising" && phases.contains("tracking"), "\(heading)")
        #expect(phases.last == "holding the heading on the gyro (magnetometer rejected)", "\(heading)")
        #expect(changes(interference) == [0, 1], "clear, then disturbed: \(interference)")
        #expect(notes.contains { $0.contains("message(s) on diagnostics, heading") }, "\(notes)")
        sub.close()
    }

    @Test("diagnostics in JSON: the health at the end of a run arrives as diagnostic_msgs' fields")
    func publishDiagnosticsJSON() async throws {
        let endpoint = "ipc://\(dir)/diagjson"
        let config = try Self.simulatedRunPublished(
            on: endpoint, "topics: [heading]\nencoding: json\ndiagnostics_topic: health\nwait_for_subscribers: 1")
        let context = BusContext()
        let sub = try BusSocket(context, .sub)
        try sub.subscribe(Array("health\0".utf8))
        try sub.connect(endpoint)
        async let run = PipelineRunner.runAll(config, log: { _ in })
        var reports: [[String: Any]] = []
        while let frame = try sub.receive(timeoutMilliseconds: 3000) {
            let decoded = try WireFrame.decode(frame)
            if decoded.isEndOfStream { break }
            #expect(decoded.encoding == "json")
            reports.append(try #require(JSONSerialization.jsonObject(with: Data(decoded.payload)) as? [String: Any]))
        }
        _ = try await run
        // The 2 s run takes less than the 1 s period: the final report is the one sent.
        let last = try #require(reports.last)
        let status = try #require(last["status"] as? [[String: Any]])
        #expect(status.compactMap { $0["name"] as? String }.contains("gyrocompass: heading"), "\(last)")
        #expect(status.allSatisfy { $0["level"] != nil && $0["values"] is [Any] }, "\(last)")
        sub.close()
    }

    @Test("the report shows the motor compensation and the share of the field the motors add")
    func reportShowsMotorShare() async throws {
        let page = "\(dir)/motor.html"
        // 20 A peak at 1 uT/A along x, compensated with fixed coefficients: at the peak the motors add
        // 20 uT, about 40 % of the simulated 48-50 uT field.
        let config = try PipelineConfig.parse(
            """
            stages:
              sim: {type: simulator, duration_s: 20, realtime: false, motor_current_a: 20,
                    motor_field_ut_per_a: [1, 0, 0]}
              calibration: {type: calibration, inputs: [sim], online: true, prompt: false, learn_motor: false,
                            motor_ut_per_a: [1, 0, 0]}
              fusion: {type: fusion, inputs: [calibration]}
              report: {type: report, inputs: [sim, fusion], path: "\(page)"}
            """, file: "t.yaml", environment: [:])
        _ = try await PipelineRunner.runAll(config, log: { _ in })
        let html = try String(contentsOfFile: page, encoding: .utf8)
        let table = try #require(
            html.range(of: "<table id=\"motor-compensation\">").map { String(html[$0.lowerBound...]) })
        let rows = String(table.prefix(while: { $0 != "\n" }))
        #expect(rows.contains("<td>1.000, 0.000, 0.000</td>"), "\(rows)")
        let peak = try #require(rows.firstMatch(of: /up to ([0-9.]+) A/).map { Double($0.1)! })
        #expect(peak > 15 && peak <= 20.5, "\(rows)")
        let share = try #require(rows.firstMatch(of: /uT \(([0-9.]+) % of the field\)/).map { Double($0.1)! })
        #expect(share > 25 && share < 50, "\(rows)")
    }

    @Test("the publish sink's view path (on_slow: drop) sends exactly the bytes its general path (block) sends")
    func publishViewPathEqualsGeneralPath() async throws {
        /// Every message a subscriber to everything receives from a 2 s simulated run.
        func received(onSlow: String, name: String) async throws -> (messages: [[UInt8]], notes: [String]) {
            let endpoint = "ipc://\(dir)/pub-path-\(name)"
            let config = try Self.simulatedRunPublished(
                on: endpoint, "min_change_deg: 0\non_slow: \(onSlow)\nwait_for_subscribers: 1")
            let context = BusContext()
            let sub = try BusSocket(context, .sub)
            try sub.subscribe([])
            try sub.connect(endpoint)
            async let run = PipelineRunner.runAll(config, log: { _ in })
            var messages: [[UInt8]] = []
            while let bytes = try sub.receive(timeoutMilliseconds: 2000) {
                if try WireFrame.decode(bytes).isEndOfStream { break }
                messages.append(bytes)
            }
            let notes = try await run.first { $0.stage == "pub" }!.notes
            sub.close()
            return (messages, notes)
        }
        let viewPath = try await received(onSlow: "drop", name: "drop")
        let general = try await received(onSlow: "block", name: "block")
        #expect(viewPath.messages.count == 400, "\(viewPath.notes)")  // heading and imu/data per sample
        #expect(viewPath.messages == general.messages)
        #expect(viewPath.notes == general.notes, "\(viewPath.notes) / \(general.notes)")
    }
}
