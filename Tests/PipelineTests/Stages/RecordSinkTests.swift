import Testing
import Foundation
import WireFormat
import Bags
@testable import Pipeline

@Suite("Record sink")
struct RecordSinkTests {
    @Test(
        "records the chosen topics with the header stamp as log time, readable as a bag",
        arguments: ["mcap", "sqlite3"])
    func records(_ storage: String) throws {
        let path = temporaryPath("bag")
        let sink =
            try stageLogic("record", "    path: \(path)\n    storage: \(storage)\n    topics: [heading]\n")
            as! RecordSink
        _ = try processed([SinkFrames.heading(5.5, 1), SinkFrames.fused(5.5), SinkFrames.heading(6, 2)], by: sink)
        var messages: [(String, UInt64)] = []
        try BagReader(path: path).forEachMessage { messages.append(($0.topic, $0.logTime)) }
        #expect(messages.map(\.0) == ["/heading", "/heading"])
        #expect(messages.map(\.1) == [5_500_000_000, 6_000_000_000])
    }

    @Test("a resumed recorder finds the split the killed one wrote")
    func splits() {
        #expect(RecordSink.previousSplit(of: "/r/run_1.mcap", first: "/r/run.mcap") == "/r/run.mcap")
        #expect(RecordSink.previousSplit(of: "/r/run_3.mcap", first: "/r/run.mcap") == "/r/run_2.mcap")
        #expect(RecordSink.previousSplit(of: "/r/bag_2", first: "/r/bag") == "/r/bag_1")
        #expect(RecordSink.previousSplit(of: "/r/my_run_1.db3", first: "/r/my_run.db3") == "/r/my_run.db3")
    }
}
