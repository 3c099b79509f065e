import YAML

/// Every stage type a pipeline may use.
public enum StageType: String, Sendable, CaseIterable {
    // Sources
    case simulator, bag, lines
    // Transforms
    case calibration, gating, fusion, direction
    // Sinks
    case stdout, csv, record, publish, measure

    public var isSource: Bool { self == .simulator || self == .bag || self == .lines }
    public var isSink: Bool { self == .stdout || self == .csv || self == .record || self == .publish || self == .measure }

    /// The settings this type accepts: name, kind, default (nil = required), documentation.
    public var schema: [SettingSpec] {
        switch self {
        case .simulator: return [
            SettingSpec("scenario", .string, "default", "default | figure_eight | walking | rest | plausible_disturbance"),
            SettingSpec("seed", .integer, "1", "simulator seed"),
            SettingSpec("rate_hz", .number, "100", "samples per second"),
            SettingSpec("duration", .number, "0", "seconds to run; 0 = until stopped"),
            SettingSpec("realtime", .bool, "true", "pace samples to the wall clock; false = as fast as possible"),
            SettingSpec("stamp", .string, "simulated", "simulated: header stamps from simulation time; wall: the wall clock at sending (for latency measurements)"),
            SettingSpec("hard_iron_ut", .numberList(3), "0,0,0", "hard-iron offset the simulated magnetometer adds, microtesla"),
            SettingSpec("pause_without_subscribers", .bool, "true", "pause while a stage reading this source is gone (e.g. being restarted), so nothing is sent into the void"),
        ]
        case .bag: return [
            SettingSpec("path", .string, nil, "rosbag2 directory or .mcap / .db3 file"),
            SettingSpec("imu_topic", .string, "/imu/data_raw", "bag topic with sensor_msgs/msg/Imu"),
            SettingSpec("mag_topic", .string, "/imu/mag", "bag topic with sensor_msgs/msg/MagneticField"),
            SettingSpec("rate", .number, "0", "playback speed: 1 = real time, 2 = twice, 0 = as fast as possible"),
            SettingSpec("start", .number, "0", "seconds to skip from the start"),
            SettingSpec("duration", .number, "0", "seconds to play; 0 = all"),
            SettingSpec("loop", .bool, "false", "start again at the end"),
            SettingSpec("salvage", .bool, "false", "read past damage, reporting it"),
            SettingSpec("time", .string, "header", "header: keep the header stamps; log: stamp each message with its log time"),
            SettingSpec("fix_topic", .string, "", "bag topic with sensor_msgs/msg/NavSatFix to pass on as 'fix' ('' = none)"),
            SettingSpec("progress", .bool, "true", "progress bar on stderr when it is a terminal"),
            SettingSpec("pause_without_subscribers", .bool, "true", "pause while a stage reading this source is gone (e.g. being restarted), so nothing is sent into the void"),
        ]
        case .lines: return [
            SettingSpec("device", .string, "-", "'-' for stdin, or a serial device such as /dev/ttyUSB0"),
            SettingSpec("baud", .integer, "115200", "serial speed (devices only)"),
            SettingSpec("pause_without_subscribers", .bool, "true", "pause while a stage reading this source is gone (e.g. being restarted), so nothing is sent into the void"),
        ]
        case .calibration: return [
            SettingSpec("hard_iron_ut", .numberList(3), "0,0,0", "fixed hard-iron offset subtracted from the field, microtesla"),
            SettingSpec("soft_iron", .numberList(9), "1,0,0,0,1,0,0,0,1", "fixed row-major matrix applied after the offset"),
            SettingSpec("online", .bool, "false", "learn hard and soft iron from normal motion (the fixed values are the start)"),
            SettingSpec("file", .string, "", "calibration file: loaded at start, saved (atomically) when a better calibration is accepted"),
            SettingSpec("prompt", .bool, "true", "allow the status to ask for the figure-eight motion"),
            SettingSpec("status_seconds", .number, "1", "publish calibration/status this often (and on every change)"),
            SettingSpec("gyro_bias", .bool, "true", "measure the gyro bias at rest and remove it before fusion"),
        ]
        case .gating: return [
            SettingSpec("expected_strength_ut", .number, "0", "expected field strength, microtesla; 0 = from the World Magnetic Model position below, else the calibration radius, else learned"),
            SettingSpec("expected_dip_deg", .number, "0", "expected dip, degrees; used with expected_strength_ut"),
            SettingSpec("latitude", .string, "", "WGS-84 latitude, degrees, for the World Magnetic Model's expected field"),
            SettingSpec("longitude", .string, "", "longitude, degrees (with latitude)"),
            SettingSpec("height_km", .number, "0", "height above the ellipsoid, km"),
            SettingSpec("date", .string, "", "decimal year for the model; '' = today"),
            SettingSpec("strength_tolerance", .number, "0.1", "relative strength tolerance"),
            SettingSpec("dip_tolerance_deg", .number, "5", "dip tolerance, degrees"),
            SettingSpec("drop", .bool, "false", "drop flagged magnetometer samples instead of passing them on"),
            SettingSpec("status_seconds", .number, "1", "publish interference/status this often (and on every change)"),
        ]
        case .fusion: return [
            SettingSpec("filter", .string, "kalman", "kalman | complementary"),
            SettingSpec("sensor_latency", .number, "0", "IMU output latency to predict over, seconds"),
            SettingSpec("reference_offset_deg", .number, "0", "subtracted from the heading ('this direction is zero')"),
            SettingSpec("frame_id", .string, "", "frame_id of the outputs; '' = that of the IMU messages"),
            SettingSpec("latitude", .string, "", "WGS-84 latitude for the declination (true heading); '' = from fix messages if any"),
            SettingSpec("longitude", .string, "", "longitude, degrees (with latitude)"),
            SettingSpec("height_km", .number, "0", "height above the ellipsoid, km"),
            SettingSpec("date", .string, "", "decimal year for the model; '' = the date of each sample"),
        ]
        case .direction: return [
            SettingSpec("min_speed", .number, "2", "GPS course only above this speed, m/s"),
            SettingSpec("max_course_accuracy_deg", .number, "15", "GPS course only with an accuracy at least this good, degrees"),
            SettingSpec("max_compass_accuracy_deg", .number, "30", "compass heading only with an accuracy at least this good, degrees"),
            SettingSpec("default_position_sigma_m", .number, "5", "position error assumed when a fix gives no covariance, metres"),
        ]
        case .stdout: return [
            SettingSpec("format", .string, "text", "text | json"),
            SettingSpec("topics", .stringList, "heading", "topics to print"),
            SettingSpec("min_change_deg", .number, "1", "print a heading only after it changed this much (0 = every update)"),
        ]
        case .csv: return [
            SettingSpec("path", .string, nil, "output file: t,qw,qx,qy,qz per imu/data message (BROAD scorer contract)"),
            SettingSpec("accuracy_path", .string, "", "optional second file: t,heading_deg,accuracy_deg,flags per heading message"),
        ]
        case .record: return [
            SettingSpec("path", .string, nil, "rosbag2 directory (or .mcap / .db3 file) to create"),
            SettingSpec("storage", .string, "mcap", "mcap | sqlite3 (directories)"),
            SettingSpec("compression", .string, "zstd", "zstd | lz4 | none (MCAP chunks)"),
            SettingSpec("topics", .stringList, "heading,imu/data", "topics to record"),
        ]
        case .measure: return [
            SettingSpec("topic", .string, "heading", "topic to count; with wall-clock stamps, latency = arrival - header stamp"),
            SettingSpec("skip_seconds", .number, "1", "leave the first seconds (connection warm-up) out of the latency statistics"),
            SettingSpec("report_path", .string, "", "also write the summary as one JSON line to this file"),
        ]
        case .publish: return [
            SettingSpec("bind", .string, "tcp://127.0.0.1:5600", "address subscribers connect to (loopback unless given otherwise)"),
            SettingSpec("topics", .stringList, "heading,imu/data", "topics to publish"),
            SettingSpec("encoding", .string, "cdr", "cdr | json"),
            SettingSpec("latest_only", .bool, "false", "live use: never queue; a slow subscriber sees the newest message (drops counted)"),
            SettingSpec("high_water_mark", .integer, "10000", "messages queued per subscriber before back-pressure (or drops when latest_only)"),
            SettingSpec("wait_for_subscribers", .integer, "0", "hold the stream until this many subscribers are connected"),
            SettingSpec("min_change_deg", .number, "1", "publish a heading (or direction) only after it changed this much (0 = every update)"),
        ]
        }
    }
}

