import YAML
import MessageBus

/// Reading a pipeline file, in named steps: the YAML document, the top-level keys, each stage, then
/// the checks across the graph (inputs, order, endpoints, topics). Every step fails with the file,
/// line and column of what it refuses. The graph steps take time linear in the number of stages and
/// inputs, so a long generated chain validates as fast as it parses.
extension PipelineConfig {
    static func parseText(
        _ text: String, file: String, environment: [String: String], overrides: [SettingOverride],
        requireSink: Bool
    ) throws(PipelineConfigError) -> PipelineConfig {
        let reader = FileReader(file: file, environment: environment)
        let root = try reader.document(text)
        let top = try reader.topLevel(root)
        guard let stagesNode = root["stages"] else { throw reader.fail(root, "missing 'stages' mapping") }
        guard var entries = stagesNode.mapping, !entries.isEmpty else {
            throw reader.fail(stagesNode, "'stages' must be a non-empty mapping of stage name to settings")
        }
        try SettingOverride.apply(overrides, to: &entries)
        try SourceMagnetometers.expand(&entries, file: file)

        var stages: [StageConfig] = []
        var names = Set<String>()
        for (key, body) in entries {
            let stage = try reader.stage(key, body, top: top)
            guard names.insert(stage.name).inserted else {
                throw reader.fail(key, "duplicate stage name '\(stage.name)'")
            }
            stages.append(stage)
        }
        // A graph without a sink computes and throws the result away: nothing the user can have meant.
        guard !requireSink || stages.contains(where: \.type.isSink) else {
            let sinks = StageType.allCases.filter(\.isSink).map(\.name).joined(separator: ", ")
            throw reader.fail(stagesNode, "the pipeline has no sink, so its results go nowhere: add one (\(sinks))")
        }
        let ordered = try reader.dependencyOrder(stages)
        try reader.checkDistinctEndpoints(ordered)
        try TopicFlow.check(ordered, file: file)
        let config = PipelineConfig(
            file: file, stages: ordered, cpus: top.cpus, insecure: top.insecure, security: top.security,
            maximumMessageBytes: top.maximumMessageBytes,
            privateDirectory: EndpointPolicy.privateDirectory(environment: environment), compression: top.compression,
            retransmit: top.retransmit, readerTimeoutSeconds: top.readerTimeoutSeconds)
        try config.checkRetransmitEndpoints()
        return config
    }
}

/// The keys of a pipeline file beside `stages`.
private struct TopLevel {
    static let keys = [
        "stages", "name", "cpus", "insecure", "max_message_bytes", "security", "compression", "retransmit",
        "reader_timeout_s",
    ]
    var name: String
    var insecure = false
    var security: CurveSecurity?
    var maximumMessageBytes = 2 * WireFrame.maximumBytes
    var compression = CompressionPolicy.auto
    var retransmit = RetransmitSettings()
    var readerTimeoutSeconds = PipelineConfig.defaultReaderTimeoutSeconds
    var cpus: [Int] = []
}

/// One file's reading context: where errors point and what `${VAR}` resolves to.
private struct FileReader {
    let file: String
    let environment: [String: String]

    func fail(_ node: YAMLNode, _ message: String) -> PipelineConfigError {
        PipelineConfigError(file: file, mark: node.mark, message: message)
    }

    func substituted(_ raw: String, _ node: YAMLNode) throws(PipelineConfigError) -> String {
        try substitute(raw, node, environment, file)
    }

    /// The YAML document (a non-empty file).
    func document(_ text: String) throws(PipelineConfigError) -> YAMLNode {
        do {
            guard let root = try YAMLParser.parse(text, file: file) else {
                throw PipelineConfigError(
                    file: file, mark: YAMLMark(line: 1, column: 1),
                    message: "empty file: expected a mapping with 'stages'")
            }
            return root
        } catch let e as YAMLError {
            throw PipelineConfigError(file: file, mark: e.mark, message: e.message)
        } catch let e as PipelineConfigError { throw e } catch {
            throw PipelineConfigError(file: file, mark: YAMLMark(line: 1, column: 1), message: "\(error)")
        }
    }

