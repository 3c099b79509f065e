import Testing
import Foundation
import CompassCore
import WireFormat
import Bags
@testable import Pipeline

extension PipelineRunTests {
    @Test("the gating stage flags the plausible disturbance within 1 s by gyro consistency, and counts it")
    func gatingStage() async throws {
        PipelineSignals.requestStop(false)
        let config = try PipelineConfig.parse(
            """
            stages:
              sim:
                type: simulator
                scenario: plausible_disturbance
                duration: 40
                realtime: false
                rate_hz: 100
              gating:
                type: gating
                inputs: [sim]
                expected_strength_ut: 48
                expected_dip_deg: 66
                drop: true
              fusion:
                type: fusion
                inputs: [gating]
              rec:
                type: record
                inputs: [fusion]
                path: \(dir)/gating
                topics: [interference/status, heading]
            """, file: "t.yaml", environment: [:])
        let reports = try await PipelineRunner.runAll(config, log: { _ in })
        var statuses: [InterferenceStatusMessage] = []
        var headings: [HeadingMessage] = []
        try BagReader(path: "\(dir)/gating").forEachMessage { m in
            if m.topic == "/interference/status" { statuses.append(try InterferenceStatusMessage(cdrBytes: m.data)) }
            if m.topic == "/heading" { headings.append(try HeadingMessage(cdrBytes: m.data)) }
        }
        let onset = 1_700_000_020.0
        let first = try #require(statuses.first { $0.disturbed }, "never flagged")
        #expect(first.header.stamp.seconds - onset < 1.0, "flagged \(first.header.stamp.seconds - onset) s after onset")
        #expect(FusionFlags(rawValue: first.flags).contains(.magneticGyroInconsistent))
        #expect(
            !FusionFlags(rawValue: first.flags).contains(.magneticStrengthDisturbed)
                && !FusionFlags(rawValue: first.flags).contains(.magneticDipDisturbed))
        let last = statuses.last!
        #expect(last.disturbedPeriods >= 1 && last.samplesFlagged > 0 && last.disturbedSeconds >= 9)
        // With the flagged samples dropped, fusion keeps its heading.
        let worst = headings.filter { $0.header.stamp.seconds > onset - 5 }.map {
            abs(signedDegrees($0.magneticHeading - 30))
        }.max()!
        #expect(worst < 2, "fused heading moved \(worst) deg")
        #expect(reports.first { $0.stage == "gating" }!.notes.contains { $0.contains("disturbed period") })
    }
}
