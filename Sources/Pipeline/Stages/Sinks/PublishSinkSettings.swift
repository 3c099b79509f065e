import CompassCore
import WireFormat
import MessageBus

extension PublishSink {
    struct Settings: DeclaredSettings {
        /// Address subscribers connect to.
        var bind = "tcp://127.0.0.1:5600"
        /// Topics to publish.
        var topics = [PipelineTopics.heading, PipelineTopics.imuFused]
        /// Payload encoding.
        var encoding = Encoding.cdr
        /// Live use: never queue; a slow subscriber sees the newest message (drops counted).
        var latestOnly = false
        /// What a subscriber whose queue is full costs.
        var onSlow = SlowSubscriber.drop
        /// Messages queued per subscriber before `onSlow` applies (latest_only: 1).
        var highWaterMark = 10_000
        /// Hold the stream until this many subscribers are connected.
        var waitForSubscribers = 0
        /// Publish a heading (or direction) only after it changed this much, degrees (0 = every update).
        var minimumChangeDegrees = 1.0
        /// Topic of the health as diagnostic_msgs/msg/DiagnosticArray, made by this sink ("" = none).
        var diagnosticsTopic = ""
        var diagnosticsPeriodSeconds = 1.0

        enum Encoding: String, CaseIterable {
            case cdr, json
        }

        enum SlowSubscriber: String, CaseIterable {
            /// It misses messages until it catches up (counted); the pipeline never waits.
            case drop
            /// Lossless: the pipeline waits for it.
            case block
        }

        static let table = SettingTable<Settings>([
            .string("bind", \.bind, "address subscribers connect to (loopback unless given otherwise)"),
            .strings("topics", \.topics, namesTopics: true, "topics to publish"),
            .choice("encoding", \.encoding, "payload encoding: ROS 2 CDR, or a JSON object"),
            .bool(
                "latest_only", \.latestOnly,
                "live use: never queue; a slow subscriber sees the newest message of each topic (drops counted)"),
            .choice(
                "on_slow", \.onSlow,
                "a subscriber whose queue is full: drop (it misses messages until it catches up; how often is "
                    + "counted; the pipeline never waits) | block (lossless: the pipeline waits for it)"),
            .integer(
                "high_water_mark", \.highWaterMark, unit: "messages", range: 1...10_000_000,
                "queued per subscriber before on_slow applies (latest_only: 1)"),
            .integer(
                "wait_for_subscribers", \.waitForSubscribers, range: 0...10_000,
                "hold the stream until this many subscribers are connected"),
            .number(
                "min_change_deg", \.minimumChangeDegrees, unit: "deg", range: SettingSpec.degreesRange,
                "publish a heading (or direction) only after it changed this much (0 = every update)"),
            .string(
                "diagnostics_topic", \.diagnosticsTopic,
                "topic this sink makes for the health as diagnostic_msgs/msg/DiagnosticArray, as ros2's "
                    + "/diagnostics: heading, calibration and interference status, from the heading, "
                    + "calibration/status and interference/status its inputs carry ('' = none)"),
            .number(
                "diagnostics_period_s", \.diagnosticsPeriodSeconds, unit: "s", range: 0.01...3600,
                "publish the health this often, by the wall clock (diagnostic_updater's default: 1 s)"
            ).formerly("diagnostics_period"),
        ])

        var json: Bool { encoding == .json }
        /// Every topic this sink sends on: `topics`, and the diagnostics topic when it makes one.
        var sentTopics: [String] { (topics + (diagnosticsTopic.isEmpty ? [] : [diagnosticsTopic])).sorted() }
        var blockOnSlow: Bool { onSlow == .block }
    }
}
