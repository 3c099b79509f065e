import WireFormat
import YAML

/// A recorded or live source's sensors as one list, the way a robot's description states them:
///
///     sensors:
///       type: ros2_source
///       imu_topic: imu/data_raw
///       imu_rotation: roll_180
///       base_frame: base_link
///       magnetometers:
///         - {topic: imu/mag}                           # the primary, read as imu/mag
///         - {name: mast, topic: mast/mag, rotation: yaw_90}
///
/// is shorthand, expanded when the file loads, for the source's `mag_topic` and `extra_magnetometers`
/// followed by a mount stage `<source>_mount` holding the rotations; the stages that read the source
/// read the mount stage instead. The mount stage stays the one owner of mounting: the shorthand only
/// writes its settings, so `fusion-node stages`, errors and the run show the stage it stands for.
enum SourceMagnetometers {
    /// The source types that take the shorthand (the simulator's rotations describe how it simulates,
    /// the lines source has one magnetometer in the sample).
    static let sourceTypes = ["bag", "ros2_source"]
    /// The keys the shorthand takes off the source.
    static let keys = ["magnetometers", "imu_rotation", "base_frame"]
    /// The keys of one `magnetometers` entry.
    static let entryKeys = ["name", "topic", "rotation", "current_topic"]

    /// The declarations for the stage reference: the shorthand keys as a source takes them.
    static let specs: [SettingSpec] = [
        SettingSpec(
            "magnetometers", .magnetometerList, "",
            "the magnetometers as a list of {name, topic, rotation, current_topic}: the first is the primary "
                + "(imu/mag; name '\(PipelineTopics.primaryMagnetometerName)' or none), each other one needs a name "
                + "and is read as imu/mag/NAME; rotation as a mount stage's mag_rotation; current_topic as the "
                + "source's (one motor current: entries that give it give the same). Shorthand for mag_topic, "
                + "extra_magnetometers and current_topic plus a mount stage <source>_mount, which the source's "
                + "readers then read"),
        SettingSpec(
            "imu_rotation", .rotation, "",
            "the IMU's mounting, as a mount stage's imu_rotation; shorthand: written into <source>_mount"),
        SettingSpec(
            "base_frame", .string, "",
            "the body frame the rotations turn into, as a mount stage's base_frame; shorthand: written into "
                + "<source>_mount"),
    ]

    /// Expands every source in `entries` that uses the shorthand; fails at the line of what it refuses.
    static func expand(_ entries: inout [(key: YAMLNode, value: YAMLNode)], file: String) throws(PipelineConfigError) {
        var renamed: [String: String] = [:]
        var generated: [(key: YAMLNode, value: YAMLNode)] = []
        let names = Set(entries.compactMap { $0.key.scalar })
        for i in entries.indices {
            guard let source = entries[i].key.scalar, let body = entries[i].value.mapping,
                let type = entries[i].value["type"]?.scalar, sourceTypes.contains(type),
                body.contains(where: { keys.contains($0.key.scalar ?? "") })
            else { continue }
            let expansion = try Expansion(source: source, body: entries[i].value, file: file)
            entries[i].value = expansion.sourceBody
            guard let mount = expansion.mountBody else { continue }
            let mountName = "\(source)_mount"
            guard !names.contains(mountName) else {
                throw PipelineConfigError(
                    file: file, mark: entries[i].key.mark,
                    message: "stage '\(source)': its magnetometers, imu_rotation or base_frame make a mount stage "
                        + "'\(mountName)', and the file already has a stage of that name")
            }
            renamed[source] = mountName
            generated.append((YAMLNode(value: .scalar(mountName, plain: true), mark: entries[i].key.mark), mount))
        }
        guard !renamed.isEmpty else { return }
        // The source's readers read the mounted stream: nothing downstream sees the sensors' own axes.
        for i in entries.indices {
            guard let items = entries[i].value["inputs"]?.sequence else { continue }
            let turned = items.map { item -> YAMLNode in
                guard let name = item.scalar, let mount = renamed[name] else { return item }
                return YAMLNode(value: .scalar(mount, plain: true), mark: item.mark)
            }
            entries[i].value = replacing("inputs", with: .sequence(turned), in: entries[i].value)
        }
        entries.append(contentsOf: generated)
    }

