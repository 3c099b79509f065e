import YAML
import MessageBus

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
    /// pipeline to one CPU shortens its tail (see the README's latency numbers).
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

    /// How many stages read each stage's output.
    public func consumerCount(of name: String) -> Int { stages.filter { $0.inputs.contains(name) }.count }

    /// Reads, parses and validates a pipeline file, with command-line overrides applied.
    public static func load(
        path: String, environment: [String: String], overrides: [SettingOverride] = []
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
        return try parse(text, file: path, environment: environment, overrides: overrides)
    }

    /// Parses and validates a pipeline file's text. `environment` resolves ${VAR} and ${VAR:-default};
    /// `overrides` replace or add settings as if the file gave them (errors name the override).
    public static func parse(
        _ text: String, file: String, environment: [String: String], overrides: [SettingOverride] = []
    ) throws(PipelineConfigError) -> PipelineConfig {
        do {
            return try parseText(text, file: file, environment: environment, overrides: overrides)
        } catch {
            throw SettingOverride.attribute(error, to: overrides)
        }
    }

    static func parseText(
        _ text: String, file: String, environment: [String: String], overrides: [SettingOverride]
    ) throws(PipelineConfigError) -> PipelineConfig {
        let root: YAMLNode
        do {
            guard let r = try YAMLParser.parse(text, file: file) else {
                throw PipelineConfigError(
                    file: file, mark: YAMLMark(line: 1, column: 1),
                    message: "empty file: expected a mapping with 'stages'")
            }
            root = r
        } catch let e as YAMLError {
            throw PipelineConfigError(file: file, mark: e.mark, message: e.message)
        } catch let e as PipelineConfigError { throw e } catch {
            throw PipelineConfigError(file: file, mark: YAMLMark(line: 1, column: 1), message: "\(error)")
        }
        func fail(_ node: YAMLNode, _ message: String) -> PipelineConfigError {
            PipelineConfigError(file: file, mark: node.mark, message: message)
        }

        guard let top = root.mapping else { throw fail(root, "expected a mapping with 'stages', found \(root.kind)") }
        let topKeys = [
            "stages", "name", "cpus", "insecure", "max_message_bytes", "security", "compression", "retransmit",
        ]
        for (k, _) in top where !topKeys.contains(k.scalar ?? "") {
            throw fail(
                k,
                "unknown top-level key '\(k.scalar ?? "?")'\(didYouMean(k.scalar ?? "", in: topKeys)) (expected "
                    + "'stages' and optionally 'name', 'cpus', 'insecure', 'max_message_bytes', 'security', "
                    + "'compression' and 'retransmit')"
            )
        }
        var insecure = false
        if let node = root["insecure"] {
            guard let v = node.scalar, ["true", "false"].contains(v) else {
                throw fail(node, "'insecure' must be true or false")
            }
            insecure = v == "true"
        }
        let security = try root["security"].map { (n) throws(PipelineConfigError) in
            try SecurityConfig.parse(n, file: file, environment: environment)
        }
        // With CURVE the bus is encrypted and authenticated: other hosts may reach it.
        if security != nil { insecure = true }
        var maximumMessageBytes = 2 * WireFrame.maximumBytes
        if let node = root["max_message_bytes"] {
            guard let raw = node.scalar, let n = Int(try substitute(raw, node, environment, file)),
                (4096...(1 << 30)).contains(n)
            else {
                throw fail(
                    node,
                    "'max_message_bytes' must be an integer from 4096 to \(1 << 30), found "
                        + "'\(node.scalar ?? node.kind)'"
                )
            }
            maximumMessageBytes = n
        }
        var compression = CompressionPolicy.auto
        if let node = root["compression"] {
            let names = CompressionPolicy.allCases.map(\.rawValue)
            guard let raw = node.scalar,
                let v = CompressionPolicy(rawValue: try substitute(raw, node, environment, file))
            else {
                throw fail(
                    node,
                    "'compression' must be one of \(names.joined(separator: ", ")), found '\(node.scalar ?? node.kind)'"
                        + didYouMean(node.scalar ?? "", in: names))
            }
            compression = v
        }
        let retransmit =
            try root["retransmit"].map { (n) throws(PipelineConfigError) in
                try RetransmitSettings.parse(n, file: file, environment: environment)
            } ?? RetransmitSettings()
        var cpus: [Int] = []
        if let list = root["cpus"] {
            guard let items = list.sequence, !items.isEmpty else {
                throw fail(list, "'cpus' must be a non-empty list of CPU numbers")
            }
            let available = CPUAffinity.configuredCPUs
            for item in items {
                guard let raw = item.scalar, let cpu = Int(try substitute(raw, item, environment, file)), cpu >= 0
                else {
                    throw fail(item, "a CPU number must be an integer >= 0, found '\(item.scalar ?? item.kind)'")
                }
                guard cpu < available else {
                    throw fail(item, "CPU \(cpu) does not exist (this machine has CPUs 0 to \(available - 1))")
                }
                cpus.append(cpu)
            }
        }
        let pipelineName =
            try root["name"].map { (n) throws(PipelineConfigError) -> String in
                guard let s = n.scalar, !n.isNull else { throw fail(n, "'name' must be a string") }
                return s
            }
            ?? (file.split(separator: "/").last.map { String($0.split(separator: ".").first ?? "pipeline") }
                ?? "pipeline")
        guard let stagesNode = root["stages"] else { throw fail(root, "missing 'stages' mapping") }
        guard var entries = stagesNode.mapping, !entries.isEmpty else {
            throw fail(stagesNode, "'stages' must be a non-empty mapping of stage name to settings")
        }
        try SettingOverride.apply(overrides, to: &entries)

        var stages: [StageConfig] = []
        for (key, body) in entries {
            guard let name = key.scalar, !key.isNull, !name.isEmpty else {
                throw fail(key, "a stage name must be a non-empty string")
            }
            guard name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
                throw fail(key, "stage name '\(name)' may contain only letters, digits, '_' and '-'")
            }
            guard body.mapping != nil else {
                throw fail(body, "stage '\(name)' must be a mapping with a 'type', found \(body.kind)")
            }
            let typeNames = StageType.allCases.map(\.name).joined(separator: ", ")
            guard let typeNode = body["type"] else {
                throw fail(body, "stage '\(name)' has no 'type' (one of \(typeNames))")
            }
            if let typeName = typeNode.scalar, let why = StageRegistry.retired[typeName] {
                throw fail(typeNode, "stage '\(name)': type '\(typeName)' no longer exists: \(why)")
            }
            guard let typeName = typeNode.scalar, let type = StageType.named(typeName) else {
                throw fail(
                    typeNode,
                    "unknown stage type '\(typeNode.scalar ?? typeNode.kind)' for stage '\(name)' (expected one of "
                        + "\(typeNames))"
                )
            }
            var inputs: [String] = []
            if let inputsNode = body["inputs"] {
                guard let items = inputsNode.sequence else {
                    throw fail(inputsNode, "'inputs' of stage '\(name)' must be a list of stage names")
                }
                for item in items {
                    guard let s = item.scalar, !item.isNull else { throw fail(item, "an input must be a stage name") }
                    inputs.append(try substitute(s, item, environment, file))
                }
            }
            if type.isSource && !inputs.isEmpty {
                throw fail(body["inputs"]!, "stage '\(name)' is a \(type.name) source and takes no inputs")
            }
            if !type.isSource && inputs.isEmpty { throw fail(body, "stage '\(name)' (\(type.name)) needs 'inputs'") }
            var endpoint = "ipc://\(EndpointPolicy.privateDirectory(environment: environment))/\(pipelineName)-\(name)"
            if let e = body["endpoint"] {
                if type.isSink {
                    let hint =
                        type.settings.contains { $0.name == "bind" } ? " (its subscribers connect to 'bind')" : ""
                    throw fail(
                        e,
                        "stage '\(name)' is a \(type.name) sink and publishes nothing, so it has no 'endpoint'\(hint)")
                }
                guard let s = e.scalar, !e.isNull else {
                    throw fail(e, "'endpoint' must be a string such as ipc:///tmp/x or tcp://127.0.0.1:5601")
                }
                endpoint = try substitute(s, e, environment, file)
                guard BusEndpoint.problem(endpoint) == nil else {
                    throw fail(e, "endpoint '\(endpoint)' must start with ipc://, tcp:// or inproc://")
                }
                try EndpointPolicy.check(endpoint, insecure: insecure, file: file, mark: e.mark, what: "endpoint")
            }
            var retransmitEndpoint: String?
            if let e = body["retransmit_endpoint"] {
                guard !type.isSink else {
                    throw fail(e, "stage '\(name)' is a \(type.name) sink and publishes nothing to retransmit")
                }
                guard let s = e.scalar, !e.isNull, BusEndpoint.problem(try substitute(s, e, environment, file)) == nil
                else {
                    throw fail(
                        e, "'retransmit_endpoint' must be an endpoint such as ipc:///tmp/x or tcp://127.0.0.1:5602")
                }
                retransmitEndpoint = try substitute(s, e, environment, file)
                try EndpointPolicy.check(
                    retransmitEndpoint!, insecure: insecure, file: file, mark: e.mark, what: "retransmit_endpoint")
            }
            var settingNodes: [(key: YAMLNode, value: YAMLNode)] = []
            for (k, v) in body.mapping!
            where !["type", "inputs", "endpoint", "retransmit_endpoint"].contains(k.scalar ?? "") {
                settingNodes.append((k, v))
            }
            let settings = try StageSettings(
                type: type, stage: name, at: body.mark, nodes: settingNodes, file: file, environment: environment)
            if type.settings.contains(where: { $0.name == "bind" }) {
                try EndpointPolicy.check(
                    settings.string("bind"), insecure: insecure, file: file, mark: settings.marks["bind"] ?? body.mark,
                    what: "'bind' of stage '\(name)':")
            }
            if stages.contains(where: { $0.name == name }) { throw fail(key, "duplicate stage name '\(name)'") }
            stages.append(
                StageConfig(
                    name: name, type: type, inputs: inputs, endpoint: endpoint, retransmitEndpoint: retransmitEndpoint,
                    settings: settings, mark: key.mark))
        }
        // Inputs must exist, must not be sinks, and the graph must have no cycle.
        for s in stages {
            for input in s.inputs {
                guard let upstream = stages.first(where: { $0.name == input }) else {
                    throw PipelineConfigError(
                        file: file, mark: s.mark,
                        message:
                            "stage '\(s.name)' reads unknown input '\(input)' (stages: "
                            + "\(stages.map(\.name).joined(separator: ", ")))"
                    )
                }
                if upstream.type.isSink {
                    throw PipelineConfigError(
                        file: file, mark: s.mark,
                        message:
                            "stage '\(s.name)' reads '\(input)', a \(upstream.type.name) sink, which publishes nothing")
                }
                if input == s.name {
                    throw PipelineConfigError(file: file, mark: s.mark, message: "stage '\(s.name)' reads itself")
                }
            }
        }
        var ordered: [StageConfig] = []
        var placed = Set<String>()
        while ordered.count < stages.count {
            guard let next = stages.first(where: { !placed.contains($0.name) && $0.inputs.allSatisfy(placed.contains) })
            else {
                let stuck = stages.filter { !placed.contains($0.name) }
                throw PipelineConfigError(
                    file: file, mark: stuck[0].mark,
                    message: "the stages \(stuck.map(\.name).joined(separator: ", ")) form a cycle through their inputs"
                )
            }
            ordered.append(next)
            placed.insert(next.name)
        }
        let endpoints = Dictionary(grouping: ordered.filter { !$0.type.isSink }, by: \.endpoint)
        if let clash = endpoints.first(where: { $0.value.count > 1 }) {
            throw PipelineConfigError(
                file: file, mark: clash.value[1].mark,
                message: "stages \(clash.value.map(\.name).joined(separator: " and ")) share the endpoint \(clash.key)")
        }
        try TopicFlow.check(ordered, file: file)
        let config = PipelineConfig(
            file: file, stages: ordered, cpus: cpus, insecure: insecure, security: security,
            maximumMessageBytes: maximumMessageBytes,
            privateDirectory: EndpointPolicy.privateDirectory(environment: environment), compression: compression,
            retransmit: retransmit)
        try config.checkRetransmitEndpoints()
        return config
    }
}
