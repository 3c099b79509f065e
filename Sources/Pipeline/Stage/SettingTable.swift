import CompassCore

/// A stage's typed settings: a struct whose `init()` holds every default. Its `SettingTable` reads
/// the defaults from there, so a default is written once, next to the property's doc comment.
protocol DeclaredSettings: SendableMetatype {
    init()
}

/// One setting, declared once: its key in a pipeline file, the property of the stage's `Settings`
/// it sets (a key path), its unit, the range or choices it accepts, and one line of help. Its default
/// is the property's value in `Settings()`. Validation, the factory, `fusion-node stages` and
/// docs/stages.md all read the spec built from it.
struct SettingEntry<Settings: DeclaredSettings>: @unchecked Sendable {
    private(set) var spec: SettingSpec
    /// Writes the validated value of `spec.name` into the settings.
    let read: (StageSettings, inout Settings) -> Void

    private init(
        _ key: String, _ kind: SettingSpec.Kind, default text: String?, unit: String, help: String,
        choices: [String] = [], range: ClosedRange<Double>? = nil, namesTopics: Bool = false, writesFile: Bool = false,
        writesRecording: Bool = false, read: @escaping (StageSettings, inout Settings) -> Void
    ) {
        spec = SettingSpec(
            key, kind, text, help, unit: unit, choices: choices, range: range, namesTopics: namesTopics,
            writesFile: writesFile, writesRecording: writesRecording)
        self.read = read
    }

    private static var defaults: Settings { Settings() }

    /// The same setting, also accepted under the names it had before (with a warning).
    func formerly(_ names: String...) -> Self {
        var copy = self
        copy.spec.formerNames += names
        return copy
    }

    /// A number, in `unit`, within `range`.
    static func number(
        _ key: String, _ path: WritableKeyPath<Settings, Double>, unit: String = "", range: ClosedRange<Double>,
        _ help: String
    ) -> Self {
        Self(key, .number, default: SettingSpec.text(defaults[keyPath: path]), unit: unit, help: help, range: range) {
            $1[keyPath: path] = $0.number(key)
        }
    }

    /// A number that may be left empty ("" = nil: not given).
    static func optionalNumber(
        _ key: String, _ path: WritableKeyPath<Settings, Double?>, unit: String = "", range: ClosedRange<Double>,
        _ help: String
    ) -> Self {
        Self(
            key, .optionalNumber, default: defaults[keyPath: path].map(SettingSpec.text) ?? "", unit: unit,
            help: help, range: range
        ) { $1[keyPath: path] = $0.optionalNumber(key) }
    }

    /// A whole number within `range`.
    static func integer(
        _ key: String, _ path: WritableKeyPath<Settings, Int>, unit: String = "", range: ClosedRange<Int>,
        _ help: String
    ) -> Self {
        Self(
            key, .integer, default: String(defaults[keyPath: path]), unit: unit, help: help,
            range: Double(range.lowerBound)...Double(range.upperBound)
        ) { $1[keyPath: path] = $0.integer(key) }
    }

    static func bool(_ key: String, _ path: WritableKeyPath<Settings, Bool>, _ help: String) -> Self {
        Self(key, .bool, default: String(defaults[keyPath: path]), unit: "", help: help) {
            $1[keyPath: path] = $0.bool(key)
        }
    }

    /// Text; `required` settings have no default (the file must give them).
    static func string(
        _ key: String, _ path: WritableKeyPath<Settings, String>, required: Bool = false, namesTopic: Bool = false,
        choices: [String] = [], writesFile: Bool = false, writesRecording: Bool = false, _ help: String
    ) -> Self {
        Self(
            key, .string, default: required ? nil : defaults[keyPath: path], unit: "", help: help,
            choices: choices, namesTopics: namesTopic, writesFile: writesFile, writesRecording: writesRecording
        ) { $1[keyPath: path] = $0.string(key) }
    }

    /// One of an enumeration's raw values.
    static func choice<Choice: RawRepresentable & CaseIterable>(
        _ key: String, _ path: WritableKeyPath<Settings, Choice>, _ help: String
    ) -> Self where Choice.RawValue == String {
        Self(
            key, .string, default: defaults[keyPath: path].rawValue, unit: "", help: help,
            choices: Choice.allCases.map(\.rawValue)
        ) { s, settings in
            if let value = Choice(rawValue: s.string(key)) { settings[keyPath: path] = value }
        }
    }

