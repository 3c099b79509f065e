/// The default graph, defined here once: the seeded simulator (a sensor with 41 uT of hard iron, turned
/// every way for 6 s, then rest, a turn, tilting, walking and a magnet near the sensor at 24-27 s;
/// looping) through online calibration and fusion (whose gate judges every magnetometer reading),
/// headings printed on change, published for subscribers (`fusion-node watch`), and a summary that
/// scores them against the simulator's truth. `fusion-node` with no configuration runs it,
/// `Pipelines/default.yaml` is the same text with variables (`fusion-node --print-default-pipeline`
/// writes it; a test keeps the file equal), and `fusion-node --watch` runs it with the view in place
/// of the console.
public enum BuiltInPipelines {
    /// The graph with its values given as text (numbers, or `${VAR:-default}` for the shipped file).
    /// `console: false` leaves out the printed headings and the summary (the watch view has the terminal).
    public static func defaultText(
        duration: String, filter: String, seed: String, minimumChangeDegrees: String, publish: String,
        console: Bool = true, header: String = "name: builtin\n"
    ) -> String {
        var text =
            header + """
                stages:
                  source:
                    type: simulator
                    scenario: tour
                    seed: \(seed)
                    rate_hz: 100
                    duration_s: \(duration)
                    realtime: true
                    hard_iron_ut: [25, -30, 12]    # the sensor's own iron: the calibration finds it
                    publish_truth: true            # the true orientation, for the summary's error
                  calibration:
                    type: calibration
                    inputs: [source]
                    online: true
                  fusion:
                    type: fusion
                    inputs: [calibration]
                    filter: \(filter)

                """
        if console {
            text += """
                  console:
                    type: stdout
                    inputs: [fusion]
                    min_change_deg: \(minimumChangeDegrees)
                  summary:
                    type: summary
                    inputs: [source, fusion]      # the truth from the simulator, the headings from fusion

                """
        }
        text += """
              headings:
                type: publish
                inputs: [fusion]
                bind: \(publish)
                topics: [heading, imu/data, calibration/status, interference/status]   # what watch shows
                latest_only: true

            """
        return text
    }

    /// Where the built-in graph publishes: what `fusion-node watch` reads by default.
    public static let defaultPublish = "tcp://127.0.0.1:5600"

    /// What `fusion-node` runs with no configuration (the shipped file with its defaults); with `watch`,
    /// what `fusion-node --watch` runs: the view in place of the console and the summary.
    public static func defaultText(
        durationSeconds: Double, filter: String, seed: UInt64, watch: Bool = false
    ) -> String {
        defaultText(
            duration: "\(durationSeconds)", filter: filter, seed: "\(seed)", minimumChangeDegrees: "1",
            publish: defaultPublish, console: !watch)
    }

    /// `Pipelines/default.yaml`, byte for byte.
    public static let shippedDefault = defaultText(
        duration: "${DURATION:-0}          # seconds; 0 = until Ctrl-C", filter: "${FILTER:-kalman}",
        seed: "${SEED:-1}",
        minimumChangeDegrees: "${MIN_CHANGE_DEG:-1}", publish: "${PUBLISH:-\(defaultPublish)}",
        header: """
            # The default pipeline: the seeded simulator through online calibration and fusion (its gate judges
            # every magnetometer reading), headings printed on change with a summary against the simulator's
            # truth at the end, and published for subscribers (fusion-node watch).
            # Run: fusion-node --config Pipelines/default.yaml
            # Written by `fusion-node --print-default-pipeline` from the built-in graph (BuiltInPipelines.swift).
            name: default
            # cpus: [0]    # pin every stage to one CPU: on a small virtual machine the shortest latency tail

            """)
}
