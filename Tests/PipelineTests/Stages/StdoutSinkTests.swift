import Testing
import WireFormat
import MessageBus
@testable import Pipeline

@Suite("Stdout sink")
struct StdoutSinkTests {
    @Test("text lines name heading, direction, accuracy and flags; min_change_deg holds back small changes")
    func lines() throws {
        let sink = try stageLogic("stdout", "    min_change_deg: 5\n") as! StdoutSink
        var out: [WireFrame] = []
        for (t, h) in [(1.0, 90.0), (2.0, 92.0), (3.0, 96.0)] {
            try sink.process(SinkFrames.heading(t, h, flags: 1), into: &out)
        }
        let lines = sink.buffer.split(separator: "\n")
        #expect(lines.count == 2, "\(lines)")
        #expect(lines[0].hasPrefix("t=1.000 heading=90.0 (E) +-2.0 ["), "\(lines[0])")
        #expect(lines[1].hasPrefix("t=3.000 heading=96.0"))
        #expect(out.isEmpty)
    }

    @Test("JSON lines carry topic, type and the decoded message, for the topics asked for only")
    func json() throws {
        let sink = try stageLogic("stdout", "    format: json\n    topics: [imu/data]\n") as! StdoutSink
        var out: [WireFrame] = []
        try sink.process(SinkFrames.heading(1, 10), into: &out)
        try sink.process(SinkFrames.fused(1), into: &out)
        let lines = sink.buffer.split(separator: "\n")
        #expect(
            lines.count == 1
                && lines[0].hasPrefix("{\"topic\":\"imu/data\",\"type\":\"sensor_msgs/msg/Imu\",\"message\":{"))
    }
}