    /// A list of strings (topics when `namesTopics`).
    static func strings(
        _ key: String, _ path: WritableKeyPath<Settings, [String]>, namesTopics: Bool = false, _ help: String
    ) -> Self {
        Self(
            key, .stringList, default: defaults[keyPath: path].joined(separator: ","), unit: "", help: help,
            namesTopics: namesTopics
        ) { $1[keyPath: path] = $0.list(key) }
    }

    /// Three numbers, x, y, z.
    static func vector(
        _ key: String, _ path: WritableKeyPath<Settings, Vector3>, unit: String = "", range: ClosedRange<Double>,
        _ help: String
    ) -> Self {
        let v = defaults[keyPath: path]
        return Self(
            key, .numberList(3), default: [v.x, v.y, v.z].map(SettingSpec.text).joined(separator: ","), unit: unit,
            help: help, range: range
        ) { s, settings in
            let n = s.numberList(key)
            settings[keyPath: path] = Vector3(n[0], n[1], n[2])
        }
    }

    /// A sensor's mounting rotation: a name or [roll, pitch, yaw] in degrees (see `MountingRotation`).
    static func rotation(_ key: String, _ path: WritableKeyPath<Settings, MountingRotation>, _ help: String) -> Self {
        Self(key, .rotation, default: defaults[keyPath: path].description, unit: "", help: help) { s, settings in
            if let rotation = MountingRotation.parse(s.string(key)) { settings[keyPath: path] = rotation }
        }
    }

    /// A sensor's mounting as a rotation, or `tf`: from the static transforms at run time.
    static func mounting(_ key: String, _ path: WritableKeyPath<Settings, SensorMounting>, _ help: String) -> Self {
        Self(
            key, .rotation, default: defaults[keyPath: path].description, unit: "", help: help, choices: ["tf"]
        ) { s, settings in
            if s.string(key) == "tf" {
                settings[keyPath: path] = .fromTF
            } else if let rotation = MountingRotation.parse(s.string(key)) {
                settings[keyPath: path] = .given(rotation)
            }
        }
    }

    /// Nine numbers, a 3x3 matrix row by row.
    static func matrix(
        _ key: String, _ path: WritableKeyPath<Settings, Matrix3>, range: ClosedRange<Double>, _ help: String
    ) -> Self {
        let m = defaults[keyPath: path]
        let rows = [m.row0, m.row1, m.row2].flatMap { [$0.x, $0.y, $0.z] }
        return Self(
            key, .numberList(9), default: rows.map(SettingSpec.text).joined(separator: ","), unit: "", help: help,
            range: range
        ) { s, settings in
            let n = s.numberList(key)
            settings[keyPath: path] = Matrix3(n[0], n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8])
        }
    }
}

extension SettingEntry {
    /// The setting every source has: pause while one of its readers is gone.
    static func pauseWithoutSubscribers(_ path: WritableKeyPath<Settings, Bool>) -> Self {
        .bool(
            "pause_without_subscribers", path,
            "pause while a stage reading this source is gone (e.g. being restarted), so nothing is sent into the void")
    }
}

/// Every setting of one stage type, in the order of the reference.
struct SettingTable<Settings: DeclaredSettings>: @unchecked Sendable {
    let entries: [SettingEntry<Settings>]

    init(_ entries: [SettingEntry<Settings>]) { self.entries = entries }

    var specs: [SettingSpec] { entries.map(\.spec) }

    /// The typed settings from validated values: `Settings()` with every entry written.
    func read(_ s: StageSettings) -> Settings {
        var settings = Settings()
        for entry in entries { entry.read(s, &settings) }
        return settings
    }

    /// What ties the table to the struct, checked by a test: the stored properties of `Settings` no
    /// entry sets, and the entries that set no property (each entry is given a value other than its
    /// default, and the properties whose value changed are the ones it sets).
    func coverage() -> (unsetProperties: [String], entriesWithoutProperty: [String]) {
        let defaults = StageSettings(defaultsOf: specs)
        let baseline = Self.properties(read(defaults))
        var set: Set<String> = []
        var without: [String] = []
        for entry in entries {
            var values = defaults
            guard let other = entry.spec.otherValue, (try? values.set(entry.spec, to: other)) != nil else {
                without.append(entry.spec.name)
                continue
            }
            let changed = Self.properties(read(values)).filter { baseline[$0.key] != $0.value }.map(\.key)
            if changed.isEmpty { without.append(entry.spec.name) }
            set.formUnion(changed)
        }
        return (baseline.keys.filter { !set.contains($0) }.sorted(), without)
    }

    private static func properties(_ value: Settings) -> [String: String] {
        var result: [String: String] = [:]
        for child in Mirror(reflecting: value).children {
            if let label = child.label { result[label] = String(reflecting: child.value) }
        }
        return result
    }
}
