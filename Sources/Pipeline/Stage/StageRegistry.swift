/// Every stage type a pipeline may use, in the order of the stage reference. Configuration
/// validation, the factory and `fusion-node stages` all read this list: adding a stage type is one
/// new file in Stages/ (its settings, state and logic, declaring its `StageType`) plus one line here.
public enum StageRegistry {
    public static let types: [StageType] = [
        // Sources
        SimulatorSource.type,
        BagSource.type,
        LinesSource.type,
        ROS2Source.type,
        // Transforms
        MountStage.type,
        CalibrationStage.type,
        FusionStage.type,
        DirectionStage.type,
        // Sinks
        StdoutSink.type,
        CSVSink.type,
        RecordSink.type,
        PublishSink.type,
        ROS2Sink.type,
        MeasureSink.type,
        SummarySink.type,
        ReportSink.type,
    ]

    /// Stage types that no longer exist, with what replaces them (the load error says it).
    public static let retired: [String: String] = [
        "gating":
            "the disturbance verdict is made once, by the fusion filter's gate: remove the stage, connect its "
            + "inputs to fusion, and give strength_tolerance, dip_tolerance_deg, expected_strength_ut, "
            + "expected_dip_deg or the site (latitude, longitude, height_km, date) to the fusion stage"
    ]
}
