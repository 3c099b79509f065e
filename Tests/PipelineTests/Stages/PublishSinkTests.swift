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
                duration: 2
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
        PipelineSignals.requestStop(false)
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
        PipelineSignals.requestStop(false)
    }

    @Test("the publish sink's view path (on_slow: drop) sends exactly the bytes its general path (block) sends")
    func publishViewPathEqualsGeneralPath() async throws {
        PipelineSignals.requestStop(false)
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
        PipelineSignals.requestStop(false)
    }
}
