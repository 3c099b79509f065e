import Testing
import Foundation
import CompassCore
import WireFormat
import IMUSimulator
@testable import Pipeline

/// A pipeline without a calibration stage fed a magnetometer with hard iron (as `--no-calibration`
/// on a bag that needs one): the fusion stage finds the iron itself, reports the heading unusable
/// from then on and names the remedy; readings calibrated already raise nothing.
@Suite("Readings that nothing calibrates")
struct UncalibratedReadingsTests {
    static func run(hardIron: String) throws -> (rmse: Double, covered: Double, notes: [String], warnings: Int) {
        let text = """
            stages:
              sim: {type: simulator, scenario: default, seed: 3, duration_s: 120, realtime: false,
                    hard_iron_ut: \(hardIron)}
              fusion: {type: fusion, inputs: [sim]}
            """
        let config = try PipelineConfig.parse(text, file: "uncalibrated.yaml", environment: [:])
        let source = try config.stage(named: "sim")!.makeLogic(log: { _ in }) as! SimulatorSource
        let fusion = try config.stage(named: "fusion")!.makeLogic(log: { _ in }) as! FusionStage
        let fused = try processed(try emitted(by: source), by: fusion)
        _ = try fusion.finish()
        let errors = try headingErrors(fused, scenario: source.scenario(), count: 12_000, from: 0)
        return (headingRMSE(errors), boundCoverage(errors), fusion.notes, fusion.knownWrong)
    }

    @Test("hard iron that nothing removes: found, the bound says so, the remedy is named")
    func hardIronNobodyRemoves() throws {
        let r = try Self.run(hardIron: "[25, -30, 12]")
        print("no calibration stage, hard iron (25, -30, 12): RMSE \(r.rmse), bound covers \(r.covered)")
        #expect(r.rmse > 20)
        // Before the turning that shows the iron (24 s of 120) nothing can tell: the run ends with a
        // warning (exit 4) instead, and from the finding on the bound covers every heading.
        #expect(r.warnings == 1)
        #expect(r.covered >= 0.75, "the bound covers \(r.covered) of the headings")
        #expect(
            r.notes.contains { $0.hasPrefix("uncalibrated readings: ") && $0.contains("calibrate the magnetometer") },
            "\(r.notes)")
    }

    @Test("readings calibrated already: no finding, the heading and its bound as before")
    func calibratedReadingsRaiseNothing() throws {
        let r = try Self.run(hardIron: "[0, 0, 0]")
        #expect(!r.notes.contains { $0.hasPrefix("uncalibrated readings") } && r.warnings == 0, "\(r.notes)")
        #expect(r.rmse < 3 && r.covered >= 0.9, "RMSE \(r.rmse), covered \(r.covered)")
    }
}
