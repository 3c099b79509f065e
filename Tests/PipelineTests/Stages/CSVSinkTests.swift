import Testing
import Foundation
import CompassCore
import WireFormat
@testable import Pipeline

@Suite("CSV sink")
struct CSVSinkTests {
    @Test("one row per imu/data message with the exact stamp; headings with accuracy and flags in the second file")
    func rows() throws {
        let path = temporaryPath("q.csv"), accuracy = temporaryPath("a.csv")
        let sink = try stageLogic("csv", "    path: \(path)\n    accuracy_path: \(accuracy)\n") as! CSVSink
        _ = try processed(
            [SinkFrames.fused(1.25, Quaternion(w: 0, x: 0, y: 0, z: 1)), SinkFrames.heading(1.25, 180, accuracy: 3.5)],
            by: sink)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "t,qw,qx,qy,qz\n1.250000000,0.0,0.0,0.0,1.0\n")
        let acc = try String(contentsOfFile: accuracy, encoding: .utf8).split(separator: "\n")
        #expect(acc == ["t,heading_deg,accuracy_deg,flags", "1.250000000,180.0000,3.5000,"])
        #expect(sink.notes == ["1 rows to \(path)"])
    }

    @Test("nothing is created before the first frame; a file that cannot be created is an error naming path and reason")
    func unwritable() throws {
        let untouched = temporaryPath("keep.csv")
        try "precious\n".write(toFile: untouched, atomically: true, encoding: .utf8)
        _ = try stageLogic("csv", "    path: \(untouched)\n")
        #expect(try String(contentsOfFile: untouched, encoding: .utf8) == "precious\n")
        do {
            let sink = try stageLogic("csv", "    path: /nonexistent-dir/out.csv\n") as! CSVSink
            _ = try processed([SinkFrames.fused(1)], by: sink)
            Issue.record("created a file in a missing directory")
        } catch {
            #expect(
                "\(error)".contains("/nonexistent-dir/out.csv") && "\(error)".contains("No such file or directory"),
                "\(error)")
        }
    }
}
