import Testing
import Foundation
import CompassCore
import WireFormat
import IMUSimulator
@testable import Pipeline

/// A magnetometer mounted yaw_90 against the IMU, not told: the calibration stage finds the mounting
/// from motion (detect_rotation), holds the readings back until it is clear, keeps it in the file, and
/// a later run applies the file's mounting from the start.
@Suite("Finding the magnetometer's mounting in the calibration stage")
struct MountingDetectionStageTests {
    struct Outcome {
        var rmse: Double
        var notes: [String]
        var magnetometerOut: Int
        /// Share of the headings from `from` on whose error is within their 95 % bound.
        var covered: Double
        var knownWrong: Int
    }

    /// Heading RMSE in degrees from `from` seconds on, for the simulator's default scenario (seed 3,
    /// 120 s, hard iron (25, -30, 12)) with `mounting` and the calibration stage's `calibration` settings.
    static func run(
        mounting: String, calibration: String, from: Double, scenario name: String = "default", duration: Int = 120
    ) throws -> Outcome {
        let text = """
            stages:
              sim:
                type: simulator
                scenario: \(name)
                seed: 3
                duration_s: \(duration)
                realtime: false
                hard_iron_ut: [25, -30, 12]
                mag_rotation: \(mounting)
              calibration:
                type: calibration
                inputs: [sim]
                prompt: false
            \(calibration)
              fusion:
                type: fusion
                inputs: [calibration]
            """
        let config = try PipelineConfig.parse(text, file: "detect.yaml", environment: [:])
        let source = try config.stage(named: "sim")!.makeLogic(log: { _ in }) as! SimulatorSource
        let stage = try config.stage(named: "calibration")!.makeLogic(log: { _ in }) as! CalibrationStage
        let fusion = try config.stage(named: "fusion")!.makeLogic(log: { _ in }) as! TransformLogic
        let scenario = source.scenario()
        let calibrated = try processed(try emitted(by: source), by: stage)
        let magnetometerOut = calibrated.filter { $0.topic == PipelineTopics.magnetometer }.count
        let fused = try processed(calibrated, by: fusion)
        _ = try stage.finish()
        let errors = try headingErrors(fused, scenario: scenario, count: duration * 100, from: from)
        let rmse = headingRMSE(errors), covered = boundCoverage(errors)
        return Outcome(
            rmse: rmse, notes: stage.notes, magnetometerOut: magnetometerOut, covered: covered,
            knownWrong: stage.knownWrong)
    }

    @Test("yaw_90 is found, held readings are counted, the heading matches a straight compass; the file keeps it")
    func foundKeptAndReapplied() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "detect-\(getpid())-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("cal.json").path
        let straight = try Self.run(mounting: "none", calibration: "    online: true", from: 60)
        let found = try Self.run(
            mounting: "yaw_90", calibration: "    online: true\n    detect_rotation: true\n    file: \(file)", from: 60)
        let untold = try Self.run(mounting: "yaw_90", calibration: "    online: true", from: 60)
        print("mounting: heading RMSE after 60 s straight \(straight.rmse), found \(found.rmse), untold \(untold.rmse)")
        let note = try #require(found.notes.first { $0.hasPrefix("magnetometer mounting found") }, "\(found.notes)")
        #expect(note.contains("found: yaw_90,"))
        let held = try #require(found.notes.first { $0.contains("held back until the mounting was clear") })
        let heldCount = try #require(Int(held.prefix { $0.isNumber }))
        #expect(heldCount > 0 && found.magnetometerOut + heldCount == 12_000)
        #expect(abs(found.rmse - straight.rmse) < 0.3)
        #expect(untold.rmse > straight.rmse + 10)  // the compass points 90 degrees off without it