    /// The top-level keys: only known ones, each checked.
    func topLevel(_ root: YAMLNode) throws(PipelineConfigError) -> TopLevel {
        guard let top = root.mapping else { throw fail(root, "expected a mapping with 'stages', found \(root.kind)") }
        for (k, _) in top where !TopLevel.keys.contains(k.scalar ?? "") {
            throw fail(
                k,
                "unknown top-level key '\(k.scalar ?? "?")'\(didYouMean(k.scalar ?? "", in: TopLevel.keys)) "
                    + "(expected 'stages' and optionally 'name', 'cpus', 'insecure', 'max_message_bytes', "
                    + "'security', 'compression', 'retransmit' and 'reader_timeout_s')"
            )
        }
        let name =
            try root["name"].map { (n) throws(PipelineConfigError) -> String in
                guard let s = n.scalar, !n.isNull else { throw fail(n, "'name' must be a string") }
                // It names ipc endpoints inside the private directory: no path separators or dots.
                guard !s.isEmpty, s.count <= 64,
                    s.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "_-".contains($0)) })
                else {
                    throw fail(n, "'name' must be 1 to 64 ASCII letters, digits, '_' or '-', found '\(s)'")
                }
                return s
            }
            ?? (file.split(separator: "/").last.map { String($0.split(separator: ".").first ?? "pipeline") }
                ?? "pipeline")
        var result = TopLevel(name: name)
        if let node = root["insecure"] {
            guard let v = node.scalar, ["true", "false"].contains(v) else {
                throw fail(node, "'insecure' must be true or false")
            }
            result.insecure = v == "true"
        }
        result.security = try root["security"].map { (n) throws(PipelineConfigError) in
            try SecurityConfig.parse(n, file: file, environment: environment)
        }
        // With CURVE the bus is encrypted and authenticated: other hosts may reach it.
        if result.security != nil { result.insecure = true }
        if let node = root["max_message_bytes"] {
            guard let raw = node.scalar, let n = Int(try substituted(raw, node)), (4096...(1 << 30)).contains(n) else {
                throw fail(
                    node,
                    "'max_message_bytes' must be an integer from 4096 to \(1 << 30), found "
                        + "'\(node.scalar ?? node.kind)'"
                )
            }
            result.maximumMessageBytes = n
        }
        if let node = root["compression"] {
            let names = CompressionPolicy.allCases.map(\.rawValue)
            guard let raw = node.scalar, let v = CompressionPolicy(rawValue: try substituted(raw, node)) else {
                throw fail(
                    node,
                    "'compression' must be one of \(names.joined(separator: ", ")), found '\(node.scalar ?? node.kind)'"
                        + didYouMean(node.scalar ?? "", in: names))
            }
            result.compression = v
        }
        if let node = root["retransmit"] {
            result.retransmit = try RetransmitSettings.parse(node, file: file, environment: environment)
        }
        if let node = root["reader_timeout_s"] {
            let range = PipelineConfig.readerTimeoutRange
            guard let raw = node.scalar, let v = Double(try substituted(raw, node)), range.contains(v) else {
                throw fail(
                    node,
                    "'reader_timeout_s' must be a number of seconds from \(format(range.lowerBound, 0)) to "
                        + "\(format(range.upperBound, 0)), found '\(node.scalar ?? node.kind)'")
            }
            result.readerTimeoutSeconds = v
        }
        if let list = root["cpus"] { result.cpus = try cpus(list) }
        return result
    }

    func cpus(_ list: YAMLNode) throws(PipelineConfigError) -> [Int] {
        guard let items = list.sequence, !items.isEmpty else {
            throw fail(list, "'cpus' must be a non-empty list of CPU numbers")
        }
        let available = CPUAffinity.configuredCPUs
        var cpus: [Int] = []
        for item in items {
            guard let raw = item.scalar, let cpu = Int(try substituted(raw, item)), cpu >= 0 else {
                throw fail(item, "a CPU number must be an integer >= 0, found '\(item.scalar ?? item.kind)'")
            }
            guard cpu < available else {
                throw fail(item, "CPU \(cpu) does not exist (this machine has CPUs 0 to \(available - 1))")
            }
            cpus.append(cpu)
        }
        return cpus
    }

    /// One stage: its name, type, inputs, endpoints and settings (each checked against its spec).
    func stage(_ key: YAMLNode, _ body: YAMLNode, top: TopLevel) throws(PipelineConfigError) -> StageConfig {
        guard let name = key.scalar, !key.isNull, !name.isEmpty else {
            throw fail(key, "a stage name must be a non-empty string")
        }
        guard name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
            throw fail(key, "stage name '\(name)' may contain only letters, digits, '_' and '-'")
        }
        guard let mapping = body.mapping else {
            throw fail(body, "stage '\(name)' must be a mapping with a 'type', found \(body.kind)")
        }
        let type = try stageType(of: name, body)
        let inputs = try inputs(of: name, body, type: type)
        let endpoint = try endpoint(of: name, body, type: type, top: top)
        let retransmitEndpoint = try retransmitEndpoint(of: name, body, type: type, top: top)
        let settingNodes = mapping.filter {
            !["type", "inputs", "endpoint", "retransmit_endpoint"].contains($0.key.scalar ?? "")
        }
        let settings = try StageSettings(
            type: type, stage: name, at: body.mark, nodes: settingNodes, file: file, environment: environment)
        if type.settings.contains(where: { $0.name == "bind" }) {
            try EndpointPolicy.check(
                settings.string("bind"), insecure: top.insecure, file: file, mark: settings.marks["bind"] ?? body.mark,
                what: "'bind' of stage '\(name)':")
        }
        return StageConfig(
            name: name, type: type, inputs: inputs, endpoint: endpoint, retransmitEndpoint: retransmitEndpoint,
            settings: settings, mark: key.mark)
    }

    func stageType(of name: String, _ body: YAMLNode) throws(PipelineConfigError) -> StageType {
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
                "unknown stage type '\(typeNode.scalar ?? typeNode.kind)' for stage '\(name)'"
                    + didYouMean(typeNode.scalar ?? "", in: StageType.allCases.map(\.name)) + " (expected one of "
                    + "\(typeNames))"
            )
        }
        return type
    }

    func inputs(of name: String, _ body: YAMLNode, type: StageType) throws(PipelineConfigError) -> [String] {
        var inputs: [String] = []
        var seen = Set<String>()
        if let inputsNode = body["inputs"] {
            guard let items = inputsNode.sequence else {
                throw fail(inputsNode, "'inputs' of stage '\(name)' must be a list of stage names")
            }
            for item in items {
                guard let s = item.scalar, !item.isNull else { throw fail(item, "an input must be a stage name") }
                let input = try substituted(s, item)
                // Reading a stage twice would deliver every message twice.
                guard seen.insert(input).inserted else {
                    throw fail(item, "stage '\(name)' lists input '\(input)' twice (each message would arrive twice)")
                }
                inputs.append(input)
            }
        }
        if type.isSource && !inputs.isEmpty {
            throw fail(body["inputs"]!, "stage '\(name)' is a \(type.name) source and takes no inputs")
        }
        if !type.isSource && inputs.isEmpty { throw fail(body, "stage '\(name)' (\(type.name)) needs 'inputs'") }
        return inputs
    }

    func endpoint(of name: String, _ body: YAMLNode, type: StageType, top: TopLevel) throws(PipelineConfigError)
        -> String
    {
        guard let e = body["endpoint"] else {
            // A supervisor names its run, so two supervised runs of one file do not share endpoints.
            let run = environment[EndpointPolicy.runVariable].flatMap { id in
                !id.isEmpty && id.count <= 20 && id.allSatisfy({ $0.isASCII && $0.isNumber }) ? "\(id)-" : nil
            }
            return "ipc://\(EndpointPolicy.privateDirectory(environment: environment))/\(top.name)-\(run ?? "")\(name)"
        }
        if type.isSink {
            let hint = type.settings.contains { $0.name == "bind" } ? " (its subscribers connect to 'bind')" : ""
            throw fail(
                e, "stage '\(name)' is a \(type.name) sink and publishes nothing, so it has no 'endpoint'\(hint)")
        }
        guard let s = e.scalar, !e.isNull else {
            throw fail(e, "'endpoint' must be a string such as ipc:///tmp/x or tcp://127.0.0.1:5601")
        }
        let endpoint = try substituted(s, e)
        guard BusEndpoint.problem(endpoint) == nil else {
            throw fail(e, "endpoint '\(endpoint)' must start with ipc://, tcp:// or inproc://")
        }
        try EndpointPolicy.check(endpoint, insecure: top.insecure, file: file, mark: e.mark, what: "endpoint")
        return endpoint
    }

    func retransmitEndpoint(of name: String, _ body: YAMLNode, type: StageType, top: TopLevel)
        throws(PipelineConfigError) -> String?
    {
        guard let e = body["retransmit_endpoint"] else { return nil }
        guard !type.isSink else {
            throw fail(e, "stage '\(name)' is a \(type.name) sink and publishes nothing to retransmit")
        }
        guard let s = e.scalar, !e.isNull, case let endpoint = try substituted(s, e),
            BusEndpoint.problem(endpoint) == nil
        else {
            throw fail(e, "'retransmit_endpoint' must be an endpoint such as ipc:///tmp/x or tcp://127.0.0.1:5602")
        }
        try EndpointPolicy.check(
            endpoint, insecure: top.insecure, file: file, mark: e.mark, what: "retransmit_endpoint")
        return endpoint
    }

    /// The stages with inputs before the stages that read them (the file's order where it allows),
    /// after checking that every input exists, is no sink and is not the stage itself, and that the
    /// inputs form no cycle.
    func dependencyOrder(_ stages: [StageConfig]) throws(PipelineConfigError) -> [StageConfig] {
        let index = Dictionary(uniqueKeysWithValues: stages.enumerated().map { ($1.name, $0) })
        var readers = Array(repeating: [Int](), count: stages.count)
        var waiting = Array(repeating: 0, count: stages.count)
        for (i, s) in stages.enumerated() {
            for input in Set(s.inputs) {
                guard let u = index[input] else {
                    let names = stages.map(\.name)
                    let listed = names.count <= 20 ? names.joined(separator: ", ") : "\(names.count) stages"
                    throw PipelineConfigError(
                        file: file, mark: s.mark,
                        message: "stage '\(s.name)' reads unknown input '\(input)'"
                            + "\(didYouMean(input, in: names.count <= 1000 ? names : [])) (stages: \(listed))")
                }
                if stages[u].type.isSink {
                    throw PipelineConfigError(
                        file: file, mark: s.mark,
                        message: "stage '\(s.name)' reads '\(input)', a \(stages[u].type.name) sink, which publishes "
                            + "nothing")
                }
                if u == i {
                    throw PipelineConfigError(file: file, mark: s.mark, message: "stage '\(s.name)' reads itself")
                }
                readers[u].append(i)
                waiting[i] += 1
            }
        }
        // Kahn's algorithm, always taking the ready stage that comes first in the file: the order a
        // repeated scan of the file would give, in O(n log n).
        var ready = MinimumHeap()
        for i in stages.indices where waiting[i] == 0 { ready.insert(i) }
        var ordered: [StageConfig] = []
        ordered.reserveCapacity(stages.count)
        while let i = ready.popMinimum() {
            ordered.append(stages[i])
            for r in readers[i] {
                waiting[r] -= 1
                if waiting[r] == 0 { ready.insert(r) }
            }
        }
        guard ordered.count == stages.count else {
            let stuck = stages.indices.filter { waiting[$0] > 0 }.map { stages[$0] }
            throw PipelineConfigError(
                file: file, mark: stuck[0].mark,
                message: "the stages \(stuck.map(\.name).joined(separator: ", ")) form a cycle through their inputs")
        }
        return ordered
    }

    /// No two publishing stages bind the same endpoint.
    func checkDistinctEndpoints(_ stages: [StageConfig]) throws(PipelineConfigError) {
        var owner: [String: StageConfig] = [:]
        for s in stages where !s.type.isSink {
            if let first = owner[s.endpoint] {
                throw PipelineConfigError(
                    file: file, mark: s.mark,
                    message: "stages \(first.name) and \(s.name) share the endpoint \(s.endpoint)")
            }
            owner[s.endpoint] = s
        }
    }
}

/// A binary min-heap of stage positions.
private struct MinimumHeap {
    private var items: [Int] = []

    mutating func insert(_ value: Int) {
        items.append(value)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child] < items[parent] else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func popMinimum() -> Int? {
        guard let first = items.first else { return nil }
        let last = items.removeLast()
        guard !items.isEmpty else { return first }
        items[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < items.count, items[left] < items[smallest] { smallest = left }
            if right < items.count, items[right] < items[smallest] { smallest = right }
            guard smallest != parent else { return first }
            items.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
