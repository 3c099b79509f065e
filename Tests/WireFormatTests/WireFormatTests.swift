import Testing
import CompassCore
import WireFormat
import YAML

@Suite("ROS 2 CDR messages")
struct CDRTests {
    let header = RosHeader(stamp: RosTime(sec: 1_700_000_123, nanosec: 456_789_000), frameId: "imu_link")

    @Test("Imu round-trips and has the ROS layout")
    func imu() throws {
        let m = ImuMessage(
            header: header, orientation: Quaternion(w: 0.5, x: 0.5, y: -0.5, z: 0.5),
            orientationCovariance: Covariance9((0..<9).map(Double.init)), angularVelocity: Vector3(0.1, -0.2, 0.3),
            angularVelocityCovariance: Covariance9(repeating: 0.01), linearAcceleration: Vector3(0, 0.5, 9.81),
            linearAccelerationCovariance: Covariance9(repeating: -1))
        let bytes = m.cdr()
        // 4 header + 8 stamp + 4 length + 9 "imu_link\0" = 25, padded to 28 (8-aligned body offset 24),
        // then 4 + 9 + 3 + 9 + 3 + 9 = 37 float64s.
        #expect(bytes.count == 4 + 24 + 37 * 8)
        #expect(Array(bytes[0..<4]) == [0, 1, 0, 0])
        #expect(try ImuMessage(cdrBytes: bytes) == m)
        #expect(
            m.sample
                == ImuSample(
                    timestamp: header.stamp.seconds, angularVelocity: Vector3(0.1, -0.2, 0.3),
                    specificForce: Vector3(0, 0.5, 9.81)))
    }

    @Test("MagneticField and NavSatFix round-trip; tesla becomes microtesla in the sample")
    func others() throws {
        let mag = MagneticFieldMessage(
            header: header, magneticField: Vector3(20e-6, -5e-6, -44e-6),
            magneticFieldCovariance: Covariance9(repeating: 0))
        #expect(try MagneticFieldMessage(cdrBytes: mag.cdr()) == mag)
        #expect((mag.sample.fieldMicrotesla - Vector3(20, -5, -44)).norm < 1e-9)
        let fix = NavSatFixMessage(
            header: header, status: 0, service: 1, latitude: 52.5, longitude: 13.4, altitude: 35,
            positionCovariance: Covariance9(repeating: 2), positionCovarianceType: 2)
        #expect(try NavSatFixMessage(cdrBytes: fix.cdr()) == fix)
    }

    @Test("truncated, mis-encapsulated and random payloads give errors naming the field, never a crash")
    func badPayloads() {
        let good = MagneticFieldMessage(header: header, magneticField: Vector3(1, 2, 3), magneticFieldCovariance: [])
            .cdr()
        for n in 0..<good.count {
            #expect(throws: CDRError.self) { try MagneticFieldMessage(cdrBytes: Array(good.prefix(n))) }
        }
        do {
            _ = try MagneticFieldMessage(cdrBytes: Array(good.prefix(40)))
            Issue.record("a truncated payload decoded")
        } catch {
            #expect(error.description.contains("magnetic_field"), "\(error)")
        }
        var wrong = good
        wrong[1] = 0x07
        #expect(throws: CDRError.unsupportedEncapsulation(0x0007)) { try MagneticFieldMessage(cdrBytes: wrong) }
        var lying = good
        lying[12] = 0xFF
        lying[13] = 0xFF
        lying[14] = 0xFF
        lying[15] = 0x7F
        #expect(throws: CDRError.self) { try MagneticFieldMessage(cdrBytes: lying) }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let junk = (0..<Int.random(in: 0..<400, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            _ = try? ImuMessage(cdrBytes: junk)
            _ = try? NavSatFixMessage(cdrBytes: junk)
        }
    }

    @Test("ROS time converts both ways")
    func time() {
        let t = RosTime(seconds: 1_700_000_000.0035)
        // A Double holding 1.7e9 s resolves about 0.24 us.
        #expect(t.sec == 1_700_000_000 && abs(Int(t.nanosec) - 3_500_000) <= 300)
        #expect(RosTime(sec: 5, nanosec: 250_000_000).seconds == 5.25)
        #expect(RosTime(sec: 5, nanosec: 1).nanoseconds == 5_000_000_001)
    }
}

