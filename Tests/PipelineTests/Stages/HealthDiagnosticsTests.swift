import Testing
import CompassCore
import WireFormat
import MessageBus
@testable import Pipeline

@Suite("Health diagnostics")
struct HealthDiagnosticsTests {
    func heading(accuracy: Double, flags: FusionFlags = []) -> HeadingMessage {
        HeadingMessage(
            header: RosHeader(stamp: RosTime(seconds: 1_700_000_010), frameId: "imu_link"), magneticHeading: 30,
            trueHeading: .nan, headingAccuracy: accuracy, declination: .nan, orientation: .identity,
            magneticField: .zero, source: 0, flags: UInt16(flags.rawValue))
    }

    @Test("the heading status follows the 95 % bound, the flags and silence")
    func headingLevels() {
        var health = HealthDiagnostics()
        #expect(health.report().status[0].level == .error)  // no heading yet
        for (accuracy, flags, level) in [
            (5.0, FusionFlags(), DiagnosticArrayMessage.Level.ok), (20, [], .warn), (90, [], .error),
            (.nan, [], .error), (5, .initialising, .warn), (5, .gyroOnly, .warn),
        ] {
            health.observe(heading(accuracy: accuracy, flags: flags))
            let status = health.report().status[0]
            #expect(status.level == level, "\(accuracy) \(flags): \(status.message)")
            #expect(status.hardwareId == "imu_link")
        }
        // A period with no new heading is an error, except at the end of the input.
        #expect(health.report().status[0].level == .error)
        #expect(health.report(final: true).status[0].level == .warn)
    }

