import ROS2DDS

/// What the two ROS 2 stages share: the domain, the namespace, QoS written the ROS 2 way, and the
/// warnings that explain a silent topic.
enum ROS2Settings {
    static func domain<S: DeclaredSettings>(_ path: WritableKeyPath<S, Int>) -> SettingEntry<S> {
        .integer(
            "domain_id", path, range: DomainParticipant.domainIds,
            "DDS domain (ROS_DOMAIN_ID); discovery follows CYCLONEDDS_URI when set")
    }
    static func namespace<S: DeclaredSettings>(_ path: WritableKeyPath<S, String>) -> SettingEntry<S> {
        .string("namespace", path, "ROS namespace relative topic names are resolved in")
    }

    /// Checks QoS texts and topic names (each with its setting's key) as ROS 2 reads them.
    static func check(qos: KeyValuePairs<String, String>, topics: KeyValuePairs<String, String>, namespace: String)
        -> SettingProblem?
    {
        for (key, text) in qos where !text.isEmpty {
            do throws(ROS2QoS.ParseError) { _ = try ROS2QoS(parsing: text) } catch {
                return SettingProblem(key, error.description)
            }
        }
        for (key, topic) in topics where !topic.isEmpty {
            do throws(ROS2NameError) {
                _ = try ROS2Names.qualified(topic, namespace: namespace)
            } catch { return SettingProblem(key, error.description) }
        }
        return nil
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
