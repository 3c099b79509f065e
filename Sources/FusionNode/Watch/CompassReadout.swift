#if canImport(Glibc)
    import Glibc
#endif
import CompassCore
import Pipeline
import MessageBus
import WireFormat

/// What the operator's view shows, worked out from the messages a pipeline publishes (heading,
/// calibration/status, interference/status): independent of the terminal, so the plain output and
/// the full-screen dial read the same numbers.
struct CompassReadout {
    var heading: HeadingMessage?
    var calibration: CalibrationStatusMessage?
    var interference: InterferenceStatusMessage?
    /// Magnetometers besides the primary, by name: their latest interference/status/NAME.
    var otherMagnetometers: [String: InterferenceStatusMessage] = [:]
    /// Monotonic arrival time of the newest message, and the message times of the last second.
    var lastArrival: Double?
    var arrivals: [Double] = []
    /// Rate of turn, degrees per second (positive clockwise, as the heading counts): the filter's own
    /// bias-corrected rate from imu/data, turned into the earth frame. Not from differences of headings,
    /// which a publisher with min_change_deg sends only after a change (a still device would keep the
    /// last turn's rate).
    var turnRateDegreesPerSecond: Double?
    /// Monotonic arrival time of the newest imu/data (the rate is shown only while they keep coming).
    var lastRateArrival: Double?
    /// Where the view subscribes, named while it waits.
    var endpoint = ""
    /// The publisher sent its end of stream for the heading topic.
    var ended = false
    /// An encoding the view cannot read (the publisher's `encoding: json`), named instead of ignored.
    var unreadableEncoding: String?
    /// The health `/diagnostics` would report from the same messages.
    var health = HealthSummary()
    /// Show true north (when the declination is known) instead of magnetic.
    var showTrue = false
    /// "This direction is zero": subtracted from the shown heading.
    var zeroOffsetDegrees: Double?

    static let staleSeconds = 1.0

    mutating func receive(_ frame: WireFrame, at now: Double) {
        lastArrival = now
        arrivals.append(now)
        arrivals.removeAll { now - $0 > 1 }
        guard frame.encoding == "cdr" else {
            unreadableEncoding = frame.encoding
            return
        }
        ended = false
        if let name = PipelineTopics.otherInterferenceName(frame.topic) {
            if let status = try? InterferenceStatusMessage(cdrBytes: frame.payload) {
                otherMagnetometers[name] = status
            }
            return
        }
        switch frame.type {
        case HeadingMessage.typeName:
            guard let h = try? HeadingMessage(cdrBytes: frame.payload) else { return }
            heading = h
            health.observe(h)
        case ImuMessage.typeName:
            guard let imu = try? ImuMessage(cdrBytes: frame.payload) else { return }
            // Up is z in ENU; a counter-clockwise turn about it is positive, the heading turns the other way.
            let rate = -imu.orientation.rotate(imu.angularVelocity).z / radiansPerDegree
            guard rate.isFinite else { return }
            // About 50 ms of smoothing at 100 Hz: steady digits without lagging a turn.
            turnRateDegreesPerSecond = turnRateDegreesPerSecond.map { $0 + (rate - $0) * 0.2 } ?? rate
            lastRateArrival = now
        case CalibrationStatusMessage.typeName:
            calibration = try? CalibrationStatusMessage(cdrBytes: frame.payload)
            if let c = calibration { health.observe(c) }
        case InterferenceStatusMessage.typeName:
            interference = try? InterferenceStatusMessage(cdrBytes: frame.payload)
            if let i = interference { health.observe(i) }
        default: break
        }
    }

    func isStale(at now: Double) -> Bool { lastArrival.map { now - $0 > Self.staleSeconds } ?? true }

    /// The rate of turn while imu/data keeps arriving, else nil.
    func turnRate(at now: Double) -> Double? {
        guard let t = lastRateArrival, now - t <= Self.staleSeconds else { return nil }
        return turnRateDegreesPerSecond
    }
    func messageRate(at now: Double) -> Int { arrivals.filter { now - $0 <= 1 }.count }

    /// The heading shown (after the zero offset) and what it is: nil while there is none.
    var shown: (degrees: Double, kind: String)? {
        guard let h = heading else { return nil }
        let trueKnown = h.trueHeading.isFinite
        let base = showTrue && trueKnown ? h.trueHeading : h.magneticHeading
        guard base.isFinite else { return nil }
        let kind = showTrue ? (trueKnown ? "true" : "magnetic") : "magnetic"
        guard let zero = zeroOffsetDegrees else { return (normalizedDegrees(base), kind) }
        return (normalizedDegrees(base - zero), "relative to the zero set with z (\(kind))")
    }

