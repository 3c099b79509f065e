import CompassCore
import WireFormat
import MessageBus

/// The pipeline's health as ROS diagnostics: one status for the heading, one for the heading stream
/// (rate, gaps, clock jumps, filter resets), one for the magnetometer calibration, one for magnetic
/// interference, one for several magnetometers and one for GNSS aiding when there are such, each with a
/// level and the numbers behind it. Fed with the messages a sink sees (heading, calibration/status,
/// interference/status and interference/status/NAME); the level rules are here, apart from the
/// writers, so they can be tested on their own.
struct HealthDiagnostics {
    /// A 95 % heading bound above this is a warning, degrees: a compass no better than +-10 degrees
    /// steers a vehicle visibly off a line.
    var warnAccuracyDegrees = 10.0
    /// Above this it is an error, degrees: worse than an octant, the heading is not usable.
    var errorAccuracyDegrees = 45.0
    /// Headings further apart than this (by their stamps) are a gap, seconds. The fusion stage makes one
    /// heading per IMU sample and integrates at most 0.1 s in one step; half a second is fifty samples
    /// lost at 100 Hz, and a robot at 1 m/s moved half a metre unseen.
    var gapSeconds = 0.5

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
    /// The heading stream since the last report: the newest stamp, gaps (and the largest), stamps that
    /// went back (a clock jump, or a replay that loops), filter resets; the largest gap in the run.
    var lastStamp: Double?
    var gapsSinceReport = 0, backwardsSinceReport = 0, resetsSinceReport = 0
    var largestGapSinceReport = 0.0, largestGap = 0.0
    /// The other magnetometers' latest verdicts (interference/status/NAME), by name.
    var others: [String: InterferenceStatusMessage] = [:]

    mutating func observe(_ h: HeadingMessage) {
        heading = h
        headingsSinceReport += 1
        let flags = h.fusionFlags
        if flags.contains(.gnssAided) {
            gnssAidedSinceReport += 1
            gnssSeen = true
        }
        if flags.contains(.compassDisagreesWithGnss) { disagreeingSinceReport += 1 }
        if flags.contains(.filterReset) { resetsSinceReport += 1 }
        let stamp = h.header.stamp.seconds
        if firstStampSinceReport == nil { firstStampSinceReport = stamp }
        if let last = lastStamp {
            let step = stamp - last
            if step < 0 {
                backwardsSinceReport += 1
                firstStampSinceReport = stamp  // the rate is measured on the new timeline
            } else if step > gapSeconds {
                gapsSinceReport += 1
            }
            largestGapSinceReport = max(largestGapSinceReport, step)
            largestGap = max(largestGap, step)
        }
        lastStamp = stamp
    }

    mutating func observe(_ c: CalibrationStatusMessage) { calibration = c }
    mutating func observe(_ i: InterferenceStatusMessage) { interference = i }

    /// Takes a frame a sink sees: a heading, calibration/status or interference/status counts (the
    /// primary magnetometer's; imu/mag/NAME's statuses have their own topics). Returns whether it was one.
    mutating func observe(frame: borrowing WireFrame) throws -> Bool {
        switch frame.topic {
        case PipelineTopics.heading where frame.type == HeadingMessage.typeName:
            observe(try decoded(frame, as: HeadingMessage.self))
        case PipelineTopics.calibrationStatus where frame.type == CalibrationStatusMessage.typeName:
            observe(try decoded(frame, as: CalibrationStatusMessage.self))
        case PipelineTopics.interferenceStatus where frame.type == InterferenceStatusMessage.typeName:
            observe(try decoded(frame, as: InterferenceStatusMessage.self))
        case let topic where frame.type == InterferenceStatusMessage.typeName:
            guard let name = PipelineTopics.otherInterferenceName(topic) else { return false }
            others[name] = try decoded(frame, as: InterferenceStatusMessage.self)
        default:
            return false
        }
        return true
    }

    static func text(_ x: Double, _ digits: Int) -> String { x.isFinite ? format(x, digits) : "unknown" }

    /// The statuses now; the heading counters start again. `final`: the run's last report, where a
    /// period without a new heading is the end of the input, not a silent filter.
    mutating func report(final: Bool = false) -> DiagnosticArrayMessage {
        let hardware = heading?.header.frameId ?? ""
        var status: [DiagnosticArrayMessage.Status] = [headingStatus(hardware: hardware, final: final)]
        if let c = calibration { status.append(Self.calibrationStatus(c, hardware: hardware)) }
        if let i = interference { status.append(Self.interferenceStatus(i, hardware: hardware)) }
        if !others.isEmpty { status.append(magnetometersStatus(hardware: hardware)) }
        if gnssSeen { status.append(gnssStatus(hardware: hardware)) }
        if heading != nil { status.append(streamStatus(hardware: hardware)) }
        let stamp = heading?.header.stamp ?? RosTime(seconds: 0)
        gnssAidedSinceReport = 0
        disagreeingSinceReport = 0
        headingsSinceReport = 0
        firstStampSinceReport = nil
        (gapsSinceReport, backwardsSinceReport, resetsSinceReport, largestGapSinceReport) = (0, 0, 0, 0)
        return DiagnosticArrayMessage(header: RosHeader(stamp: stamp, frameId: ""), status: status)
    }

