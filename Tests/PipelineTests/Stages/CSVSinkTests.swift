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

    @Test("rows go to PATH.partial until the close renames it: a run that dies leaves no complete-looking PATH")
    func partialUntilClosed() throws {
        let path = temporaryPath("partial.csv")
        try "earlier run\n".write(toFile: path, atomically: true, encoding: .utf8)
        let sink = try stageLogic("csv", "    path: \(path)\n") as! CSVSink
        try sink.consume(SinkFrames.fused(1))
        try sink.inputDrained()
        // Killed here: the earlier file is as it was, the rows so far are under the partial name.
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "earlier run\n")
        let partial = path + BufferedFileWriter.partialSuffix
        #expect(try String(contentsOfFile: partial, encoding: .utf8).hasPrefix("t,qw,qx,qy,qz\n1.000000000,"))
        try sink.close()
        #expect(!FileManager.default.fileExists(atPath: partial))
        #expect(try String(contentsOfFile: path, encoding: .utf8).hasPrefix("t,qw,qx,qy,qz\n1.000000000,"))
        // A device is written where it is.
        #expect(try BufferedFileWriter(path: "/dev/null").writingPath == "/dev/null")
    }

    @Test("a resumed sink drops the rows read again up to its last row, and says whether the stream reached back to it")
    func resumed() throws {
        let path = temporaryPath("r.csv")
        for (offered, kept, proven) in [
            ([1.01, 1.02, 1.03], "1.030000000", true), ([1.05, 1.06], "1.060000000", false),
        ] {
            // What a killed sink left: three rows and one cut off.
            try "t,qw,qx,qy,qz\n1.000000000,1,0,0,0\n1.010000000,1,0,0,0\n1.020000000,1,0,0,0\n1.03".write(
                toFile: path, atomically: true, encoding: .utf8)
            let sink = try stageLogic("csv", "    path: \(path)\n", output: .continues) as! CSVSink
            _ = try processed(offered.map { SinkFrames.fused($0) }, by: sink)
            let rows = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map { $0.prefix(11) }
            #expect(rows.filter { $0.hasPrefix("t,") }.count == 1)
            #expect(rows.last.map(String.init) == kept, "\(rows)")
            if proven {
                #expect(rows.count == 5 && sink.losses == 0, "\(rows)")
                #expect(
                    sink.notes.contains { $0.contains("2 row(s) read again were already written") }, "\(sink.notes)")
            } else {
                #expect(rows.count == 6 && sink.losses == 1, "\(rows)")
                #expect(
                    sink.notes.contains {
                        $0.contains("after its last row at 1.020000000") && $0.contains("starts at 1.050000000")
                    }, "\(sink.notes)")
            }
        }
        #expect(ResumePoint.stamp(ofRow: "17.000000005,1,0") == RosTime(sec: 17, nanosec: 5))
        #expect(ResumePoint.stamp(ofRow: "t,qw") == nil && ResumePoint.stamp(ofRow: "1.5,1") == nil)
    }
}
