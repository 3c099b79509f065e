import YAML
import MessageBus

#if canImport(Glibc)
    import Glibc
#endif

/// A configuration error: file, line, column (or the command-line override that caused it) and what
/// was expected.
public struct PipelineConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var mark: YAMLMark
    public var message: String
    /// The command-line override the error is about (e.g. "--set fusion.filter=kalmann"), if any.
    public var origin: String?
    public init(file: String, mark: YAMLMark, message: String, origin: String? = nil) {
        self.file = file
        self.mark = mark
        self.message = message
        self.origin = origin
    }
    public var description: String {
        origin.map { "\($0): \(message)" } ?? "\(file):\(mark.line):\(mark.column): \(message)"
    }
}

/// The pipeline's top-level `compression`: how stages pack the numbered batches they send each other.
public enum CompressionPolicy: String, Sendable, CaseIterable {
    /// LZ4 where bytes cost more than packing them: tcp endpoints (a network) and CURVE endpoints
    /// (every byte encrypted); none on plain ipc and inproc.
    case auto
    /// LZ4 on every tcp and ipc endpoint (inproc never: nothing is copied there).
    case lz4
    /// Never.
    case none
}

/// One stage as configured.
public struct StageConfig: Sendable {
    public var name: String
    public var type: StageType
    public var inputs: [String]
    /// Where the stage publishes when stages run in separate processes (ipc:// or tcp://).
    public var endpoint: String
    /// Where it serves retransmissions of a live stream, as configured (`retransmit_endpoint`); nil =
    /// derived from `endpoint` (see `PipelineConfig.retransmitEndpoint(of:)`).
    public var retransmitEndpoint: String? = nil
    public var settings: StageSettings
    public var mark: YAMLMark
}

/// A validated pipeline: stages in dependency order (inputs before the stages that use them).
public struct PipelineConfig: Sendable {
    public var file: String
    public var stages: [StageConfig]
    /// CPUs every stage thread and libzmq I/O thread of this pipeline is pinned to (top-level
    /// `cpus`); empty = wherever the system schedules them. On a small virtual machine, waking a
    /// thread on another CPU costs more than the work it does, so pinning a latency-critical
    /// pipeline to one CPU shortens its tail (docs/results.md has the latency figures).
    public var cpus: [Int] = []
    /// Top-level `insecure: true`: the file accepts binding addresses other hosts can reach.
    public var insecure = false
    /// CURVE keys for every tcp and ipc endpoint (top-level `security`); nil = plain.
    public var security: CurveSecurity?
    /// Largest bus message a stage accepts from its inputs (top-level `max_message_bytes`), enforced by
    /// libzmq, which drops the connection of a peer that sends more (it reconnects). Default 32 MiB:
    /// twice the largest frame, so a frame between the two is refused and counted by the stage instead.
    public var maximumMessageBytes = 2 * WireFrame.maximumBytes
    /// The private directory default ipc endpoints live in (see `EndpointPolicy`).
    public var privateDirectory = ""
    /// How stages pack the batches they send each other (top-level `compression`).
    public var compression: CompressionPolicy = .auto
    /// What publishers of live streams keep for readers that missed frames (top-level `retransmit`).
    public var retransmit = RetransmitSettings()
    /// How long a stage waits for the stages reading it to connect, at the start or after one went
    /// away, before it fails naming them (top-level `reader_timeout_s`, seconds). Long enough for a
    /// process to start or a supervisor to restart a crashed one on a loaded machine.
    public var readerTimeoutSeconds = PipelineConfig.defaultReaderTimeoutSeconds
    public static let defaultReaderTimeoutSeconds = 60.0
    public static let readerTimeoutRange = 1.0...86_400.0

    /// The packing for batches published on `endpoint`.
    public func compression(on endpoint: String) -> FrameCompression {
        switch compression {
        case .none: return .none
        case .lz4: return endpoint.hasPrefix("inproc://") ? .none : .lz4
        case .auto:
            return endpoint.hasPrefix("tcp://") || (security != nil && !endpoint.hasPrefix("inproc://")) ? .lz4 : .none
        }
    }

