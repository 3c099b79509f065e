import Testing
import Foundation
import CompassCore
import WireFormat
@testable import Pipeline

@Suite("Lines source")
struct LinesSourceTests {
    @Test("CSV lines and checksummed sentences parse; bad ones say why")
    func parsing() throws {
        let csv = "1.5,0.1,0.2,0.3,0,0,9.81,2e-5,0,4e-5"
        guard case .success(let (t, gyro, accel, mag)) = LinesSource.parse(Substring(csv)) else {
            Issue.record("refused")
            return
        }
        #expect(t == 1.5 && gyro == Vector3(0.1, 0.2, 0.3) && accel.z == 9.81 && mag.x == 2e-5)
        let body = "GCIMU," + csv
        let sum = body.utf8.reduce(UInt8(0)) { $0 ^ $1 }
        let sentence = "$\(body)*\(String(sum, radix: 16, uppercase: true))"
        guard case .success = LinesSource.parse(Substring(sentence)) else {
            Issue.record("sentence refused")
            return
        }
        for (line, reason) in [
            ("1,2,3", "expected 10"), ("$" + body + "*00", "does not match"), ("1,2,3,4,5,6,7,8,9,x", "not a finite"),
            ("1,2,3,4,5,6,7,8,9,inf", "not a finite"), ("$GCIMU,1", "without '*'"),
            ("1e19,0,0,0,0,0,9.81,2e-5,0,4e-5", "outside what a ROS stamp holds"),
        ] {
            guard case .failure(let why) = LinesSource.parse(Substring(line)) else {
                Issue.record("\(line) accepted")
                continue
            }
            #expect(why.reason.contains(reason), "\(line): \(why)")
        }
    }

    @Test("an unsupported baud rate is refused when the file loads, naming the speeds")
    func baud() {
        let e = configError("stages:\n  a:\n    type: lines\n    baud: 14400\n")
        #expect(e?.mark.line == 4 && e?.message.contains("115200") == true, "\(String(describing: e))")
    }

    @Test("a line without end is cut at 64 KiB and counted, and the lines after it still arrive")
    func overlongLine() throws {
        let path = temporaryPath("lines.txt")
        let good = "1.5,0.1,0.2,0.3,0,0,9.81,2e-5,0,4e-5\n"
        let text =
            good + String(repeating: "7", count: 300_000) + "\n" + good.replacingOccurrences(of: "1.5", with: "2.5")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let log = LogCollector()
        let source = try stageLogic("lines", "    device: \(path)\n") { log.append($0) } as! LinesSource
        let frames = try emitted(by: source)
        let stamps = try frames.filter { $0.topic == PipelineTopics.imuRaw }.map {
            try ImuMessage(cdrBytes: $0.payload).header.stamp.seconds
        }
        #expect(stamps == [1.5, 2.5])
        #expect(log.lines.contains { $0.contains("line 2") && $0.contains("longer than 65536 bytes") }, "\(log.lines)")
        #expect(source.notes.contains("1 malformed line(s)"))
    }

    @Test("a stamp's nanoseconds of a second or more are carried into the seconds, not a crash")
    func stampCarry() {
        #expect(stampText(RosTime(sec: 5, nanosec: 1_500_000_000)) == "6.500000000")
        #expect(stampText(RosTime(sec: Int32.max, nanosec: UInt32.max)) == "2147483651.294967295")
        #expect(RosTime(seconds: 1e19).sec == Int32.max && RosTime(seconds: -.infinity).sec == Int32.min)
        #expect(RosTime(seconds: .nan) == RosTime(sec: 0, nanosec: 0))
    }
}
