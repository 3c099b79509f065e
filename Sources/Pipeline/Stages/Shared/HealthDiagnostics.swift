import CompassCore
import WireFormat

/// The pipeline's health as ROS diagnostics: one status for the heading, one for the magnetometer
/// calibration and one for magnetic interference, each with a level and the numbers behind it. Fed
/// with the messages a sink sees (heading, calibration/status, interference/status); the level rules
/// are here, apart from the DDS writer, so they can be tested on their own.
struct HealthDiagnostics {
    /// A 95 % heading bound above this is a warning, degrees: a compass no better than +-10 degrees
    /// steers a vehicle visibly off a line.
    var warnAccuracyDegrees = 10.0
    /// Above this it is an error, degrees: worse than an octant, the heading is not usable.
    var errorAccuracyDegrees = 45.0

    var heading: HeadingMessage?
    var calibration: CalibrationStatusMessage?
    var interference: InterferenceStatusMessage?
    /// Headings received since the last report, and the seconds of data they span.
    var headingsSinceReport = 0
    var firstStampSinceReport: Double?
    /// Headings since the last report that GNSS held, and that flagged the compass against GNSS; and
    /// whether GNSS ever held one (robots without GNSS get no GNSS status).
    var gnssAidedSinceReport = 0, disagreeingSinceReport = 0
    var gnssSeen = false

    mutating func observe(_ h: HeadingMessage) {
        heading = h
        headingsSinceReport += 1
        let flags = FusionFlags(rawValue: h.flags)
        if flags.contains(.gnssAided) {
            gnssAidedSinceReport += 1
            gnssSeen = true
        }
        if flags.contains(.compassDisagreesWithGnss) { disagreeingSinceReport += 1 }
        if firstStampSinceReport == nil { firstStampSinceReport = h.header.stamp.seconds }
    }

    mutating func observe(_ c: CalibrationStatusMessage) { calibration = c }
    mutating func observe(_ i: InterferenceStatusMessage) { interference = i }

    static func text(_ x: Double, _ digits: Int) -> String { x.isFinite ? format(x, digits) : "unknown" }

    /// The statuses now; the heading counters start again. `final`: the run's last report, where a
    /// period without a new heading is the end of the input, not a silent filter.
    mutating func report(final: Bool = false) -> DiagnosticArrayMessage {
        let hardware = heading?.header.frameId ?? ""
        var status: [DiagnosticArrayMessage.Status] = [headingStatus(hardware: hardware, final: final)]
        if let c = calibration { status.append(Self.calibrationStatus(c, hardware: hardware)) }
        if let i = interference { status.append(Self.interferenceStatus(i, hardware: hardware)) }
        if gnssSeen { status.append(gnssStatus(hardware: hardware)) }
        let stamp = heading?.header.stamp ?? RosTime(seconds: 0)
        gnssAidedSinceReport = 0
        disagreeingSinceReport = 0
        headingsSinceReport = 0
        firstStampSinceReport = nil
        return DiagnosticArrayMessage(header: RosHeader(stamp: stamp, frameId: ""), status: status)
    }

    func headingStatus(hardware: String, final: Bool = false) -> DiagnosticArrayMessage.Status {
        let name = "gyrocompass: heading"
        guard let h = heading else {
            return .init(level: .error, name: name, message: "no heading yet", hardwareId: hardware, values: [])
        }
        let flags = FusionFlags(
            rawValue: h.flags
                & ~(HeadingMessage.flagNoPosition | HeadingMessage.flagModelOutOfRange
                | HeadingMessage.flagModelCautionZone))
        let accuracy = h.headingAccuracy
        var level = DiagnosticArrayMessage.Level.ok
        var message = "tracking"
        if flags.contains(.initialising) {
            (level, message) = (.warn, "initialising")
        } else if !accuracy.isFinite || accuracy > errorAccuracyDegrees {
            (level, message) = (.error, "heading not usable: 95 % bound \(Self.text(accuracy, 1)) deg")
        } else if accuracy > warnAccuracyDegrees {
            (level, message) = (.warn, "heading uncertain: 95 % bound \(format(accuracy, 1)) deg")
        } else if flags.contains(.gnssAided) {
            message = "tracking, held by GNSS"
        } else if flags.contains(.gyroOnly) || flags.contains(.magnetometerRejected) {
            (level, message) = (.warn, "holding the heading on the gyro (magnetometer rejected)")
        }
        if headingsSinceReport == 0 && !final {
            (level, message) = (.error, "no heading since the last report")
        }
        return .init(
            level: level, name: name, message: message, hardwareId: hardware,
            values: [
                ("magnetic heading (deg)", Self.text(h.magneticHeading, 2)),
                ("true heading (deg)", Self.text(h.trueHeading, 2)),
                ("95 % accuracy (deg)", Self.text(accuracy, 2)),
                ("headings since last report", "\(headingsSinceReport)"),
                ("flags", flags.description.isEmpty ? "none" : flags.description),
            ])
    }

