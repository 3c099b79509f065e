import ROS2DDS

/// What the two ROS 2 stages share: the domain, the namespace, QoS written the ROS 2 way, and the
/// warnings that explain a silent topic.
enum ROS2Settings {
    static let domainSpec = SettingSpec(
        "domain_id", .integer, "0", "DDS domain (ROS_DOMAIN_ID); discovery follows CYCLONEDDS_URI when set",
        range: Double(DomainParticipant.domainIds.lowerBound)...Double(DomainParticipant.domainIds.upperBound))
    static let namespaceSpec = SettingSpec(
        "namespace", .string, "/", "ROS namespace relative topic names are resolved in")

    /// A check for every `qos` / `*_qos` setting and every topic name of a stage.
    static func check(qosSettings: [String], topicSettings: [String]) -> @Sendable (StageSettings) -> SettingProblem? {
        { s in
            for key in qosSettings where !s.string(key).isEmpty {
                do throws(ROS2QoS.ParseError) { _ = try ROS2QoS(parsing: s.string(key)) } catch {
                    return SettingProblem(key, error.description)
                }
            }
            for key in topicSettings where !s.string(key).isEmpty {
                do throws(ROS2NameError) {
                    _ = try ROS2Names.qualified(s.string(key), namespace: s.string("namespace"))
                } catch { return SettingProblem(key, error.description) }
            }
            return nil
        }
    }
}

/// Says why a ROS 2 topic is silent: after a grace period, then at a bounded rate (never silence,
/// never a flood).
struct SilentTopicWarnings {
    /// First warning after this long without a match, seconds; then one per `repeatSeconds`.
    var graceSeconds = 3.0
    var repeatSeconds = 15.0
    private var nextWarning: [String: Double] = [:]

    /// Logs `why()` for `topic` when it is due; `matched` clears the topic's timer.
    mutating func observe(_ topic: String, matched: Bool, now: Double, log: (String) -> Void, why: () -> String?) {
        if matched {
            nextWarning[topic] = nil
            return
        }
        guard let due = nextWarning[topic] else {
            nextWarning[topic] = now + graceSeconds
            return
        }
        guard now >= due else { return }
        nextWarning[topic] = now + repeatSeconds
        if let text = why() { log(text) }
    }
}
