import MessageBus

/// What a stage does in the graph.
public enum StageRole: String, Sendable, CaseIterable {
    /// Drives a stream: no inputs.
    case source
    /// Reads its inputs and publishes to the stages that read it.
    case transform
    /// Reads its inputs and publishes nothing on the bus.
    case sink
}

/// A stage type as its own file declares it: name, role, settings, the topics it adds to the stream
/// and how to build it. `StageRegistry.types` lists every one; configuration validation, the
/// factory and `fusion-node stages` all read that list.
public struct StageType: Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let role: StageRole
    /// One sentence for the stage reference.
    public let summary: String
    public let settings: [SettingSpec]
    /// Topics this type publishes besides those it passes on (transforms) or sends to its own
    /// subscribers (sinks with an endpoint).
    public let outputTopics: [String]
    /// Which input topics it passes on (sinks: nothing).
    public let passesOn: TopicPassing
    /// What a restarted stage of this type does with what its killed predecessor had done.
    public let restart: RestartBehaviour
    /// Restarted on a live stream, the stage first reads what its inputs' publishers still hold
    /// (their retransmit buffers) and drops what its output already has: a file sink that can tell
    /// its last row, so nothing is lost or written twice.
    public let continuesFromRetransmission: Bool
    /// Checks that involve several settings (latitude and longitude go together, say), on the typed
    /// settings (and which ones the file gave); nil = fine.
    let check: @Sendable (StageSettings) -> SettingProblem?
    /// Builds the stage's logic from validated settings.
    let make: @Sendable (StageSettings, StageContext) throws -> StageLogic
    /// The `Settings` properties no table entry sets, and the entries that set no property (both
    /// empty for a well-declared stage; a test checks every registered type).
    let settingsCoverage: @Sendable () -> (unsetProperties: [String], entriesWithoutProperty: [String])

    /// A stage type whose settings are `table`: validation and the reference read its specs, and the
    /// factory gets the typed `Settings` it reads.
    init<Settings: DeclaredSettings>(
        name: String, role: StageRole, summary: String, settings table: SettingTable<Settings>,
        outputTopics: [String] = [], passesOn: TopicPassing = .everything,
        restart: RestartBehaviour = .recomputesInput, continuesFromRetransmission: Bool = false,
        check: @escaping @Sendable (Settings, StageSettings) -> SettingProblem? = { _, _ in nil },
        make: @escaping @Sendable (Settings, StageContext) throws -> StageLogic
    ) {
        self.name = name
        self.role = role
        self.summary = summary
        self.settings = table.specs
        self.outputTopics = outputTopics
        self.passesOn = role == .transform ? passesOn : .nothing
        self.restart = role == .source ? .startsAgain : restart
        self.continuesFromRetransmission = continuesFromRetransmission
        self.check = { s in check(table.read(s), s) }
        self.make = { s, context in try make(table.read(s), context) }
        self.settingsCoverage = { table.coverage() }
    }

    /// Keys the file may give that expand into other settings and stages when it loads
    /// (SourceMagnetometers), for the reference.
    public var shorthandSettings: [SettingSpec] {
        SourceMagnetometers.sourceTypes.contains(name) ? SourceMagnetometers.specs : []
    }

    public var isSource: Bool { role == .source }
    public var isSink: Bool { role == .sink }
    public var description: String { name }

    /// Every registered type, in the order of the reference.
    public static var allCases: [StageType] { StageRegistry.types }

    /// The registered type with this name.
    public static func named(_ name: String) -> StageType? { StageRegistry.types.first { $0.name == name } }

    public static func == (a: StageType, b: StageType) -> Bool { a.name == b.name }
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }
}

/// What a stage restarted under `--supervise` does (see `PipelineConfig.restartIsLossless`).
public enum RestartBehaviour: String, Sendable {
    /// A source: plays its input again from the start; readers drop the frames they already have.
    case startsAgain
    /// When its input is reproducible, the stage recomputes that input from the source up to where
    /// the live stream resumes, then reads on: its state and output are those of an uninterrupted
    /// run (a file sink writes its file again). Otherwise it joins the live stream.
    case recomputesInput
    /// Joins the live stream: what it sent outside the pipeline cannot be taken back or sent twice
    /// (stdout, external subscribers, ROS 2), so what the killed process held is lost.
    case joinsLive
}