        let stored = try #require(try? CalibrationFile.load(file).get())
        #expect(stored.magnetometerRotation?.description == "yaw_90")
        #expect(stored.magnetometerRotationFound?.hasPrefix("yaw_90, ") == true)
        // A later run with the file turns every reading from the start, without finding it again.
        let again = try Self.run(mounting: "yaw_90", calibration: "    online: false\n    file: \(file)", from: 5)
        #expect(again.magnetometerOut == 12_000)
        #expect(again.notes.contains { $0.contains("for the magnetometer mounted yaw_90") })
        #expect(again.rmse < straight.rmse + 0.5, "\(again.rmse) vs \(straight.rmse)")
        // The compass remounted straight, the file kept: the motion contradicts it, and the summary says so.
        let remounted = try Self.run(
            mounting: "none", calibration: "    online: false\n    detect_rotation: true\n    file: \(file)", from: 5)
        #expect(
            remounted.notes.contains { $0.contains("yaw_90 (the motion says otherwise: was the compass remounted?)") })
    }

    @Test("a mounting not given is found anyway: the heading is reported unusable and the remedy named")
    func untoldMountingIsReported() throws {
        let untold = try Self.run(mounting: "yaw_90", calibration: "    online: true", from: 0)
        let straight = try Self.run(mounting: "none", calibration: "    online: true", from: 0)
        print("untold yaw_90: RMSE \(untold.rmse), bound covers \(untold.covered); straight covers \(straight.covered)")
        #expect(untold.rmse > 15)
        #expect(untold.covered >= 0.9, "the bound covers \(untold.covered) of the headings")
        #expect(untold.knownWrong == 1 && straight.knownWrong == 0)
        #expect(
            untold.notes.contains {
                $0.contains("turn as if it were mounted yaw_90") && $0.contains("--mag-rotation yaw_90 (or auto)")
            }, "\(untold.notes)")
        #expect(!straight.notes.contains { $0.contains("turn as if it were mounted") }, "\(straight.notes)")
    }

    @Test("at rest the mounting stays undetermined: the summary says why and that every reading was held back")
    func undeterminedAtRest() throws {
        let outcome = try Self.run(
            mounting: "yaw_90", calibration: "    online: true\n    detect_rotation: true", from: 0, scenario: "rest",
            duration: 20)
        let note = try #require(outcome.notes.first { $0.hasPrefix("magnetometer mounting") }, "\(outcome.notes)")
        #expect(note.hasPrefix("magnetometer mounting undetermined: 0 window(s) counted, 4 with too little turning"))
        #expect(outcome.magnetometerOut == 0)
        #expect(
            outcome.notes.contains(
                "2000 magnetometer reading(s) held back until the mounting was clear (all of them: it never was)"))
    }
}

extension MountingDetectionStageTests {
    /// The same for a second magnetometer: the simulator's extra magnetometer `mast` mounted yaw_90 with
    /// its own hard iron, its calibration stage (magnetometer: mast) finds the mounting and the fusion
    /// stage then uses the mast's readings nearly all the time; told nothing, the turned compass is left out.
    @Test("a second magnetometer's mounting is found by its own calibration stage, and then it steers")
    func extraMagnetometerMountingFound() throws {
        func run(_ detect: Bool) throws -> (calibration: [String], fusion: [String]) {
            let text = """
                stages:
                  sim: {type: simulator, scenario: default, seed: 3, duration_s: 120, realtime: false,
                        extra_magnetometers: [mast], extra_mag_rotation: yaw_90, extra_hard_iron_ut: [5, -8, 3]}
                  calibration:
                    type: calibration
                    inputs: [sim]
                    magnetometer: mast
                    online: true
                    prompt: false
                    detect_rotation: \(detect)
                  fusion: {type: fusion, inputs: [calibration]}
                """
            let config = try PipelineConfig.parse(text, file: "detect.yaml", environment: [:])
            let source = try config.stage(named: "sim")!.makeLogic(log: { _ in }) as! SimulatorSource
            let stage = try config.stage(named: "calibration")!.makeLogic(log: { _ in }) as! CalibrationStage
            let fusion = try config.stage(named: "fusion")!.makeLogic(log: { _ in }) as! FusionStage
            let calibrated = try processed(try emitted(by: source), by: stage)
            #expect(calibrated.contains { $0.topic == "calibration/status/mast" })
            #expect(!calibrated.contains { $0.topic == PipelineTopics.calibrationStatus })
            _ = try processed(calibrated, by: fusion)
            _ = try stage.finish()
            _ = try fusion.finish()
            return (stage.notes, fusion.notes)
        }
        func mastUsed(_ notes: [String]) -> Double? {
            guard let line = notes.first(where: { $0.hasPrefix("magnetometers: ") }),
                let range = line.range(of: #"mast: \d+ reading\(s\), used ([0-9.]+) %"#, options: .regularExpression)
            else { return nil }
            return Double(line[range].split(separator: " ")[4])
        }
        let found = try run(true)
        let note = try #require(found.calibration.first { $0.hasPrefix("magnetometer mounting found") }, "\(found)")
        #expect(note.contains("found: yaw_90,"))
        let untold = try run(false)
        let used = try #require(mastUsed(found.fusion)), usedUntold = try #require(mastUsed(untold.fusion))
        #expect(used > usedUntold + 20, "found: \(found.fusion), untold: \(untold.fusion)")
    }
}