    @Test("calibration and interference statuses, and the array survives CDR")
    func otherStatuses() throws {
        var health = HealthDiagnostics()
        health.observe(heading(accuracy: 4))
        var c = CalibrationStatusMessage(
            header: RosHeader(stamp: RosTime(seconds: 1_700_000_010), frameId: "imu_link"), state: 1, prompt: true,
            progress: 40, coverage: 0.4, rmsResidual: .nan, fieldStrength: .nan, hardIron: .zero, softIron: .zero,
            gyroBias: .zero)
        health.observe(c)
        var report = health.report()
        #expect(
            report.status.map(\.name) == [
                "gyrocompass: heading", "gyrocompass: magnetometer calibration",
                "gyrocompass: heading stream",
            ])
        #expect(report.status[1].level == .warn)
        #expect(report.status[1].message == "collecting directions: 40 %")
        c.state = OnlineCalibrator.State.calibrated.rawValue
        health.observe(c)
        health.observe(heading(accuracy: 4))
        health.observe(
            InterferenceStatusMessage(
                header: c.header, disturbed: true, flags: 8, samplesAssessed: 200, samplesFlagged: 50,
                disturbedPeriods: 1, disturbedSeconds: 0.5, expectedStrength: 48, expectedDip: 66))
        report = health.report()
        #expect(report.status.map(\.level) == [.ok, .ok, .warn, .ok])
        #expect(report.status[2].values.first { $0.key == "readings flagged (%)" }?.value == "25.0")
        let decoded = try DiagnosticArrayMessage(cdrBytes: report.cdr())
        #expect(decoded == report)
    }

    @Test("GNSS aiding: no status without GNSS; OK while it holds the heading, WARN on disagreement or loss")
    func gnssStatus() throws {
        var health = HealthDiagnostics()
        health.observe(heading(accuracy: 4))
        #expect(!health.report().status.contains { $0.name == "gyrocompass: gnss aiding" })
        health.observe(heading(accuracy: 4, flags: [.gnssAided, .magnetometerRejected, .gyroOnly]))
        func gnss(_ r: DiagnosticArrayMessage) throws -> DiagnosticArrayMessage.Status {
            try #require(r.status.first { $0.name == "gyrocompass: gnss aiding" })
        }
        var report = health.report()
        #expect(report.status[0].level == .ok && report.status[0].message == "tracking, held by GNSS")
        #expect(try gnss(report).level == .ok)
        health.observe(heading(accuracy: 4, flags: [.gnssAided, .compassDisagreesWithGnss]))
        report = health.report()
        #expect(try gnss(report).level == .warn)
        #expect(try gnss(report).message == "compass disagrees with the GNSS heading: not used")
        #expect(report.status[0].values.first { $0.key == "flags" }?.value == "gnss_aided|compass_gnss_disagree")
        health.observe(heading(accuracy: 4))
        report = health.report()
        #expect(try gnss(report).level == .warn)
        #expect(try gnss(report).values.first { $0.key == "headings held by GNSS (%)" }?.value == "0.0")
    }

    @Test("the heading stream: steady at its rate; gaps, a clock that goes back and filter restarts warn")
    func streamStatus() throws {
        var health = HealthDiagnostics()
        func feed(from start: Double, count: Int, every step: Double = 0.01, flags: FusionFlags = []) {
            for i in 0..<count {
                var h = heading(accuracy: 4, flags: i == 0 ? flags : [])
                h.header.stamp = RosTime(seconds: start + Double(i) * step)
                health.observe(h)
            }
        }
        func stream() throws -> DiagnosticArrayMessage.Status {
            try #require(health.report().status.first { $0.name == "gyrocompass: heading stream" })
        }
        feed(from: 100, count: 101)
        var s = try stream()
        #expect(s.level == .ok && s.message == "steady")
        #expect(s.values.first { $0.key == "headings per second (by stamp)" }?.value == "100.0")
        // A 2 s gap inside the next period, then steady again: WARN for that period only.
        feed(from: 101.01, count: 50)
        feed(from: 103.5, count: 50)
        s = try stream()
        #expect(s.level == .warn && s.message == "1 gap(s) over 0.5 s, up to 2.00 s", "\(s.message)")
        feed(from: 104, count: 100)
        #expect(try stream().level == .ok)
        // The clock goes back ten seconds, and the filter restarts once.
        feed(from: 95, count: 100, flags: .filterReset)
        s = try stream()
        #expect(s.message == "the clock went back 1 time(s); the filter restarted 1 time(s)", "\(s.message)")
        #expect(s.values.first { $0.key == "largest gap in the run (s)" }?.value == "2.000")
    }

    @Test("several magnetometers: which ones steer, and a WARN naming the one left out")
    func magnetometersStatus() throws {
        var health = HealthDiagnostics()
        health.observe(heading(accuracy: 4))
        let header = RosHeader(stamp: RosTime(seconds: 1_700_000_010), frameId: "mast")
        func verdict(_ disturbed: Bool, flagged: UInt32) -> InterferenceStatusMessage {
            InterferenceStatusMessage(
                header: header, disturbed: disturbed, flags: 0, samplesAssessed: 100, samplesFlagged: flagged,
                disturbedPeriods: 0, disturbedSeconds: 0, expectedStrength: 48, expectedDip: 66)
        }
        #expect(!health.report().status.contains { $0.name == "gyrocompass: magnetometers" })
        health.observe(verdict(false, flagged: 0))
        _ = try health.observe(frame: cdrFrame(verdict(false, flagged: 2), topic: "interference/status/mast"))
        var s = try #require(health.report().status.first { $0.name == "gyrocompass: magnetometers" })
        #expect(s.level == .ok && s.message == "all in use")
        _ = try health.observe(frame: cdrFrame(verdict(true, flagged: 30), topic: "interference/status/mast"))
        s = try #require(health.report().status.first { $0.name == "gyrocompass: magnetometers" })
        #expect(s.level == .warn && s.message == "in use: mag; left out (disturbed or outvoted): mast")
        #expect(s.values.first { $0.key == "mast: readings left out (%)" }?.value == "30.0")
    }

    @Test("the summary watch shows is the worst status, and reading it leaves the period's counts alone")
    func worstForWatch() {
        var summary = HealthSummary()
        #expect(summary.worst == nil)
        summary.observe(heading(accuracy: 4))
        #expect(summary.worst?.level == .ok)
        summary.observe(heading(accuracy: 4, flags: [.gnssAided, .compassDisagreesWithGnss]))
        #expect(summary.worst?.name == "gyrocompass: gnss aiding" && summary.worst?.level == .warn)
        summary.observe(heading(accuracy: 90))
        #expect(summary.worst?.level == .error && summary.worst?.name == "gyrocompass: heading")
        // Read twice: the same answer (no period was closed by reading it).
        #expect(summary.worst == summary.worst)
    }
}
