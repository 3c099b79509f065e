import Foundation
import WireFormat
import MessageBus

/// Counts messages on a topic and, when their header stamps are wall-clock times (the simulator's
/// `stamp: wall`), the latency from the source to here. Reports count, rate, p50/p99/max latency.
final class MeasureSink: StageLogic, SinkLogic, InPlaceTransform, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// Topic to count.
        var topic = PipelineTopics.heading
        /// Seconds left out of the latency statistics at the start (connection warm-up).
        var skipSeconds = 1.0
        /// Also write the summary as one JSON line to this file ("" = no file).
        var reportPath = ""

        static let table = SettingTable<Settings>([
            .string(
                "topic", \.topic, namesTopic: true,
                "topic to count; with wall-clock stamps, latency = arrival - header stamp"),
            .number(
                "skip_s", \.skipSeconds, unit: "s", range: SettingSpec.secondsRange,
                "leave the first seconds (connection warm-up) out of the latency statistics"
            ).formerly("skip_seconds"),
            .string(
                "report_path", \.reportPath, writesFile: true, "also write the summary as one JSON line to this file"),
        ])
    }

    static let type = StageType(
        name: "measure", role: .sink, summary: "message count, rate and latency of one topic (benchmarks)",
        settings: Settings.table
    ) { settings, _ in MeasureSink(settings) }

    let settings: Settings
    var count = 0
    var first: Double?, last = 0.0
    var latencies: [Double] = []

    init(_ settings: Settings) { self.settings = settings }

    func consume(_ frame: consuming WireFrame) throws {
        guard frame.topic == settings.topic else { return }
        measure(CDRHeaderStamp.read(frame.payload))
    }

    /// Reads every frame in place (only the header stamp of its topic).
    var inputHandling: InputHandling { .inPlace(.ownFramesOnly) }
    func inPlaceSample(_ frame: WireFrame.View) -> InPlaceSample? { .unchanged }
    func apply(_ sample: InPlaceSample, to frame: WireFrame.View, extra: inout [WireFrame]) {
        guard frame.topic == settings.topic else { return }
        measure(CDRHeaderStamp.read(UnsafeRawBufferPointer(frame.payload)))
    }

    func measure(_ stamp: RosTime?) {
        let now = Clocks.monotonicSeconds()
        if first == nil { first = now }
        last = now
        count += 1
        guard let stamp else { return }
        let wall = Clocks.wallNow()
        let latency = (Double(wall.sec) - Double(stamp.sec)) + (Double(wall.nanosec) - Double(stamp.nanosec)) * 1e-9
        // Only meaningful for wall-clock stamps, and after the warm-up.
        if abs(latency) < 10 && now - first! >= settings.skipSeconds { latencies.append(latency) }
    }

    func close() throws {
        let seconds = (first.map { last - $0 }) ?? 0
        var text = "measured \(count) \(settings.topic) messages"
        var json = "{\"messages\":\(count),\"seconds\":\(seconds)"
        if seconds > 0 { text += " in \(format(seconds, 3)) s (\(format(Double(count) / seconds, 0))/s)" }
        if !latencies.isEmpty {
            let sorted = latencies.sorted()
            func pct(_ q: Double) -> Double { sorted[min(sorted.count - 1, Int(q * Double(sorted.count - 1)))] * 1e6 }
            text +=
                "; latency after the first \(format(settings.skipSeconds, 0)) s: p50 \(format(pct(0.5), 0)) us, "
                + "p99 \(format(pct(0.99), 0)) us, max \(format(sorted.last! * 1e6, 0)) us"
            json +=
                ",\"p50_us\":\(pct(0.5)),\"p99_us\":\(pct(0.99)),\"max_us\":\(sorted.last! * 1e6),"
                + "\"latency_samples\":\(sorted.count)"
        }
        notes.append(text)
        if !settings.reportPath.isEmpty {
            let file = try BufferedFileWriter(path: settings.reportPath)
            try file.write(json + "}\n")
            try file.close()
        }
        return
    }
}
