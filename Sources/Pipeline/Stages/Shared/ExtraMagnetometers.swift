import Foundation
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
        guard case .success(let named) = NamedEntry.parse(entries, setting: "", form: "") else { return [] }
        return named.map { ExtraMagnetometer(name: $0.name, topic: $0.value ?? "") }
    }

    /// What is wrong with the entries, for the file's check (with the setting's line); nil when nothing.
    static func problem(_ entries: [String], primaryTopic: String) -> SettingProblem? {
        let named: [NamedEntry]
        switch NamedEntry.parse(entries, setting: "extra_magnetometers", form: "NAME=TOPIC (mast=/mast/mag)") {
        case .failure(let problem): return problem
        case .success(let n): named = n
        }
        var seen: Set<String> = [PipelineTopics.named(primaryTopic)]
        for entry in named {
            guard let topic = entry.value else {
                return SettingProblem("extra_magnetometers", "'\(entry.text)' is not NAME=TOPIC (mast=/mast/mag)")
            }
            guard seen.insert(PipelineTopics.named(topic)).inserted else {
                return SettingProblem("extra_magnetometers", "\(topic) is already read as another magnetometer")
            }
        }
        return nil
    }
}

/// One NAME=VALUE entry of a list setting that names magnetometers (`extra_magnetometers`,
/// `extra_mag_rotations`, the simulator's extras): the name checked as a magnetometer name, the value
/// trimmed of spaces and of the brackets a `[0, 0, -90]` rotation may come in; nil when there is no `=`.
struct NamedEntry: Equatable {
    var name: String
    var value: String?
    /// The entry as written, for errors.
    var text: String

    /// The entries, each name usable in topics and given once; an empty value is a problem.
    /// `form` names the expected spelling in the error ("NAME=TOPIC (mast=/mast/mag)").
    static func parse(_ entries: [String], setting: String, form: String) -> Result<[NamedEntry], SettingProblem> {
        var out: [NamedEntry] = []
        for entry in entries {
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            let value = parts.count == 2 ? parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "[] ")) : nil
            if value?.isEmpty == true { return .failure(SettingProblem(setting, "'\(entry)' is not \(form)")) }
            if let problem = magnetometerNameProblem(parts[0]) { return .failure(SettingProblem(setting, problem)) }
            guard !out.contains(where: { $0.name == parts[0] }) else {
                return .failure(SettingProblem(setting, "the name '\(parts[0])' is given twice"))
            }
            out.append(NamedEntry(name: parts[0], value: value, text: entry))
        }
        return .success(out)
    }
}

/// Why `name` cannot name a magnetometer (it becomes part of topic names: imu/mag/NAME); nil when it can.
public func magnetometerNameProblem(_ name: String) -> String? {
    let allowed = name.unicodeScalars.allSatisfy {
        ("a"..."z").contains($0) || ("A"..."Z").contains($0)
            || ("0"..."9").contains($0) || $0 == "_"
    }
    if name.isEmpty || !allowed {
        return "'\(name)' is not a magnetometer name: letters, digits and _ only (it becomes imu/mag/NAME)"
    }
    if name == PipelineTopics.primaryMagnetometerName {
        return "'\(name)' is the primary magnetometer's name (logs, the summary and watch call it so): choose another"
    }
    return nil
}
