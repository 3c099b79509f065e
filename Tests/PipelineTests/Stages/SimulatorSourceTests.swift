import Testing
import WireFormat
import MessageBus
@testable import Pipeline

@Suite("Simulator source")
struct SimulatorSourceTests {
    @Test(
        "emits one Imu and one MagneticField frame per sample, stamped in simulation time, the same for the same seed")
    func samples() throws {
        let settings = "    duration_s: 2\n    rate_hz: 50\n    realtime: false\n    seed: 7\n"
        let frames = try emitted(by: try stageLogic("simulator", settings) as! SourceLogic)
        #expect(frames.count == 200)
        #expect(frames.filter { $0.topic == PipelineTopics.imuRaw }.allSatisfy { $0.type == ImuMessage.typeName })
        #expect(frames.filter { $0.topic == PipelineTopics.magnetometer }.count == 100)
        let stamps = try frames.filter { $0.topic == PipelineTopics.imuRaw }.map {
            try ImuMessage(cdrBytes: $0.payload).header.stamp.seconds
        }
        #expect(abs(stamps[1] - stamps[0] - 0.02) < 1e-6 && stamps[0] >= 1_700_000_000)
        #expect(try emitted(by: try stageLogic("simulator", settings) as! SourceLogic) == frames)
        #expect(
            try emitted(
                by: try stageLogic("simulator", settings.replacingOccurrences(of: "seed: 7", with: "seed: 8"))
                    as! SourceLogic) != frames)
    }

    @Test("the hard iron it is given shows in the field")
    func hardIron() throws {
        let plain = try emitted(
            by: try stageLogic("simulator", "    duration_s: 0.1\n    realtime: false\n") as! SourceLogic)
        let offset = try emitted(
            by: try stageLogic("simulator", "    duration_s: 0.1\n    realtime: false\n    hard_iron_ut: [10, 0, 0]\n")
                as! SourceLogic)
        let a = try MagneticFieldMessage(cdrBytes: plain[1].payload).magneticField
        let b = try MagneticFieldMessage(cdrBytes: offset[1].payload).magneticField
        #expect(abs((b.x - a.x) - 10e-6) < 1e-9)
    }
}
