import Testing
import Foundation
import CompassCore
import WireFormat
import Bags
@testable import Pipeline

extension PipelineRunTests {
    @Test("fusion's gate flags the plausible disturbance within 1 s by gyro consistency, and counts it")
    func disturbanceVerdict() async throws {
        let config = try PipelineConfig.parse(
            """
            stages:
              sim:
                type: simulator
                scenario: plausible_disturbance
                duration_s: 40
                realtime: false
                rate_hz: 100
              fusion:
                type: fusion
                inputs: [sim]
                expected_strength_ut: 48
                expected_dip_deg: 66
              rec:
                type: record
                inputs: [fusion]
                path: \(dir)/verdict
                topics: [interference/status, heading]
            """, file: "t.yaml", environment: [:])
        let reports = try await PipelineRunner.runAll(config, log: { _ in })
        var statuses: [InterferenceStatusMessage] = []
        var headings: [HeadingMessage] = []
        try BagReader(path: "\(dir)/verdict").forEachMessage { m in
            if m.topic == "/interference/status" { statuses.append(try InterferenceStatusMessage(cdrBytes: m.data)) }
            if m.topic == "/heading" { headings.append(try HeadingMessage(cdrBytes: m.data)) }
        }
        let onset = 1_700_000_020.0
        let first = try #require(statuses.first { $0.disturbed }, "never flagged")
        #expect(first.header.stamp.seconds - onset < 1.0, "flagged \(first.header.stamp.seconds - onset) s after onset")
        #expect(first.fusionFlags.contains(.magneticGyroInconsistent))
        #expect(
            !first.fusionFlags.contains(.magneticStrengthDisturbed)
                && !first.fusionFlags.contains(.magneticDipDisturbed))
        let last = statuses.last!
        #expect(last.disturbedPeriods >= 1 && last.samplesFlagged > 0 && last.disturbedSeconds >= 9)
        // Fusion does not use the readings its gate flags: it keeps its heading.
        let worst = headings.filter { $0.header.stamp.seconds > onset - 5 }.map {
            abs(signedDegrees($0.magneticHeading - 30))
        }.max()!
        #expect(worst < 2, "fused heading moved \(worst) deg")
        #expect(reports.first { $0.stage == "fusion" }!.notes.contains { $0.contains("disturbed period") })
    }
}

@Suite("Pipeline files")
struct RetiredStageTests {
    @Test("a pipeline file with the retired gating stage is refused with what to do instead, at its line")
    func retiredGating() throws {
        let text = """
            stages:
              sim:
                type: simulator
              gating:
                type: gating
                inputs: [sim]
            """
        #expect {
            _ = try PipelineConfig.parse(text, file: "old.yaml", environment: [:])
        } throws: { error in
            let message = "\(error)"
            return message.contains("old.yaml:5") && message.contains("no longer exists")
                && message.contains("strength_tolerance")
        }
    }
}