    /// Why true north is not shown, when it is asked for but unknown.
    var trueNorthProblem: String? {
        guard showTrue, let h = heading, !h.trueHeading.isFinite else { return nil }
        if h.flags & HeadingMessage.flagNoPosition != 0 {
            return "true north unknown: no position (set latitude/longitude)"
        }
        if h.flags & HeadingMessage.flagModelOutOfRange != 0 { return "true north unknown: outside the magnetic model" }
        return "true north unknown"
    }

    var flags: FusionFlags { heading?.fusionFlags ?? [] }

    /// The state in words, most important first.
    func stateLines(at now: Double) -> [String] {
        var lines: [String] = []
        if let encoding = unreadableEncoding, heading == nil {
            lines.append("the publisher sends \(encoding); watch reads cdr (set encoding: cdr on its publish stage)")
        }
        if ended {
            lines.append(
                "ENDED: the publisher closed the stream" + (heading == nil ? "" : "; the last heading is shown"))
        } else if isStale(at: now) {
            lines.append(
                lastArrival.map { "STALE: nothing received for \(format(now - $0, 1)) s" }
                    ?? "waiting for \(endpoint.isEmpty ? "the first message" : endpoint)")
        }
        let f = flags
        if f.contains(.initialising) { lines.append("initialising") }
        if f.contains(.compassDisagreesWithGnss) { lines.append("compass disagrees with GNSS: not used") }
        // With several magnetometers, which ones steer and which are left out (disturbed or outvoted).
        let othersInUse = otherMagnetometers.filter { !$0.value.disturbed }.keys.sorted()
        if !otherMagnetometers.isEmpty {
            let primaryOut = interference?.disturbed ?? f.contains(.magnetometerRejected)
            let inUse = (primaryOut ? [] : [PipelineTopics.primaryMagnetometerName]) + othersInUse
            let out =
                (primaryOut ? [PipelineTopics.primaryMagnetometerName] : [])
                + otherMagnetometers.filter(\.value.disturbed).keys.sorted()
            lines.append(
                "magnetometers in use: \(inUse.isEmpty ? "none" : inUse.joined(separator: ", "))"
                    + (out.isEmpty ? "" : "; left out (disturbed or outvoted): \(out.joined(separator: ", "))"))
        }
        if f.contains(.gnssAided) {
            lines.append("GNSS holds the heading")
        } else if !othersInUse.isEmpty {
            // Another magnetometer steers: the primary's verdict is not the heading's.
        } else if let i = interference, i.disturbed {
            lines.append(
                "magnetic disturbance: holding the heading on the gyro (\(format(i.disturbedSeconds, 1)) s in all)")
        } else if f.contains(.magnetometerRejected) || f.contains(.gyroOnly) {
            lines.append("magnetic disturbance: holding the heading on the gyro")
        }
        if f.contains(.accelerationRejected) { lines.append("acceleration rejected: tilt held on the gyro") }
        if let c = calibration {
            switch OnlineCalibrator.State(rawValue: c.state) {
            case .collecting?: lines.append("calibrating: \(format(c.progress, 0)) %")
            case .degraded?: lines.append("calibration degraded: recalibrating, \(format(c.progress, 0)) %")
            default: break
            }
            if c.prompt { lines.append("move the device in a figure eight") }
        }
        if f.contains(.atRest) { lines.append("at rest") }
        if lines.isEmpty { lines.append("tracking") }
        // The worst of what /diagnostics reports, when it is not OK (OK says nothing new).
        if let worst = health.worst, worst.level != .ok {
            let level = worst.level == .error ? "ERROR" : "WARN"
            lines.append(
                "health \(level): \(worst.name.replacingOccurrences(of: "gyrocompass: ", with: "")): \(worst.message)")
        }
        return lines
    }

    /// Field strength and dip measured (earth frame from the reported orientation) and expected.
    var fieldLine: String? {
        guard let h = heading, h.magneticField.isFinite else { return nil }
        let field = h.fieldStrengthAndDip
        var text = "field \(format(field.strengthMicrotesla, 1)) uT, dip \(format(field.dipDegrees, 1)) deg"
        if let i = interference, i.expectedStrength.isFinite {
            text += "  (expected \(format(i.expectedStrength, 1)) uT, \(format(i.expectedDip, 1)) deg)"
        }
        return text
    }

    /// One line for the plain output.
    func plainLine(at now: Double) -> String {
        guard let s = shown, let h = heading else { return stateLines(at: now).joined(separator: "; ") }
        let name = CardinalDirection.name(forHeadingDegrees: s.degrees) ?? "-"
        let accuracy = h.headingAccuracy.isFinite ? " +-\(format(h.headingAccuracy, 1))" : " +-?"
        // Whole degrees per second: a line per change, not one per sample of gyro noise.
        let turning = turnRate(at: now).map { "; turning \(format($0.rounded() == 0 ? 0 : $0, 0)) deg/s" } ?? ""
        return "heading \(format(s.degrees, 1)) (\(name)) \(s.kind)\(accuracy)\(turning); "
            + stateLines(at: now).joined(separator: "; ")
    }
}
