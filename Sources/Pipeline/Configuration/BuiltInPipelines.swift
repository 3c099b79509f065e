/// The default graph, defined here once: the seeded simulator (rest, a turn, tilting, walking, a
/// magnet near the sensor at 16-19 s, a figure-eight; looping) through online calibration and fusion
/// (whose gate judges every magnetometer reading), one heading line per update on stdout.
/// `fusion-node` with no configuration runs it as is; `Pipelines/default.yaml` is `defaultText` with
/// variables and a publisher for subscribers (`fusion-node --print-default-pipeline` writes it; a
/// test keeps the file equal).
public enum BuiltInPipelines {
    /// The graph with its values given as text (numbers, or `${VAR:-default}` for the shipped file).
    /// `publish` adds a `headings` publisher bound there.
    public static func defaultText(
        duration: String, filter: String, seed: String, minimumChangeDegrees: String, publish: String? = nil,
        console: Bool = true, header: String = "name: builtin\n"
    ) -> String {
        var text =
            header + """
                stages:
                  source:
                    type: simulator
                    scenario: default
                    seed: \(seed)
                    rate_hz: 100
                    duration: \(duration)
                    realtime: true
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

                """
        }
        if let publish {
            text += """
                  headings:
                    type: publish
                    inputs: [fusion]
                    bind: \(publish)
                    topics: [heading, imu/data, calibration/status, interference/status]   # what watch shows
                    latest_only: true

                """
        }
        return text
    }

    /// What `fusion-node` runs with no configuration; with `watchEndpoint`, what `fusion-node --watch`
    /// runs: no console, a publisher there for the view.
    public static func defaultText(
        durationSeconds: Double, filter: String, seed: UInt64, watchEndpoint: String? = nil
    ) -> String {
        defaultText(
            duration: "\(durationSeconds)", filter: filter, seed: "\(seed)", minimumChangeDegrees: "0",
            publish: watchEndpoint, console: watchEndpoint == nil)
    }

    /// `Pipelines/default.yaml`, byte for byte.
    public static let shippedDefault = defaultText(
        duration: "${DURATION:-0}          # seconds; 0 = until Ctrl-C", filter: "${FILTER:-kalman}",
        seed: "${SEED:-1}",
        minimumChangeDegrees: "${MIN_CHANGE_DEG:-1}", publish: "${PUBLISH:-tcp://127.0.0.1:5600}",
        header: """
            # The default pipeline: the seeded simulator through online calibration and fusion (its gate judges
            # every magnetometer reading), headings printed to stdout and published for subscribers.
            # Run: fusion-node --config Pipelines/default.yaml
            # Written by `fusion-node --print-default-pipeline` from the built-in graph (BuiltInPipelines.swift).
            name: default
            # cpus: [0]    # pin every stage to one CPU: on a small virtual machine the shortest latency tail

            """)
}