    private static func replacing(_ key: String, with value: YAMLNode.Value, in node: YAMLNode) -> YAMLNode {
        guard let body = node.mapping, let at = body.firstIndex(where: { $0.key.scalar == key }) else { return node }
        var entries = body
        entries[at].value = YAMLNode(value: value, mark: body[at].value.mark)
        return YAMLNode(value: .mapping(entries), mark: node.mark)
    }

    /// Why `node` is no rotation a mount stage takes (as `SettingSpec.rotationValue` judges a mount
    /// stage's own); nil when it is one. `${VAR}` text is left to the mount stage, which substitutes it.
    static func rotationProblem(_ node: YAMLNode) -> String? {
        let items = node.sequence?.map { $0.scalar ?? "" } ?? []
        guard let text = node.scalar ?? (node.sequence != nil ? "" : nil) else {
            return "rotation must be \(SettingSpec.Kind.rotation.article), found \(node.kind)"
        }
        if text.contains("${") || items.contains(where: { $0.contains("${") }) { return nil }
        guard case .failure(let refusal) = SettingSpec.rotationValue(text, items: items, choices: mountChoices) else {
            return nil
        }
        return "rotation must be \(refusal.detail)"
    }

    /// The words a mount stage's rotation takes besides rotations (tf), from its own declaration.
    static let mountChoices = MountStage.type.settings.first { $0.name == "mag_rotation" }?.choices ?? []

    /// One source's shorthand turned into its plain settings and, when anything turns, a mount stage.
    private struct Expansion {
        var sourceBody: YAMLNode
        var mountBody: YAMLNode?

        init(source: String, body node: YAMLNode, file: String) throws(PipelineConfigError) {
            var reader = ListReader(source: source, node: node, file: file)
            for key in ["imu_rotation", "base_frame"] {
                guard let entry = (node.mapping ?? []).first(where: { $0.key.scalar == key }) else { continue }
                reader.mount.append(entry)
                reader.turns = true
            }
            if let list = node["magnetometers"] { try reader.read(list) }
            sourceBody = YAMLNode(value: .mapping(reader.kept), mark: node.mark)
            mountBody = reader.turns ? YAMLNode(value: .mapping(reader.mount), mark: node.mark) : nil
        }
    }

    /// Reads a source's `magnetometers` list into the source's own settings (`mag_topic`,
    /// `extra_magnetometers`, `current_topic`) and the mount stage's (`mag_rotation`,
    /// `extra_mag_rotations`), refusing each mistake where it is.
    private struct ListReader {
        let source: String, node: YAMLNode, file: String
        /// The source's settings kept (the shorthand's keys taken out) and added.
        var kept: [(key: YAMLNode, value: YAMLNode)]
        /// The mount stage's settings.
        var mount: [(key: YAMLNode, value: YAMLNode)]
        /// Whether anything turns (else no mount stage).
        var turns = false
        var extras: [YAMLNode] = []
        var extraRotations: [YAMLNode] = []
        var seenNames: Set<String> = [PipelineTopics.primaryMagnetometerName]
        var seenTopics: Set<String> = []
        var currentTopic: YAMLNode?

        init(source: String, node: YAMLNode, file: String) {
            self.source = source
            self.node = node
            self.file = file
            kept = (node.mapping ?? []).filter { !SourceMagnetometers.keys.contains($0.key.scalar ?? "") }
            currentTopic = node["current_topic"]
            mount = [
                (Self.scalar("type", node), Self.scalar("mount", node)),
                (Self.scalar("inputs", node), YAMLNode(value: .sequence([Self.scalar(source, node)]), mark: node.mark)),
            ]
        }

        func fail(_ at: YAMLNode, _ message: String) -> PipelineConfigError {
            PipelineConfigError(file: file, mark: at.mark, message: "stage '\(source)': \(message)")
        }

        static func scalar(_ text: String, _ at: YAMLNode) -> YAMLNode {
            YAMLNode(value: .scalar(text, plain: true), mark: at.mark)
        }