    public func stage(named name: String) -> StageConfig? { stages.first { $0.name == name } }

    /// Refuses a run that would replace an existing regular file named by a setting declared to write one
    /// (`SettingSpec.writesFile`), unless `overwriting`, or an existing recording (`writesRecording`),
    /// always; at that setting's line. `only` limits the check to some stages. Devices and FIFOs
    /// (`/dev/stdout`) are written, not replaced, and pass. Recordings are checked first: no advice to
    /// give --overwrite is followed by a refusal it cannot lift.
    public func refuseExistingOutputs(only: Set<String>? = nil, overwriting: Bool = false)
        throws(PipelineConfigError)
    {
        for stage in stages where only?.contains(stage.name) ?? true {
            for spec in stage.type.settings where spec.writesRecording {
                let path = stage.settings.string(spec.name)
                var info = stat()
                guard !path.isEmpty, lstat(path, &info) == 0 else { continue }
                throw PipelineConfigError(
                    file: file, mark: stage.settings.marks[spec.name] ?? stage.mark,
                    message:
                        "\(path) exists ('\(spec.name)' of stage '\(stage.name)'): recordings are never replaced, "
                        + "--overwrite or not; remove it or choose another name")
            }
        }
        guard !overwriting else { return }
        for stage in stages where only?.contains(stage.name) ?? true {
            for spec in stage.type.settings where spec.writesFile {
                let path = stage.settings.string(spec.name)
                var info = stat()
                guard !path.isEmpty, stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
                throw PipelineConfigError(
                    file: file, mark: stage.settings.marks[spec.name] ?? stage.mark,
                    message:
                        "\(path) exists and the run would replace it ('\(spec.name)' of stage '\(stage.name)'); "
                        + "give --overwrite to allow that, or choose another name")
            }
        }
    }

    /// How many stages read each stage's output.
    public func consumerCount(of name: String) -> Int { consumers(of: name).count }
    /// The stages that read stage `name`, in dependency order.
    public func consumers(of name: String) -> [String] { stages.filter { $0.inputs.contains(name) }.map(\.name) }

    /// Reads, parses and validates a pipeline file, with command-line overrides applied.
    /// `requireSink: false` for a file a command takes a stage from (`calibrate --config`).
    public static func load(
        path: String, environment: [String: String], overrides: [SettingOverride] = [], requireSink: Bool = true
    ) throws(PipelineConfigError) -> PipelineConfig {
        if let problem = SettingOverride.unreadable(path) {
            throw PipelineConfigError(file: path, mark: YAMLMark(line: 1, column: 1), message: problem, origin: path)
        }
        guard let text = YAMLParser.readFile(path) else {
            throw PipelineConfigError(
                file: path, mark: YAMLMark(line: 1, column: 1),
                message: "cannot read the file: \(SettingOverride.errnoText)",
                origin: path)
        }
        return try parse(text, file: path, environment: environment, overrides: overrides, requireSink: requireSink)
    }

    /// Parses and validates a pipeline file's text. `environment` resolves ${VAR} and ${VAR:-default};
    /// `overrides` replace or add settings as if the file gave them (errors name the override).
    /// `requireSink`: a graph without a sink is an error (a file a user runs); graphs that tests or
    /// commands drive stage by stage may have none.
    public static func parse(
        _ text: String, file: String, environment: [String: String], overrides: [SettingOverride] = [],
        requireSink: Bool = false
    ) throws(PipelineConfigError) -> PipelineConfig {
        do {
            return try parseText(
                text, file: file, environment: environment, overrides: overrides, requireSink: requireSink)
        } catch {
            throw SettingOverride.attribute(error, to: overrides)
        }
    }
}

extension PipelineConfig {
    /// Settings the file (or an override) gave under a former name, in file order.
    public var deprecations: [SettingDeprecation] { stages.flatMap(\.settings.deprecations) }
}
