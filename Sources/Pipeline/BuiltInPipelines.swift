/// The pipeline `fusion-node` runs when given no configuration: the seeded simulator (rest, a turn,
/// tilting, walking, a magnet near the sensor at 16-19 s, a figure-eight; looping) through
/// calibration, interference gating and fusion, one heading line per update on stdout.
/// Pipelines/default.yaml is the same graph plus a publisher for subscribers.
public enum BuiltInPipelines {
    public static func defaultText(durationSeconds: Double, filter: String, seed: UInt64) -> String {
        """
        name: builtin
        stages:
          source:
            type: simulator
            scenario: default
            seed: \(seed)
            rate_hz: 100
            duration: \(durationSeconds)
            realtime: true
          calibration:
            type: calibration
            inputs: [source]
          gating:
            type: gating
            inputs: [calibration]
          fusion:
            type: fusion
            inputs: [gating]
            filter: \(filter)
          console:
            type: stdout
            inputs: [fusion]
            min_change_deg: 0
        """
    }
}