        mutating func read(_ list: YAMLNode) throws(PipelineConfigError) {
            let conflicting = ["mag_topic", "extra_magnetometers"].filter { node[$0] != nil }
            guard conflicting.isEmpty else {
                throw fail(
                    list,
                    "give the magnetometers either as 'magnetometers' or as "
                        + "\(conflicting.map { "'\($0)'" }.joined(separator: " and ")), not both")
            }
            if let useMag = node["use_mag"], ["false", "no", "off"].contains(useMag.scalar ?? "") {
                throw fail(useMag, "use_mag: false reads no magnetometer, yet 'magnetometers' lists some")
            }
            guard let items = list.sequence, !items.isEmpty else {
                throw fail(list, "'magnetometers' must be a non-empty list of {name, topic, rotation}")
            }
            for (index, item) in items.enumerated() { try read(item, index: index) }
            if let currentTopic, node["current_topic"] == nil {
                kept.append((Self.scalar("current_topic", currentTopic), currentTopic))
            }
            if !extras.isEmpty {
                kept.append(
                    (Self.scalar("extra_magnetometers", list), YAMLNode(value: .sequence(extras), mark: list.mark)))
            }
            if !extraRotations.isEmpty {
                mount.append(
                    (
                        Self.scalar("extra_mag_rotations", list),
                        YAMLNode(value: .sequence(extraRotations), mark: list.mark)
                    ))
            }
        }

        /// One entry of the list: the first is the primary, the others are read as imu/mag/NAME.
        mutating func read(_ item: YAMLNode, index: Int) throws(PipelineConfigError) {
            guard let fields = item.mapping else {
                throw fail(item, "each magnetometer must be a mapping {name, topic, rotation}, found \(item.kind)")
            }
            for (k, _) in fields where !SourceMagnetometers.entryKeys.contains(k.scalar ?? "") {
                throw fail(
                    k,
                    "unknown key '\(k.scalar ?? "?")' in a magnetometer (expected name, topic, rotation, "
                        + "current_topic)\(didYouMean(k.scalar ?? "", in: SourceMagnetometers.entryKeys))")
            }
            if let current = item["current_topic"] {
                // The pipeline carries one motor current (motor/current); each magnetometer's
                // calibration stage learns its own coefficients against it.
                if let first = currentTopic, first.scalar != current.scalar {
                    throw fail(
                        current,
                        "current_topic '\(current.scalar ?? current.kind)' differs from "
                            + "'\(first.scalar ?? first.kind)' given for another magnetometer (line "
                            + "\(first.mark.line)): a pipeline carries one motor current, and each "
                            + "magnetometer's calibration stage learns its own coefficients against it")
                }
                currentTopic = current
            }
            guard let topicNode = item["topic"], let topic = topicNode.scalar, !topicNode.isNull else {
                throw fail(item, "magnetometer \(index + 1) has no 'topic'")
            }
            guard seenTopics.insert(PipelineTopics.named(topic)).inserted else {
                throw fail(topicNode, "\(topic) is already read as another magnetometer")
            }
            if let rotation = item["rotation"], let problem = SourceMagnetometers.rotationProblem(rotation) {
                throw fail(rotation, problem)
            }
            if index == 0 {
                try readPrimary(item, topicNode: topicNode)
            } else {
                try readOther(item, index: index, topic: topic)
            }
        }

        mutating func readPrimary(_ item: YAMLNode, topicNode: YAMLNode) throws(PipelineConfigError) {
            if let name = item["name"]?.scalar, name != PipelineTopics.primaryMagnetometerName {
                throw fail(
                    item["name"]!,
                    "the first magnetometer is the primary, read as imu/mag and named "
                        + "'\(PipelineTopics.primaryMagnetometerName)' in statuses and the calibration "
                        + "file; leave its name out or write '\(PipelineTopics.primaryMagnetometerName)', "
                        + "found '\(name)'")
            }
            kept.append((Self.scalar("mag_topic", topicNode), topicNode))
            if let rotation = item["rotation"] {
                mount.append((Self.scalar("mag_rotation", rotation), rotation))
                turns = true
            }
        }

        mutating func readOther(_ item: YAMLNode, index: Int, topic: String) throws(PipelineConfigError) {
            guard let name = item["name"]?.scalar, !name.isEmpty else {
                throw fail(item, "magnetometer \(index + 1) (\(topic)) needs a 'name': it is read as imu/mag/NAME")
            }
            if let problem = magnetometerNameProblem(name) { throw fail(item["name"]!, problem) }
            guard seenNames.insert(name).inserted else {
                throw fail(item["name"]!, "the name '\(name)' is given to two magnetometers")
            }
            extras.append(Self.scalar("\(name)=\(topic)", item))
            if let rotation = item["rotation"] {
                let text: String
                if let angles = rotation.sequence {
                    text = angles.map { $0.scalar ?? "?" }.joined(separator: ",")
                } else {
                    text = rotation.scalar ?? "?"
                }
                extraRotations.append(Self.scalar("\(name)=\(text)", rotation))
                turns = true
            }
        }
    }
}
