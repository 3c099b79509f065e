import Foundation
import CompassCore
import WireFormat
import MessageBus

/// Prints headings as text lines, or messages as JSON lines, on stdout.
final class StdoutSink: StageLogic, SinkLogic, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// Heading lines, or JSON lines of any topic.
        var format = Format.text
        /// Topics to print.
        var topics = [PipelineTopics.heading]
        /// Print a heading only after it changed this much, degrees (0 = every update).
        var minimumChangeDegrees = 1.0

        enum Format: String, CaseIterable {
            case text, json
        }

        static let table = SettingTable<Settings>([
            .choice("format", \.format, "heading lines, or JSON lines of any topic"),
            .strings("topics", \.topics, namesTopics: true, "topics to print"),
            .number(
                "min_change_deg", \.minimumChangeDegrees, unit: "deg", range: SettingSpec.degreesRange,
                "print a heading only after it changed this much (0 = every update)"),
        ])
    }

    static let type = StageType(
        name: "stdout", role: .sink, summary: "heading lines (or JSON lines of any topic) on stdout",
        settings: Settings.table, restart: .joinsLive
    ) { settings, context in StdoutSink(settings, stop: context.stop) }

    let settings: Settings
    var changeFilter: HeadingChangeFilter
    var buffer = ""
    var outputClosed = false

    /// The run's stop request, polled between reads.
    let stop: StopToken

    init(_ settings: Settings, stop: StopToken = StopToken()) {
        self.stop = stop
        self.settings = settings
        changeFilter = HeadingChangeFilter(minimumChangeDegrees: settings.minimumChangeDegrees)
    }

    var inputHandling: InputHandling { .decoded }

    func consume(_ frame: consuming WireFrame) throws {
        guard settings.topics.contains(frame.topic) else { return }
        if settings.format == .json {
            if frame.type == HeadingMessage.typeName, settings.minimumChangeDegrees > 0 {
                // Display sinks deliver a heading only once it changed enough, in JSON as in text.
                let h = try decoded(frame, as: HeadingMessage.self)
                guard h.magneticHeading.isFinite, changeFilter.offer(h.magneticHeading) != nil else { return }
            }
            let body: String
            do { body = try jsonFromCDR(type: frame.type, frame.payload) ?? "null" } catch {
                throw UnexpectedFrame(reason: "undecodable \(frame.type): \(error)")
            }
            buffer +=
                "{\"topic\":\(JSONText.string(frame.topic)),\"type\":\(JSONText.string(frame.type)),"
                + "\"message\":\(body)}\n"
        } else if frame.type == HeadingMessage.typeName {
            let h = try decoded(frame, as: HeadingMessage.self)
            guard h.magneticHeading.isFinite, let delivered = changeFilter.offer(h.magneticHeading) else { return }
            let name = CardinalDirection.name(forHeadingDegrees: delivered) ?? "-"
            let accuracy = h.headingAccuracy.isFinite ? "+-\(format(h.headingAccuracy, 1))" : "+-?"
            let flags = h.fusionFlags.description
            buffer +=
                "t=\(format(h.header.stamp.seconds, 3)) heading=\(format(delivered, 1)) (\(name)) \(accuracy)"
                + "\(flags.isEmpty ? "" : " [\(flags)]")\n"
        } else {
            buffer += "\(frame.topic) \(frame.type) \(frame.payload.count) bytes\n"
        }
        if buffer.utf8.count > 8192 { flush() }
    }

    /// A read burst is over: what it printed goes out now (live output streams line by line).
    func inputDrained() { flush() }

    /// Writes what is buffered. If stdout has gone away (`| head`), the pipeline stops cleanly.
    func flush() {
        guard !buffer.isEmpty, !outputClosed else {
            buffer = ""
            return
        }
        do { try FileHandle.standardOutput.write(contentsOf: Data(buffer.utf8)) } catch {
            outputClosed = true
            notes.append("stdout closed; stopping the pipeline")
            stop.request(.stage)
        }
        buffer = ""
    }

    func close() throws {
        flush()
        return
    }
}