    func headingStatus(hardware: String, final: Bool = false) -> DiagnosticArrayMessage.Status {
        let name = "gyrocompass: heading"
        guard let h = heading else {
            return .init(level: .error, name: name, message: "no heading yet", hardwareId: hardware, values: [])
        }
        let flags = h.fusionFlags
        let accuracy = h.headingAccuracy
        var level = DiagnosticArrayMessage.Level.ok
        var message = "tracking"
        if flags.contains(.initialising) {
            (level, message) = (.warn, "initialising")
        } else if !accuracy.isFinite || accuracy > errorAccuracyDegrees {
            // The bound alone does not say why; the flags do, and what to do about it.
            let why =
                flags.contains(.magnetometerUncalibrated)
                ? "the magnetometer is not calibrated yet, so the compass can be off by any angle; turn the "
                    + "device through a figure eight"
                : flags.contains(.gyroOnly) || flags.contains(.magnetometerRejected)
                    ? "the magnetic field is disturbed and the gyro has held the heading too long"
                    : "the filter has not settled"
            (level, message) = (.error, "heading not usable: \(why) (95 % bound \(Self.text(accuracy, 1)) deg)")
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

    /// The heading stream: OK while headings come without gaps; WARN for a period with a gap longer
    /// than `gapSeconds`, a stamp that went back (the clock jumped: the filter then starts a new
    /// timeline, counting the samples it skips) or a filter reset (its state became non-finite).
    static let streamName = "gyrocompass: heading stream"
    func streamStatus(hardware: String) -> DiagnosticArrayMessage.Status {
        var problems: [String] = []
        if backwardsSinceReport > 0 { problems.append("the clock went back \(backwardsSinceReport) time(s)") }
        if gapsSinceReport > 0 {
            problems.append(
                "\(gapsSinceReport) gap(s) over \(format(gapSeconds, 1)) s, up to \(format(largestGapSinceReport, 2)) s"
            )
        }
        if resetsSinceReport > 0 { problems.append("the filter restarted \(resetsSinceReport) time(s)") }
        let span = (lastStamp ?? 0) - (firstStampSinceReport ?? lastStamp ?? 0)
        let rate = headingsSinceReport > 1 && span > 0 ? Double(headingsSinceReport - 1) / span : Double.nan
        return .init(
            level: problems.isEmpty ? .ok : .warn, name: Self.streamName,
            message: problems.isEmpty ? "steady" : problems.joined(separator: "; "), hardwareId: hardware,
            values: [
                ("headings per second (by stamp)", Self.text(rate, 1)),
                ("largest gap in the period (s)", format(largestGapSinceReport, 3)),
                ("largest gap in the run (s)", format(largestGap, 3)),
                ("gaps", "\(gapsSinceReport)"), ("clock jumps back", "\(backwardsSinceReport)"),
                ("filter restarts", "\(resetsSinceReport)"),
            ])
    }

    /// Several magnetometers: which ones steer the heading. OK while every one does; WARN while one is
    /// left out (its own gate rejects it, or the others outvote it), naming it.
    func magnetometersStatus(hardware: String) -> DiagnosticArrayMessage.Status {
        let primaryOut = interference?.disturbed ?? false
        let names = ([PipelineTopics.primaryMagnetometerName] + others.keys.sorted())
        let out = names.filter { $0 == PipelineTopics.primaryMagnetometerName ? primaryOut : others[$0]!.disturbed }
        let inUse = names.filter { !out.contains($0) }
        let message =
            out.isEmpty
            ? "all in use"
            : "in use: \(inUse.isEmpty ? "none" : inUse.joined(separator: ", ")); left out "
                + "(disturbed or outvoted): \(out.joined(separator: ", "))"
        var values: [(key: String, value: String)] = [("in use", inUse.joined(separator: ", "))]
        for name in names {
            let status = name == PipelineTopics.primaryMagnetometerName ? interference : others[name]
            guard let status else { continue }
            values.append(("\(name): readings left out (%)", format(status.flaggedPercent, 1)))
        }
        return .init(
            level: out.isEmpty ? .ok : .warn, name: "gyrocompass: magnetometers", message: message,
            hardwareId: hardware, values: values)
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
        return .init(
            level: i.disturbed ? .warn : .ok, name: "gyrocompass: magnetic interference",
            message: i.disturbed ? "disturbed: heading held on the gyro" : "clear", hardwareId: hardware,
            values: [
                ("disturbed now", i.disturbed ? "yes" : "no"), ("readings flagged (%)", format(i.flaggedPercent, 1)),
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
    /// before any heading. The heading counters are not reset: silence is the view's own business, and
    /// so is the stream, whose headings a publisher's min_change_deg thins out.
    public var worst: DiagnosticArrayMessage.Status? {
        guard health.heading != nil else { return nil }
        var copy = health
        let statuses = copy.report(final: true).status.filter { $0.name != HealthDiagnostics.streamName }
        return statuses.reduce(nil as DiagnosticArrayMessage.Status?) { best, s in
            best.map { s.level > $0.level ? s : $0 } ?? s
        }
    }
}
