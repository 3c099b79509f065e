import Bags
import WireFormat

/// A topic looked up among a bag's topics in either spelling (with or without ROS's leading slash),
/// and the message when it is not there: the bag source, `bag echo` and `bag convert` name a missing
/// topic the same way, with the nearest one and the topics the bag has.
public enum BagTopicLookup {
    /// The bag's own spelling of `topic`, or nil.
    public static func find(_ topic: String, in topics: [BagTopic]) -> String? {
        let names = topics.map(\.name)
        return [topic, PipelineTopics.otherSpelling(topic)].first(where: names.contains)
    }

    /// "BAG has no topic T (ROLE) (did you mean ...?); its topics: name (type), ...".
    public static func missing(_ topic: String, role: String? = nil, bag: String, topics: [BagTopic]) -> String {
        "\(bag) has no topic \(topic)\(role.map { " (\($0))" } ?? "")\(didYouMean(topic, in: topics.map(\.name))); "
            + "its topics: " + topics.map { "\($0.name) (\($0.type))" }.joined(separator: ", ")
    }
}
