import Testing
import CompassCore
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
}