@Suite("YAML via libyaml")
struct YAMLTests {
    @Test("mappings, sequences, scalars and their positions")
    func parse() throws {
        let text = """
            stages:
              - name: source
                type: simulator
                rate: 100
              - name: fusion
                inputs: [source]
            empty:
            quoted: "null"
            """
        let root = try #require(try YAMLParser.parse(text, file: "p.yaml"))
        let stages = try #require(root["stages"]?.sequence)
        #expect(stages.count == 2)
        #expect(stages[0]["rate"]?.scalar == "100")
        #expect(stages[0]["rate"]?.mark == YAMLMark(line: 4, column: 11))
        #expect(stages[1]["inputs"]?.sequence?.first?.scalar == "source")
        #expect(root["empty"]?.isNull == true)
        #expect(root["quoted"]?.isNull == false)
        #expect(try YAMLParser.parse("", file: "e.yaml") == nil)
    }

    @Test("syntax errors and duplicate keys name file, line and column")
    func errors() {
        do {
            _ = try YAMLParser.parse("a: [1, 2\nb: 3\n", file: "bad.yaml")
            Issue.record("unterminated flow sequence accepted")
        } catch {
            #expect(error.file == "bad.yaml" && error.mark.line >= 1)
            #expect(error.description.hasPrefix("bad.yaml:"))
        }
        do {
            _ = try YAMLParser.parse("a: 1\nb: 2\na: 3\n", file: "dup.yaml")
            Issue.record("duplicate key accepted")
        } catch {
            #expect(error.mark == YAMLMark(line: 3, column: 1))
            #expect(error.message.contains("duplicate key 'a'"))
        }
        do {
            _ = try YAMLParser.parse("a: *nowhere\n", file: "alias.yaml")
            Issue.record("unknown alias accepted")
        } catch {
            #expect(error.message.contains("unknown alias"))
        }
    }

    @Test("anchors and aliases resolve")
    func aliases() throws {
        let root = try #require(try YAMLParser.parse("base: &b {x: 1}\nother: *b\n", file: "a.yaml"))
        #expect(root["other"]?["x"]?.scalar == "1")
    }
}

@Suite("YAML limits")
struct YAMLLimitsTests {
    @Test("deep nesting, alias expansion and size beyond the limits are clear errors, quickly")
    func limits() {
        func error(_ text: String, limits: YAMLParser.Limits = .init()) -> YAMLError? {
            do {
                _ = try YAMLParser.parse(text, file: "x.yaml", limits: limits)
                return nil
            } catch { return error }
        }
        let deep = "a: " + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(error(deep)?.message == "nesting deeper than 64 levels")
        #expect(error("a: " + String(repeating: "[", count: 60) + String(repeating: "]", count: 60)) == nil)
        var laughs = "x0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        for i in 1...8 {
            laughs += "x\(i): &a\(i) [" + Array(repeating: "*a\(i - 1)", count: 10).joined(separator: ", ") + "]\n"
        }
        #expect(error(laughs)?.message.contains("expands to more than 100000 nodes") == true)
        #expect(
            error(
                String(repeating: "# comment\n", count: 10),
                limits: {
                    var l = YAMLParser.Limits()
                    l.maximumBytes = 50
                    return l
                }())?
                .message.contains("has more than 50 bytes") == true)
    }

    @Test("a file that never ends is read only up to the limit, then refused by its size")
    func endlessFile() {
        let text = YAMLParser.readFile("/dev/zero", maximumBytes: 1000)
        #expect(text?.utf8.count == 1001)
        var limits = YAMLParser.Limits()
        limits.maximumBytes = 1000
        #expect(throws: YAMLError.self) { try YAMLParser.parse(text ?? "", file: "/dev/zero", limits: limits) }
    }
}
