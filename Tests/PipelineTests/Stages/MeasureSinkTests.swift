import Testing
import Foundation
import WireFormat
@testable import Pipeline

@Suite("Measure sink")
struct MeasureSinkTests {
    @Test("counts its topic and measures latency from wall-clock stamps; the report file is one JSON line")
    func measures() throws {
        let report = temporaryPath("m.json")
        let sink = try stageLogic("measure", "    skip_s: 0\n    report_path: \(report)\n") as! MeasureSink
        let now = Clocks.wallNow().seconds
        _ = try processed(
            [SinkFrames.heading(now - 0.002, 1), SinkFrames.fused(now), SinkFrames.heading(now - 0.001, 2)], by: sink)
        #expect(sink.count == 2 && sink.latencies.count == 2)
        #expect(sink.latencies.allSatisfy { $0 > 0.0005 && $0 < 1 }, "\(sink.latencies)")
        let json =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as! [String: Any]
        #expect(json["messages"] as? Int == 2 && json["latency_samples"] as? Int == 2)
    }
}
