import YAML
import WireFormat

/// Which topics reach each stage, worked out from the registry when the file loads: a sink or a
/// transform that names a topic nobody upstream publishes is an error with the setting's position,
/// not a silent run.
enum TopicFlow {
    /// The topics each stage publishes, for stages in dependency order.
    static func published(_ stages: [StageConfig]) -> [String: Set<String>] {
        var out: [String: Set<String>] = [:]
        for s in stages {
            let incoming = s.inputs.reduce(into: Set<String>()) { $0.formUnion(out[$1] ?? []) }
            var topics = Set(s.type.outputTopics)
            switch s.type.passesOn {
            case .everything: topics.formUnion(incoming)
            case .only(let kept): topics.formUnion(incoming.intersection(kept))
            case .nothing: break
            }
            out[s.name] = topics
        }
        return out
    }

    /// Checks every topic a stage's settings name against what its inputs publish.
    static func check(_ stages: [StageConfig], file: String) throws(PipelineConfigError) {
        let published = published(stages)
        for s in stages {
            let incoming = s.inputs.reduce(into: Set<String>()) { $0.formUnion(published[$1] ?? []) }
            for spec in s.type.settings where spec.namesTopics {
                let named = spec.kind == .string ? [s.settings.string(spec.name)] : s.settings.list(spec.name)
                // A magnetometer's own topics (imu/mag/NAME and its statuses) come with the settings that
                // name it, not from a stage type: they count as published with their base topic.
                for topic in named
                where !incoming.contains(topic)
                    && !(PipelineTopics.perMagnetometerBase(of: topic).map(incoming.contains) ?? false)
                {
                    let available = incoming.sorted()
                    throw PipelineConfigError(
                        file: file, mark: s.settings.marks[spec.name] ?? s.mark,
                        message: "'\(spec.name)' of stage '\(s.name)' names topic '\(topic)', which no stage upstream "
                            + "publishes\(didYouMean(topic, in: available)) (upstream: "
                            + "\(available.joined(separator: ", ")))"
                    )
                }
            }
        }
    }
}

/// Which of its input topics a stage passes on to its readers.
public enum TopicPassing: Sendable {
    case everything
    case only(Set<String>)
    case nothing
}
