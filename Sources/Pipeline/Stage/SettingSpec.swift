import CompassCore

/// One setting a stage type accepts: its name, kind, default, documentation and the values it may
/// take. The registry's specs are the single source for validation, `fusion-node stages` and the
/// stage reference (docs/stages.md).
public struct SettingSpec: Sendable {
    public enum Kind: Sendable, Equatable {
        case string, number, integer, bool, stringList, numberList(Int)
        /// A number that may be left empty ("" = not given), such as a latitude.
        case optionalNumber
        /// A sensor's mounting: a rotation name (`yaw_90`) or `[roll, pitch, yaw]` in degrees.
        case rotation
        /// A source's `magnetometers`: a list of {name, topic, rotation} mappings (SourceMagnetometers).
        case magnetometerList

        var article: String {
            switch self {
            case .string: return "a string"
            case .number: return "a number"
            case .integer: return "an integer"
            case .bool: return "true or false"
            case .stringList: return "a list of strings"
            case .numberList(let n): return "a list of \(n) numbers"
            case .optionalNumber: return "a number or \"\""
            case .rotation: return "a rotation name (none, yaw_90, roll_180, ...) or [roll, pitch, yaw] in degrees"
            case .magnetometerList: return "a list of {name, topic, rotation}"
            }
        }

        /// The kind as the stage reference prints it.
        public var referenceName: String {
            switch self {
            case .string: return "string"
            case .number: return "number"
            case .integer: return "integer"
            case .bool: return "bool"
            case .stringList: return "list of strings"
            case .numberList(let n): return "list of \(n) numbers"
            case .optionalNumber: return "number or \"\""
            case .rotation: return "rotation"
            case .magnetometerList: return "list of {name, topic, rotation}"
            }
        }
    }

    public let name: String
    public let kind: Kind
    /// The value used when the file does not give one, as text; nil = required.
    public let defaultValue: String?
    public let help: String
    /// The unit of a number ("" = none or in the help).
    public let unit: String
    /// The only values a string setting (or every item of a string list) may take; empty = any.
    public let choices: [String]
    /// The values a number, integer or optional number (or every item of a number list) may take.
    public let range: ClosedRange<Double>?
    /// The value names pipeline topics the stage reads (written with or without a leading slash):
    /// checked against what the stages upstream publish.
    public let namesTopics: Bool
    /// The value names a file the run writes: one that exists is refused before the run starts unless
    /// the run may overwrite (`--overwrite`).
    public let writesFile: Bool
    /// The value names a recording the run creates: one that exists is refused before the run starts,
    /// `--overwrite` or not (a recording is never replaced).
    public let writesRecording: Bool
    /// Names the setting had before (a duration gained its `_s`): a file or `--set` may still use them,
    /// with a warning naming the new one.
    public internal(set) var formerNames: [String] = []

    /// True when `key` names this setting, by its name or a former one.
    public func accepts(_ key: String) -> Bool { key == name || formerNames.contains(key) }

    init(
        _ name: String, _ kind: Kind, _ defaultValue: String?, _ help: String, unit: String = "",
        choices: [String] = [], range: ClosedRange<Double>? = nil, namesTopics: Bool = false, writesFile: Bool = false,
        writesRecording: Bool = false
    ) {
        self.name = name
        self.kind = kind
        self.defaultValue = defaultValue
        self.help = help
        self.unit = unit
        self.choices = choices
        self.range = range
        self.namesTopics = namesTopics
        self.writesFile = writesFile
        self.writesRecording = writesRecording
    }

