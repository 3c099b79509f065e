import WireFormat

/// Magnetometers besides the primary, as sources take them: NAME=TOPIC entries (`extra_magnetometers`),
/// each read as imu/mag/NAME.
struct ExtraMagnetometer: Equatable {
    var name: String
    var topic: String

    /// The entries of `extra_magnetometers`, checked: each NAME=TOPIC, names usable in topics and
    /// different, topics different from each other and from `primaryTopic`.
    static func parse(_ entries: [String], primaryTopic: String) throws(StageFailure) -> [ExtraMagnetometer] {
        if let problem = problem(entries, primaryTopic: primaryTopic) {
            throw StageFailure("extra_magnetometers: \(problem.message)")
        }
        return entries.map {
            let parts = $0.split(separator: "=", maxSplits: 1).map(String.init)
            return ExtraMagnetometer(name: parts[0], topic: parts[1])
        }
    }

    /// What is wrong with the entries, for the file's check (with the setting's line); nil when nothing.
    static func problem(_ entries: [String], primaryTopic: String) -> SettingProblem? {
        func problem(_ text: String) -> SettingProblem { SettingProblem("extra_magnetometers", text) }
        var out: [ExtraMagnetometer] = []
        for entry in entries {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[1].isEmpty else {
                return problem("'\(entry)' is not NAME=TOPIC (mast=/mast/mag)")
            }
            if let text = magnetometerNameProblem(parts[0]) { return problem(text) }
            guard !out.contains(where: { $0.name == parts[0] }) else {
                return problem("the name '\(parts[0])' is given twice")
            }
            let spelled = PipelineTopics.named(parts[1])
            guard spelled != PipelineTopics.named(primaryTopic),
                !out.contains(where: { PipelineTopics.named($0.topic) == spelled })
            else {
                return problem("\(parts[1]) is already read as another magnetometer")
            }
            out.append(ExtraMagnetometer(name: parts[0], topic: parts[1]))
        }
        return nil
    }
}

/// Why `name` cannot name a magnetometer (it becomes part of topic names: imu/mag/NAME); nil when it can.
func magnetometerNameProblem(_ name: String) -> String? {
    let allowed = name.unicodeScalars.allSatisfy {
        ("a"..."z").contains($0) || ("A"..."Z").contains($0)
            || ("0"..."9").contains($0) || $0 == "_"
    }
    if name.isEmpty || !allowed {
        return "'\(name)' is not a magnetometer name: letters, digits and _ only (it becomes imu/mag/NAME)"
    }
    return nil
}
