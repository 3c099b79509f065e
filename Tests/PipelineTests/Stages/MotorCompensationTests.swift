import Testing
import Foundation
import CompassCore
import WireFormat
import IMUSimulator
@testable import Pipeline

/// Motors beside the magnetometer: a current of up to 30 A adds 1 uT per ampere. The calibration stage
/// learns how much from the readings and removes it; the heading is then as good as without motors.
@Suite("Motor-current compensation in the default graph")
struct MotorCompensationTests {
    /// Heading RMSE in degrees from `from` seconds on, and the calibration stage's notes, for the
    /// simulator's default scenario (seed 3, 120 s, hard iron (25, -30, 12)) through calibration and fusion.
    static func run(amperes: Double, learn: Bool, from: Double = 40) throws -> (rmse: Double, notes: [String]) {
        let text = """
            stages:
              sim:
                type: simulator
                seed: 3
                duration_s: 120
                realtime: false
                hard_iron_ut: [25, -30, 12]
                motor_current_a: \(amperes)
                motor_field_ut_per_a: [0.6, -0.5, 0.6]
              calibration:
                type: calibration
                inputs: [sim]
                online: true
                prompt: false
                learn_motor: \(learn)
              fusion:
                type: fusion
                inputs: [calibration]
            """
        let config = try PipelineConfig.parse(text, file: "motor.yaml", environment: [:])
        let source = try config.stage(named: "sim")!.makeLogic(log: { _ in }) as! SimulatorSource
        let calibration = try config.stage(named: "calibration")!.makeLogic(log: { _ in }) as! CalibrationStage
        let fusion = try config.stage(named: "fusion")!.makeLogic(log: { _ in }) as! TransformLogic
        let scenario = source.scenario()
        let fused = try processed(try processed(try emitted(by: source), by: calibration), by: fusion)
        let rmse = try headingRMSE(fused, scenario: scenario, count: 12_000, from: from)
        return (rmse, calibration.notes)
    }

    @Test("30 A at 1 uT/A: learned compensation is within 0.3 degrees of no motors; without it, it is not")
    func learnedCompensation() throws {
        let clean = try Self.run(amperes: 0, learn: true)
        let learned = try Self.run(amperes: 30, learn: true)
        let uncompensated = try Self.run(amperes: 30, learn: false)
        print(
            "motors: heading RMSE after 40 s without motors \(clean.rmse), with learned compensation "
                + "\(learned.rmse), without compensation \(uncompensated.rmse) degrees; \(learned.notes)")
        #expect(abs(learned.rmse - clean.rmse) <= 0.3)
        #expect(uncompensated.rmse > clean.rmse + 1)
        let note = try #require(learned.notes.first { $0.hasPrefix("motors' field") })
        #expect(note.contains("learned from"))
    }

    @Test(
        "a car's motors: readings wait until the field is learned; with the vehicle gate, heading as without motors"
    )
    func heldWhileLearning() throws {
        func drive(amperes: Double, current: Bool) throws -> (rmse: Double, notes: [String], firstOut: Double?) {
            let text = """
                stages:
                  sim:
                    type: simulator
                    scenario: drive
                    seed: 1
                    duration_s: 240
                    realtime: false
                    motor_current_a: \(amperes)
                    motor_field_ut_per_a: [1, 0, 0]
                  calibration:
                    type: calibration
                    inputs: [sim]
                    online: true
                    prompt: false
                  fusion:
                    type: fusion
                    inputs: [calibration]
                    inclination_gate_deg: 2
                """
            let config = try PipelineConfig.parse(text, file: "car.yaml", environment: [:])
            let source = try config.stage(named: "sim")!.makeLogic(log: { _ in }) as! SimulatorSource
            let calibration = try config.stage(named: "calibration")!.makeLogic(log: { _ in }) as! CalibrationStage
            let fusion = try config.stage(named: "fusion")!.makeLogic(log: { _ in }) as! TransformLogic
            // Without `current`, the bus carries no motor/current: nothing to learn from or compensate.
            let frames = try emitted(by: source).filter { current || $0.topic != PipelineTopics.motorCurrent }
            let calibrated = try processed(frames, by: calibration)
            let firstOut = try calibrated.first { $0.topic == PipelineTopics.magnetometer }.map {
                try MagneticFieldMessage(cdrBytes: $0.payload).header.stamp.seconds - source.scenario().startTime
            }
            let fused = try processed(calibrated, by: fusion)
            let rmse = try headingRMSE(fused, scenario: source.scenario(), count: 24_000, from: 60)
            return (rmse, calibration.notes, firstOut)
        }
        let clean = try drive(amperes: 0, current: false)
        let learned = try drive(amperes: 30, current: true)
        let uncompensated = try drive(amperes: 30, current: false)
        print(
            "car motors: clean \(clean.rmse), learned \(learned.rmse), uncompensated \(uncompensated.rmse); "
                + "\(learned.notes)"
        )
        #expect(clean.firstOut == 0)
        // Learned at about 12 s; nothing reaches fusion before.
        #expect((learned.firstOut ?? 0) > 5)
        #expect(
            learned.notes.contains {
                $0.contains("magnetometer reading(s) held back until the motors' field was learned")
            })
        #expect(abs(learned.rmse - clean.rmse) <= 0.3)
        #expect(uncompensated.rmse > clean.rmse + 3)
    }
}
