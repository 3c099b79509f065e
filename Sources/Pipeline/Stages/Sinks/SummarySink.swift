import Foundation
import CompassCore
import WireFormat
import MessageBus

/// A summary a person can read at the end of a run: duration, final and mean heading with their
/// accuracy, the share of headings per flag and the calibrations accepted. `replay` adds it when no
/// output is asked for; its lines are the stage's notes.
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

    init(_ settings: Settings) { self.settings = settings }

    var inputHandling: InputHandling { .decoded }

    func consume(_ frame: consuming WireFrame) throws {
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
        valid += 1
        final = h
        sinSum += sin(h.magneticHeading * radiansPerDegree)
        cosSum += cos(h.magneticHeading * radiansPerDegree)
        if h.headingAccuracy.isFinite {
            accuracySum += h.headingAccuracy
            accuracyCount += 1
        }
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
        return
    }
}