/// One accepted setting.
public struct SettingSpec: Sendable {
    public enum Kind: Sendable, Equatable {
        case string, number, integer, bool, stringList, numberList(Int)
        var name: String {
            switch self {
            case .string: return "a string"
            case .number: return "a number"
            case .integer: return "an integer"
            case .bool: return "true or false"
            case .stringList: return "a list of strings"
            case .numberList(let n): return "a list of \(n) numbers"
            }
        }
    }
    public let name: String, kind: Kind, defaultValue: String?, help: String
    init(_ name: String, _ kind: Kind, _ defaultValue: String?, _ help: String) {
        self.name = name; self.kind = kind; self.defaultValue = defaultValue; self.help = help
    }
}

/// A stage's settings, type-checked against its schema, defaults filled in.
public struct StageSettings: Sendable {
    var strings: [String: String] = [:]
    var numbers: [String: Double] = [:]
    var lists: [String: [String]] = [:]

    public func string(_ key: String) -> String { strings[key] ?? "" }
    public func number(_ key: String) -> Double { numbers[key] ?? 0 }
    public func integer(_ key: String) -> Int { Int(numbers[key] ?? 0) }
    public func bool(_ key: String) -> Bool { numbers[key] == 1 }
    public func list(_ key: String) -> [String] { lists[key] ?? [] }
    public func numberList(_ key: String) -> [Double] { (lists[key] ?? []).compactMap(Double.init) }

