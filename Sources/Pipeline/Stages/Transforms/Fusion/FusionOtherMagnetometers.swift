import Foundation
import CompassCore
import WireFormat
import MessageBus

/// Magnetometers besides the primary (imu/mag/NAME): registered with the filter, their calibrations,
/// their verdicts published on interference/status/NAME, votes logged.
extension FusionStage {
    /// The filter as one that fuses several magnetometers; nil when it fuses one (the complementary
    /// filter).
    var multiMagnetometerFilter: (any MultiMagnetometerFilter)? { filter as? any MultiMagnetometerFilter }

    /// Changes the filter as one that fuses several magnetometers; nil (nothing done) when it fuses one
    /// or the smoother runs. A change through the capability copies the filter once: an extra
    /// magnetometer's reading costs that, the primary's path none of it.
    func changeMultiMagnetometerFilter<T>(_ body: (inout any MultiMagnetometerFilter) -> T) -> T? {
        guard var multi = multiMagnetometerFilter else { return nil }
        let result = body(&multi)
        filter = multi
        return result
    }

    /// The filter's index for magnetometer `name`, registering it on its first reading; nil when the
    /// filter (the complementary filter, the smoother) fuses one magnetometer only.
    func otherIndex(_ name: String) -> Int? {
        if let o = others[name] { return o.index }
        let index = changeMultiMagnetometerFilter { $0.addMagnetometer(named: name, primaryName: Self.primaryName) }
        others[name] = OtherMagnetometerState(
            index: index, tally: InterferenceTally(statusSeconds: settings.statusSeconds))
        otherNames.append(name)
        return index
    }

    func fuseOther(_ name: String, _ sample: MagnetometerSample) {
        guard let index = otherIndex(name) else {
            others[name]!.passedOver += 1
            return
        }
        _ = changeMultiMagnetometerFilter { $0.add(sample, toMagnetometer: index) }
    }

    /// A calibration of magnetometer `name` (calibration/status/NAME): as `noteCalibration` for the primary.
    func noteCalibration(_ c: CalibrationStatusMessage, of name: String) {
        guard let index = otherIndex(name) else { return }
        let previous = others[name]!.calibration
        others[name]!.calibration = c
        let calibrated = CalibrationShift.applied(c)
        let strength = c.fieldStrength.isFinite ? c.fieldStrength : nil
        guard let p = previous else {
            let notice = MagnetometerCalibrationNotice(
                calibrated: calibrated, fieldStrengthMicrotesla: strength, headingShiftRadians: 0)
            _ = changeMultiMagnetometerFilter { $0.noteCalibration(notice, magnetometer: index) }
            return
        }
        guard
            let shift = CalibrationShift.radians(
                from: p, to: c, dipDegrees: gate.referenceDipDegrees ?? TypicalEarthField.dipDegrees)
        else {
            return
        }
        let notice = MagnetometerCalibrationNotice(
            calibrated: calibrated, fieldStrengthMicrotesla: strength, headingShiftRadians: shift)
        _ = changeMultiMagnetometerFilter { $0.noteCalibration(notice, magnetometer: index) }
    }

    /// The primary magnetometer's name in the health of several (imu/mag).
    static let primaryName = PipelineTopics.primaryMagnetometerName

    /// After a filter update: each other magnetometer's new verdicts counted, and its
    /// interference/status/NAME when due.
    func tellOthers(_ header: RosHeader, into output: inout [WireFrame]) {
        guard let multi = multiMagnetometerFilter else { return }
        let health = multi.magnetometerHealth
        guard health.count > 1 else { return }
        for (i, h) in health.enumerated().dropFirst() {
            let name = h.name
            guard var o = others[name], h.readings > o.seen.readings else { continue }
            let used = h.used > o.seen.used
            let flags: FusionFlags =
                used
                ? []
                : h.outvoted > o.seen.outvoted
                    ? [.magnetometerRejected, .magneticGyroInconsistent]
                    : [.magnetometerRejected]
            if h.isOutvoted != o.seen.isOutvoted { logVote(h, at: header.stamp.seconds) }
            o.seen = h
            o.tally.count(flags, at: header.stamp.seconds)
            var h2 = header
            h2.frameId = name
            if let gate = multi.magnetometerGate(i), let status = o.tally.status(h2, gate: gate) {
                output.append(cdrFrame(status, topic: PipelineTopics.interferenceStatus(named: name)))
            }
            others[name] = o
        }
        if let primary = health.first, primary.isOutvoted != primaryOutvoted {
            primaryOutvoted = primary.isOutvoted
            logVote(primary, at: header.stamp.seconds)
        }
    }

    /// The log line of a magnetometer outvoted or taken back.
    func logVote(_ h: MagnetometerHealth, at seconds: Double) {
        let why: String
        switch (h.isOutvoted, h.disagreement) {
        case (false, _): why = "agrees with the others again"
        case (true, .dip?):
            why = "outvoted: its field dips \(format(h.averagedDipDegrees, 1)) deg, unlike the others'"
        case (true, .strength?):
            why =
                "outvoted: its field is \(format(100 * h.averagedStrengthShare, 0)) % of its calibrated strength, "
                + "unlike the others'"
        case (true, _):
            why =
                "outvoted: its heading is \(format(h.averagedInnovationDegrees, 1)) deg from the filter's, the "
                + "others agree"
        }
        log("fusion: at \(format(seconds, 2)) s magnetometer \(h.name) \(why)")
    }

    /// One line per magnetometer for the summary: "mast: 11890 readings, used 99.1 %, 0.9 % rejected by
    /// its gate, 0.0 % outvoted, 0 uncalibrated".
    static func describe(_ h: MagnetometerHealth) -> String {
        func share(_ n: Int) -> String { format(100 * Double(n) / Double(max(h.readings, 1)), 1) + " %" }
        return "\(h.name): \(h.readings) reading(s), used \(share(h.used)), rejected by its gate "
            + "\(share(h.rejectedByGate)), outvoted \(share(h.outvoted)) (\(h.changes) change(s)), "
            + "\(h.uncalibrated) while uncalibrated"
    }
}

/// A magnetometer besides the primary, as the fusion stage follows it.
struct OtherMagnetometerState {
    /// The filter's index; nil when the filter fuses one magnetometer only.
    var index: Int?
    var tally: InterferenceTally
    /// Its health at the previous update, to tell what changed.
    var seen = MagnetometerHealth(name: "")
    /// Its latest calibration status.
    var calibration: CalibrationStatusMessage?
    /// Readings the filter could not take.
    var passedOver = 0
}