    /// A rotation setting's value as it is stored: a rotation name, one of `choices` (tf), or
    /// "roll,pitch,yaw" in degrees from `items` (or from `text` written as one list, as an environment
    /// variable gives "[0, 0, -90]" or "0,0,-90"); else what it must be instead, for "must be ...".
    /// The one check of a mounting rotation: settings, a source's `magnetometers` entries, the
    /// command line's extra magnetometers.
    public static func rotationValue(_ text: String, items given: [String] = [], choices: [String] = [])
        -> Result<String, RotationRefusal>
    {
        let article = Kind.rotation.article
        var items = given
        if items.isEmpty, text.contains(",") {
            items = text.filter { $0 != "[" && $0 != "]" && $0 != " " }.split(separator: ",").map(String.init)
        }
        if items.isEmpty, choices.contains(text) { return .success(text) }  // a word besides rotations (tf)
        if items.isEmpty {
            if text == "auto" {
                return .failure(
                    RotationRefusal(
                        detail: "\(article), found 'auto': a mounting found from motion is the calibration stage's "
                            + "detect_rotation: true"))
            }
            guard MountingRotation.named(text) != nil else {
                return .failure(
                    RotationRefusal(
                        detail: article + choices.map { " or \($0)" }.joined() + ", found '\(text)'"
                            + didYouMean(text, in: MountingRotation.names + choices)))
            }
            return .success(text)
        }
        guard items.count == 3 else {
            return .failure(RotationRefusal(detail: "\(article), found \(items.count) item(s)"))
        }
        for item in items {
            guard let d = Double(item), d.isFinite, (-360...360).contains(d) else {
                return .failure(RotationRefusal(detail: "\(article) (each angle -360 to 360), found '\(item)'"))
            }
        }
        return .success(items.joined(separator: ","))
    }

    /// Why a value is no rotation: what it must be instead ("a rotation name ..., found 'yaw_91'").
    public struct RotationRefusal: Error, Sendable {
        public let detail: String
    }

    /// The accepted values in words, for errors and the reference ("" when anything of the kind goes).
    public var acceptedValues: String {
        if kind == .rotation { return choices.isEmpty ? "" : "a rotation, or " + choices.joined(separator: " | ") }
        if !choices.isEmpty { return choices.joined(separator: " | ") }
        guard let range else { return "" }
        return "\(Self.text(range.lowerBound)) to \(Self.text(range.upperBound))"
    }

    /// A valid value other than the default, as text (for the test that ties a settings table to its
    /// struct); nil when the spec admits only one value.
    var otherValue: String? {
        let current = defaultValue ?? "x"  // a required value is "x" in `StageSettings(defaultsOf:)`
        if kind == .rotation { return current == "yaw_90" ? "none" : "yaw_90" }
        if let other = choices.first(where: { $0 != current }) { return other }
        func number(avoiding text: String) -> String? {
            let now = Double(text)
            let candidates = [range?.upperBound, range?.lowerBound, 1, 2].compactMap { $0 }
            return candidates.first { $0 != now }.map(Self.text)
        }
        switch kind {
        case .string: return current + "x"
        case .rotation: return current == "yaw_90" ? "none" : "yaw_90"
        case .bool: return current == "true" ? "false" : "true"
        case .number, .integer, .optionalNumber: return number(avoiding: current)
        case .stringList: return current.isEmpty ? "x" : ""
        case .magnetometerList: return nil
        case .numberList(let n):
            let first = current.split(separator: ",").first.map(String.init) ?? ""
            return number(avoiding: first).map { Array(repeating: $0, count: n).joined(separator: ",") }
        }
    }

    /// A bound as the user would write it: 3, 0.001, 1e+300.
    public static func text(_ x: Double) -> String {
        if x == x.rounded(), abs(x) < 1e15 { return String(Int(x)) }
        return String(x)
    }
}

extension SettingSpec {
    // Ranges shared by several stages: what a physical quantity or a device can take.

    /// Seconds of a run or a skip: 0 to about 11.6 days.
    static let secondsRange: ClosedRange<Double> = 0...1_000_000
    /// WGS-84 latitude, degrees.
    static let latitudeRange: ClosedRange<Double> = -90...90
    /// Longitude, degrees east (0 to 360 as well as -180 to 180).
    static let longitudeRange: ClosedRange<Double> = -360...360
    /// Heights the World Magnetic Model is meant for, km above the ellipsoid.
    static let heightRange: ClosedRange<Double> = -1...850
    /// Decimal years accepted as a date (the embedded World Magnetic Model covers 2025 to 2030; a
    /// stage says what it does outside that).
    static let yearRange: ClosedRange<Double> = 1900...2200
    /// Degrees of a heading change or an angle tolerance.
    static let degreesRange: ClosedRange<Double> = 0...360
}
