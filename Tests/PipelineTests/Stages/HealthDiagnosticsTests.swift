import Testing
import CompassCore
import WireFormat
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
        #expect(report.status.count == 2 && report.status[1].level == .warn)
        #expect(report.status[1].message == "collecting directions: 40 %")
        c.state = OnlineCalibrator.State.calibrated.rawValue
        health.observe(c)
        health.observe(heading(accuracy: 4))
        health.observe(
            InterferenceStatusMessage(
                header: c.header, disturbed: true, flags: 8, samplesAssessed: 200, samplesFlagged: 50,
                disturbedPeriods: 1, disturbedSeconds: 0.5, expectedStrength: 48, expectedDip: 66))
        report = health.report()
        #expect(report.status.map(\.level) == [.ok, .ok, .warn])
        #expect(report.status[2].values.first { $0.key == "readings flagged (%)" }?.value == "25.0")
        let decoded = try DiagnosticArrayMessage(cdrBytes: report.cdr())
        #expect(decoded == report)
    }

    @Test("GNSS aiding: no status without GNSS; OK while it holds the heading, WARN on disagreement or loss")
    func gnssStatus() {
        var health = HealthDiagnostics()
        health.observe(heading(accuracy: 4))
        #expect(!health.report().status.contains { $0.name == "gyrocompass: gnss aiding" })
        health.observe(heading(accuracy: 4, flags: [.gnssAided, .magnetometerRejected, .gyroOnly]))
        var report = health.report()
        #expect(report.status[0].level == .ok && report.status[0].message == "tracking, held by GNSS")
        #expect(report.status.last?.name == "gyrocompass: gnss aiding" && report.status.last?.level == .ok)
        health.observe(heading(accuracy: 4, flags: [.gnssAided, .compassDisagreesWithGnss]))
        report = health.report()
        #expect(report.status.last?.level == .warn)
        #expect(report.status.last?.message == "compass disagrees with the GNSS heading: not used")
        #expect(report.status[0].values.first { $0.key == "flags" }?.value == "gnss_aided|compass_gnss_disagree")
        health.observe(heading(accuracy: 4))
        report = health.report()
        #expect(report.status.last?.level == .warn)
        #expect(report.status.last?.values.first { $0.key == "headings held by GNSS (%)" }?.value == "0.0")
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