    /// GNSS aiding: OK while GNSS holds the heading, WARN when the compass disagrees with it or GNSS
    /// stopped holding it (an outage, standing still without a dual-antenna receiver).
    func gnssStatus(hardware: String) -> DiagnosticArrayMessage.Status {
        /// A share of the period's headings, percent.
        func share(_ count: Int) -> String {
            format(headingsSinceReport > 0 ? 100 * Double(count) / Double(headingsSinceReport) : 0, 1)
        }
        let (level, message): (DiagnosticArrayMessage.Level, String) =
            if disagreeingSinceReport > 0 {
                (.warn, "compass disagrees with the GNSS heading: not used")
            } else if gnssAidedSinceReport > 0 {
                (.ok, "GNSS holds the heading")
            } else {
                (.warn, "GNSS not holding the heading (no course, acceleration or dual-antenna heading)")
            }
        return .init(
            level: level, name: "gyrocompass: gnss aiding", message: message, hardwareId: hardware,
            values: [
                ("headings held by GNSS (%)", share(gnssAidedSinceReport)),
                ("compass disagreeing (%)", share(disagreeingSinceReport)),
            ])
    }

    static func calibrationStatus(_ c: CalibrationStatusMessage, hardware: String) -> DiagnosticArrayMessage.Status {
        let state = OnlineCalibrator.State(rawValue: c.state)
        let (level, message): (DiagnosticArrayMessage.Level, String) =
            switch state {
            case .calibrated?: (.ok, "calibrated")
            case .collecting?: (.warn, "collecting directions: \(format(c.progress, 0)) %")
            case .degraded?: (.warn, "calibration degraded: recalibrating, \(format(c.progress, 0)) %")
            default: (.warn, "uncalibrated")
            }
        let h = c.hardIron
        return .init(
            level: level, name: "gyrocompass: magnetometer calibration", message: message, hardwareId: hardware,
            values: [
                ("progress (%)", text(c.progress, 0)), ("coverage (%)", text(100 * c.coverage, 0)),
                ("rms residual (uT)", text(c.rmsResidual, 2)), ("field strength (uT)", text(c.fieldStrength, 2)),
                ("hard iron (uT)", "\(text(h.x, 2)), \(text(h.y, 2)), \(text(h.z, 2))"),
                ("figure-eight asked for", c.prompt ? "yes" : "no"),
            ])
    }

    static func interferenceStatus(_ i: InterferenceStatusMessage, hardware: String) -> DiagnosticArrayMessage.Status {
        let share = i.samplesAssessed > 0 ? 100 * Double(i.samplesFlagged) / Double(i.samplesAssessed) : 0
        return .init(
            level: i.disturbed ? .warn : .ok, name: "gyrocompass: magnetic interference",
            message: i.disturbed ? "disturbed: heading held on the gyro" : "clear", hardwareId: hardware,
            values: [
                ("disturbed now", i.disturbed ? "yes" : "no"), ("readings flagged (%)", format(share, 1)),
                ("disturbed periods", "\(i.disturbedPeriods)"), ("disturbed (s)", text(i.disturbedSeconds, 1)),
                ("expected strength (uT)", text(i.expectedStrength, 1)), ("expected dip (deg)", text(i.expectedDip, 1)),
            ])
    }
}

/// The health `/diagnostics` reports, for a view that reads the same messages (`fusion-node watch`):
/// the worst status now, as its level, name and message.
public struct HealthSummary: Sendable {
    var health = HealthDiagnostics()
    public init() {}
    public mutating func observe(_ h: HeadingMessage) { health.observe(h) }
    public mutating func observe(_ c: CalibrationStatusMessage) { health.observe(c) }
    public mutating func observe(_ i: InterferenceStatusMessage) { health.observe(i) }

    /// The worst status of those `/diagnostics` would publish now (the first of equal ones), or nil
    /// before any heading. The heading counters are not reset: silence is the view's own business.
    public var worst: DiagnosticArrayMessage.Status? {
        guard health.heading != nil else { return nil }
        var copy = health
        let statuses = copy.report(final: true).status
        return statuses.reduce(nil as DiagnosticArrayMessage.Status?) { best, s in
            best.map { s.level > $0.level ? s : $0 } ?? s
        }
    }
}
