import Foundation
import CompassCore
import WireFormat
import MessageBus

/// A summary a person can read at the end of a run: duration, final and mean heading with their
/// accuracy, the share of headings per flag and the calibrations accepted. `replay` adds it when no
/// output is asked for; its lines are the stage's notes. Given the simulator's truth/orientation too
/// (an input that publishes it), it scores the headings against it: RMSE while uncalibrated, after,
/// and how often the bound held.
final class SummarySink: StageLogic, SinkLogic, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// The heading topic to summarise.
        var topic = PipelineTopics.heading

        static let table = SettingTable<Settings>([
            .string("topic", \.topic, namesTopic: true, "gyrocompass_msgs/Heading topic to summarise")
        ])
    }

    static let type = StageType(
        name: "summary", role: .sink, summary: "a readable end-of-run summary of the headings (replay without outputs)",
        settings: Settings.table
    ) { settings, _ in SummarySink(settings) }

    let settings: Settings
    var count = 0, valid = 0
    var first: Double?, last: Double?
    var final: HeadingMessage?
    var sinSum = 0.0, cosSum = 0.0, accuracySum = 0.0, accuracyCount = 0
    var flagCounts: [String: Int] = [:]
    var calibrationsAccepted = 0
    var acceptedFits = AcceptedFits()
    /// Truth headings and headings waiting for their pair, by stamp (the two arrive on different inputs).
    var truthByStamp: [RosTime: Double] = [:]
    var headingsByStamp: [RosTime: (heading: Double, accuracy: Double, uncalibrated: Bool)] = [:]
    /// Against the truth: squared errors and counts while uncalibrated and after, and bounds that held.
    var scored = TruthScore()

    struct TruthScore {
        var uncalibratedSquares = 0.0, uncalibrated = 0, calibratedSquares = 0.0, calibrated = 0, covered = 0
        var firstCalibrated: Double?
        var total: Int { uncalibrated + calibrated }
    }

    init(_ settings: Settings) { self.settings = settings }

    var inputHandling: InputHandling { .decoded }

    func consume(_ frame: consuming WireFrame) throws {
        if frame.topic == PipelineTopics.truth {
            let m = try decoded(frame, as: ImuMessage.self)
            guard let truth = m.orientation.headingDegrees else { return }
            if let h = headingsByStamp.removeValue(forKey: m.header.stamp) {
                score(h, truth: truth, at: m.header.stamp.seconds)
            } else {
                truthByStamp[m.header.stamp] = truth
                prune(before: m.header.stamp.seconds)
            }
            return
        }
        if frame.topic == PipelineTopics.calibrationStatus {
            let c = try decoded(frame, as: CalibrationStatusMessage.self)
            if acceptedFits.isNewFit(c) { calibrationsAccepted += 1 }
            return
        }
        guard frame.topic == settings.topic else { return }
        let h = try decoded(frame, as: HeadingMessage.self)
        let t = h.header.stamp.seconds
        if first == nil { first = t }
        last = t
        count += 1
        for name in HeadingMessage.flagNames(h.flags) { flagCounts[name, default: 0] += 1 }
        guard h.magneticHeading.isFinite else { return }
        let pair = (
            h.magneticHeading, h.headingAccuracy,
            HeadingMessage.flagNames(h.flags).contains { $0 == "magnetometer_uncalibrated" || $0 == "initialising" }
        )
        if let truth = truthByStamp.removeValue(forKey: h.header.stamp) {
            score(pair, truth: truth, at: t)
        } else if !truthByStamp.isEmpty || scored.total > 0 {
            headingsByStamp[h.header.stamp] = pair
            prune(before: t)
        }
        valid += 1
        final = h
        sinSum += sin(h.magneticHeading * radiansPerDegree)
        cosSum += cos(h.magneticHeading * radiansPerDegree)
        if h.headingAccuracy.isFinite {
            accuracySum += h.headingAccuracy
            accuracyCount += 1
        }
    }

    func score(_ h: (heading: Double, accuracy: Double, uncalibrated: Bool), truth: Double, at t: Double) {
        let e = abs(signedDegrees(h.heading - truth))
        if h.uncalibrated {
            scored.uncalibratedSquares += e * e
            scored.uncalibrated += 1
        } else {
            if scored.firstCalibrated == nil { scored.firstCalibrated = t }
            scored.calibratedSquares += e * e
            scored.calibrated += 1
        }
        if !(e > h.accuracy) { scored.covered += 1 }  // a bound that is not finite covers everything
    }

    /// Drops unpaired entries more than 10 s older than `t` (a topic the other input never sends).
    func prune(before t: Double) {
        guard truthByStamp.count + headingsByStamp.count > 4096 else { return }
        truthByStamp = truthByStamp.filter { $0.key.seconds >= t - 10 }
        headingsByStamp = headingsByStamp.filter { $0.key.seconds >= t - 10 }
    }

    func close() throws {
        guard count > 0, let first, let last else {
            notes.append("no headings on \(settings.topic)")
            return
        }
        notes.append("duration \(format(last - first, 1)) s, \(count) headings (\(valid) with a value)")
        if let h = final {
            let accuracy = h.headingAccuracy.isFinite ? " +-\(format(h.headingAccuracy, 1))" : ""
            let name = CardinalDirection.name(forHeadingDegrees: h.magneticHeading) ?? "-"
            notes.append("final heading \(format(h.magneticHeading, 1)) deg (\(name))\(accuracy), magnetic")
        }
        if valid > 0 {
            let mean = normalizedDegrees(atan2(sinSum, cosSum) * degreesPerRadian)
            let accuracy =
                accuracyCount > 0 ? ", mean 95 % accuracy +-\(format(accuracySum / Double(accuracyCount), 1)) deg" : ""
            notes.append("mean heading \(format(mean, 1)) deg\(accuracy)")
        }
        let shares = flagCounts.sorted { $0.value > $1.value }.map {
            "\($0.key) \(format(100 * Double($0.value) / Double(count), 1)) %"
        }
        notes.append("share of headings per flag: " + (shares.isEmpty ? "none set" : shares.joined(separator: ", ")))
        notes.append("calibrations accepted: \(calibrationsAccepted)")
        if scored.total > 0 {
            func rmse(_ squares: Double, _ n: Int) -> String { format((squares / Double(max(n, 1))).squareRoot(), 2) }
            var parts: [String] = []
            if scored.uncalibrated > 0 {
                parts.append("\(rmse(scored.uncalibratedSquares, scored.uncalibrated)) while uncalibrated")
            }
            if scored.calibrated > 0, let from = scored.firstCalibrated {
                let rms = rmse(scored.calibratedSquares, scored.calibrated)
                parts.append("\(rms) calibrated (from \(format(from - first, 1)) s)")
            }
            let all = rmse(scored.uncalibratedSquares + scored.calibratedSquares, scored.total)
            notes.append(
                "heading error against the simulator's truth: RMSE \(all) deg over \(scored.total) headings ("
                    + parts.joined(separator: ", ") + "); the 95 % bound held for "
                    + "\(format(100 * Double(scored.covered) / Double(scored.total), 1)) %")
        }
        return
    }
}