    init(type: StageType, stage: String, at stageMark: YAMLMark, nodes: [(key: YAMLNode, value: YAMLNode)], file: String,
         environment: [String: String]) throws(PipelineConfigError) {
        let schema = type.schema
        var given: [String: YAMLNode] = [:]
        for (k, v) in nodes {
            guard let name = k.scalar, let spec = schema.first(where: { $0.name == name }) else {
                throw PipelineConfigError(file: file, mark: k.mark, message: "unknown setting '\(k.scalar ?? k.kind)' for \(type.rawValue) stage '\(stage)' (accepted: \(schema.map(\.name).joined(separator: ", ")))")
            }
            _ = spec
            given[name] = v
        }
        for spec in schema {
            let text: String
            var listItems: [String]?
            let where_: YAMLMark
            if let node = given[spec.name] {
                where_ = node.mark
                func bad() -> PipelineConfigError {
                    PipelineConfigError(file: file, mark: node.mark, message: "'\(spec.name)' of stage '\(stage)' must be \(spec.kind.name), found \(node.kind)\(node.scalar.map { " '\($0)'" } ?? "")")
                }
                switch spec.kind {
                case .stringList, .numberList:
                    guard let items = node.sequence else { throw bad() }
                    var values: [String] = []
                    for item in items {
                        guard let s = item.scalar, !item.isNull else { throw bad() }
                        values.append(try substitute(s, item, environment, file))
                    }
                    listItems = values
                    text = ""
                default:
                    guard let s = node.scalar, !node.isNull else { throw bad() }
                    text = try substitute(s, node, environment, file)
                }
            } else {
                guard let d = spec.defaultValue else {
                    throw PipelineConfigError(file: file, mark: stageMark, message: "\(type.rawValue) stage '\(stage)' needs '\(spec.name)' (\(spec.help))")
                }
                where_ = YAMLMark(line: 0, column: 0)
                text = d
                if case .stringList = spec.kind { listItems = d.isEmpty ? [] : d.split(separator: ",").map(String.init) }
                if case .numberList = spec.kind { listItems = d.split(separator: ",").map(String.init) }
            }
            func typeError(_ detail: String) -> PipelineConfigError {
                PipelineConfigError(file: file, mark: where_, message: "'\(spec.name)' of stage '\(stage)' must be \(spec.kind.name)\(detail)")
            }
            switch spec.kind {
            case .string: strings[spec.name] = text
            case .number:
                guard let d = Double(text), d.isFinite else { throw typeError(", found '\(text)'") }
                numbers[spec.name] = d
            case .integer:
                guard let n = Int(text) else { throw typeError(", found '\(text)'") }
                numbers[spec.name] = Double(n)
            case .bool:
                switch text {
                case "true", "yes", "on": numbers[spec.name] = 1
                case "false", "no", "off": numbers[spec.name] = 0
                default: throw typeError(", found '\(text)'")
                }
            case .stringList: lists[spec.name] = listItems ?? []
            case .numberList(let n):
                let items = listItems ?? []
                guard items.count == n, items.allSatisfy({ Double($0)?.isFinite == true }) else { throw typeError(", found \(items.count) item(s)") }
                lists[spec.name] = items
            }
        }
        try validateChoices(type: type, stage: stage, given: given, file: file)
    }

    /// Settings with a fixed set of values.
    func validateChoices(type: StageType, stage: String, given: [String: YAMLNode], file: String) throws(PipelineConfigError) {
        let choices: [String: [String]] = [
            "scenario": ["default", "figure_eight", "walking", "rest", "plausible_disturbance"], "filter": ["kalman", "complementary"],
            "format": ["text", "json"], "time": ["header", "log"], "stamp": ["simulated", "wall"], "storage": ["mcap", "sqlite3"], "compression": ["zstd", "lz4", "none"], "encoding": ["cdr", "json"],
        ]
        for (key, allowed) in choices {
            guard let value = strings[key], type.schema.contains(where: { $0.name == key }) else { continue }
            if !allowed.contains(value) {
                throw PipelineConfigError(file: file, mark: given[key]?.mark ?? YAMLMark(line: 0, column: 0),
                                          message: "'\(key)' of stage '\(stage)' must be one of \(allowed.joined(separator: ", ")), found '\(value)'")
            }
        }
        for key in ["rate_hz"] where type.schema.contains(where: { $0.name == key }) && number(key) <= 0 {
            throw PipelineConfigError(file: file, mark: given[key]?.mark ?? YAMLMark(line: 0, column: 0), message: "'\(key)' of stage '\(stage)' must be positive")
        }
        for key in ["rate", "duration", "start", "sensor_latency", "min_change_deg"] where type.schema.contains(where: { $0.name == key }) && number(key) < 0 {
            throw PipelineConfigError(file: file, mark: given[key]?.mark ?? YAMLMark(line: 0, column: 0), message: "'\(key)' of stage '\(stage)' must not be negative")
        }
    }
}
