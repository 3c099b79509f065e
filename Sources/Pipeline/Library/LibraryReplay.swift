import Foundation
import CompassCore
import YAML

/// `fusion-node replay BAG --csv Q --accuracy-csv A [options]` as a function, for the library: the same
/// graph (`ProcessingGraphStages`), run in this process; the estimates go to the two CSV files exactly
/// as the command writes them.
public struct LibraryReplay: Sendable {
    /// What the replay is asked, as a YAML mapping of options (the library's callers pass one):
    ///   calibration: online (default) | none | PATH (a calibration file, applied without learning)
    ///   imu_rotation, mag_rotation: as --imu-rotation, --mag-rotation
    ///   filter, smooth, sensor_latency_s: the fusion stage's (as --filter, --smooth, --sensor-latency)
    ///   imu_topic, mag_topic, start_s, duration_s: the bag source's
    ///   STAGE.SETTING: any other setting of a stage of the graph (as --set STAGE.SETTING=VALUE)
    public struct Options: Sendable {
        var calibration = "online"
        var mounting = ProcessingGraphStages.Mounting()
        var overrides: [SettingOverride] = []

        static let shorthands: [String: String] = [
            "filter": "fusion", "smooth": "fusion", "sensor_latency_s": "fusion", "imu_topic": "bag",
            "mag_topic": "bag", "start_s": "bag", "duration_s": "bag",
        ]

        public init(yaml text: String) throws(FusionEngineError) {
            for (k, v) in try FusionEngine.mapping(text, named: "options").entries {
                guard let key = k.scalar, let value = v.scalar ?? Self.flow(v) else {
                    throw FusionEngineError(message: "options, \(k.mark): expected option: value")
                }
                switch key {
                case "calibration": calibration = value
                case "imu_rotation": mounting.imuRotation = value
                case "mag_rotation": mounting.magRotation = value
                default:
                    let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
                    guard let stage = Self.shorthands[key] ?? (parts.count == 2 ? parts[0] : nil) else {
                        throw FusionEngineError(
                            message: "options, \(k.mark): unknown option '\(key)' (calibration, imu_rotation, "
                                + "mag_rotation, \(Self.shorthands.keys.sorted().joined(separator: ", ")), "
                                + "or STAGE.SETTING)")
                    }
                    overrides.append(
                        SettingOverride(
                            stage: stage, setting: parts.count == 2 ? parts[1] : key, value: value,
                            origin: "option \(key)"))
                }
            }
        }

        /// A flow sequence as the override syntax writes it: "[a, b]".
        static func flow(_ node: YAMLNode) -> String? {
            guard let items = node.sequence?.map(\.scalar), items.allSatisfy({ $0 != nil }) else { return nil }
            return "[" + items.map { $0! }.joined(separator: ", ") + "]"
        }
    }

    public let bagPath: String
    public let options: Options

    public init(bagPath: String, options: Options) {
        self.bagPath = bagPath
        self.options = options
    }

    /// The pipeline file the replay runs, writing `quaternionCSV` and `accuracyCSV`.
    func config(quaternionCSV: String, accuracyCSV: String) throws -> PipelineConfig {
        let calibrate = options.calibration != "none"
        let file = ["online", "none"].contains(options.calibration) ? nil : options.calibration
        if let file, case .failure(let refusal) = CalibrationFile.load(file) {
            throw FusionEngineError(message: "calibration file \(file): \(refusal.reason)")
        }
        let stages: [(String, YAMLValue)] =
            [("bag", .mapping([("type", .string("bag")), ("path", .string(bagPath)), ("progress", .string("false"))]))]
            + ProcessingGraphStages.stages(
                after: "bag", calibrate: calibrate, mounting: options.mounting, calibrationFile: file)
            + [
                (
                    "csv",
                    .mapping([
                        ("type", .string("csv")), ("inputs", .sequence([.string("fusion")])),
                        ("path", .string(quaternionCSV)), ("accuracy_path", .string(accuracyCSV)),
                    ])
                )
            ]
        let text = try YAMLEmitter.emit(.mapping([("name", .string("replay")), ("stages", .mapping(stages))]))
        return try PipelineConfig.parse(
            text, file: "<library replay>", environment: [:], overrides: options.overrides)
    }

    /// Whether the options make a valid graph for this bag (settings, names, values), without reading
    /// the bag: throws what `run` would throw for them.
    public func check() throws {
        _ = try config(quaternionCSV: "/dev/null", accuracyCSV: "/dev/null")
    }

    /// Runs the replay to its end (blocking the calling thread, which must not be one of Swift
    /// concurrency's); the stages' reports. `log` receives the lines `fusion-node replay` prints on
    /// standard error while it runs (calibrations accepted, warnings), from the stages' tasks. Throws for
    /// a graph the options make invalid, a bag that cannot be read, or nothing fused.
    public func run(
        quaternionCSV: String, accuracyCSV: String, log: @escaping @Sendable (String) -> Void = { _ in }
    ) throws -> [StageReport] {
        let config = try self.config(quaternionCSV: quaternionCSV, accuracyCSV: accuracyCSV)
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            do {
                outcome.set(.success(try await PipelineRunner.runAll(config, stop: StopToken(), log: log)))
            } catch {
                outcome.set(.failure(error))
            }
            done.signal()
        }
        done.wait()
        let reports = try outcome.get()
        guard let fused = reports.first(where: { $0.stage == "fusion" }), fused.published > 0 else {
            let source = reports.first { $0.stage == "bag" }.map { " (\($0.notes.joined(separator: "; ")))" } ?? ""
            throw FusionEngineError(message: "\(bagPath): nothing was fused\(source)")
        }
        return reports
    }

    /// The run's result, handed from the task to the waiting thread.
    final class Outcome: @unchecked Sendable {
        private let lock = NSLock()
        private var result: Result<[StageReport], any Error>?
        func set(_ r: Result<[StageReport], any Error>) { lock.withLock { result = r } }
        func get() throws -> [StageReport] { try lock.withLock { result! }.get() }
    }
}

/// What a replay wrote in its two CSV files, read back as columns (the same numbers: the files print
/// each value so that it reads back exactly).
public struct ReplayColumns: Sendable {
    public var timeSeconds: [Double] = []
    /// w, x, y, z per estimate.
    public var quaternions: [Double] = []
    /// NaN where the file leaves the value empty.
    public var headingDegrees: [Double] = []
    public var accuracyDegrees: [Double] = []
    /// `FusionFlags` raw values, from the names the file gives.
    public var flags: [UInt32] = []

    public var count: Int { timeSeconds.count }

    /// Reads the files `LibraryReplay.run` wrote (as bytes: a replay's files have a row per IMU sample,
    /// and splitting them as Swift strings cost as much as the replay).
    public init(quaternionCSV: String, accuracyCSV: String) throws(FusionEngineError) {
        // The two files on two threads: reading them back is most of what the library adds to a replay.
        let parts = Parts()
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            if i == 0 {
                parts.orientations = Result { () throws(FusionEngineError) in try Self.orientations(quaternionCSV) }
            } else {
                parts.headings = Result { () throws(FusionEngineError) in try Self.headings(accuracyCSV) }
            }
        }
        (timeSeconds, quaternions) = try parts.orientations!.get()
        (headingDegrees, accuracyDegrees, flags) = try parts.headings!.get()
        guard flags.count == timeSeconds.count else {
            throw FusionEngineError(
                message: "the replay wrote \(timeSeconds.count) orientations and \(flags.count) headings")
        }
    }

    /// Each file's columns, written by one thread each and read after both have finished.
    final class Parts: @unchecked Sendable {
        var orientations: Result<([Double], [Double]), FusionEngineError>?
        var headings: Result<([Double], [Double], [UInt32]), FusionEngineError>?
    }

    static func orientations(_ path: String) throws(FusionEngineError) -> ([Double], [Double]) {
        var times: [Double] = [], quaternions: [Double] = []
        try rows(path, columns: 5) { fields, line throws(FusionEngineError) in
            for i in 0..<5 {
                guard let v = fields.number(i) else {
                    throw FusionEngineError(message: "\(path):\(line): field \(i + 1) is not a number")
                }
                if i == 0 { times.append(v) } else { quaternions.append(v) }
            }
        }
        return (times, quaternions)
    }

    static func headings(_ path: String) throws(FusionEngineError) -> ([Double], [Double], [UInt32]) {
        var names: [String: UInt32] = [:]
        for (flag, name) in FusionFlags.names { names[name] = flag.rawValue }
        var headings: [Double] = [], bounds: [Double] = [], flags: [UInt32] = []
        var known: [String: UInt32] = [:]
        try rows(path, columns: 4) { fields, line throws(FusionEngineError) in
            headings.append(fields.number(1) ?? .nan)
            bounds.append(fields.number(2) ?? .nan)
            let text = fields.text(3)
            if let bits = known[text] {
                flags.append(bits)
                return
            }
            var bits: UInt32 = 0
            for name in text.split(separator: "|") {
                guard let bit = names[String(name)] else {
                    throw FusionEngineError(message: "\(path):\(line): unknown flag '\(name)'")
                }
                bits |= bit
            }
            known[text] = bits
            flags.append(bits)
        }
        return (headings, bounds, flags)
    }

    /// One row's fields: offsets into the file's bytes.
    struct Fields {

        let base: UnsafePointer<CChar>
        var starts: [Int] = []
        var ends: [Int] = []

        /// The field as a number; nil when it is empty or not one.
        func number(_ i: Int) -> Double? {
            guard ends[i] > starts[i] else { return nil }
            // Swift's parse reads '.' whatever the C locale (a C caller may have set another).
            return Double(text(i))
        }

        func text(_ i: Int) -> String {
            String(
                decoding: UnsafeRawBufferPointer(start: base + starts[i], count: ends[i] - starts[i]), as: UTF8.self)
        }
    }

    /// Each row after the header, as fields, with its line number.
    static func rows(
        _ path: String, columns: Int, _ body: (Fields, Int) throws(FusionEngineError) -> Void
    ) throws(FusionEngineError) {
        guard let bytes = FileManager.default.contents(atPath: path).map({ [UInt8]($0) }) else {
            throw FusionEngineError(message: "\(path): cannot be read")
        }
        guard !bytes.isEmpty else { throw FusionEngineError(message: "\(path): empty, not even a header") }
        try bytes.withUnsafeBufferPointer { (buffer) throws(FusionEngineError) in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            var fields = Fields(base: base)
            var line = 1, start = 0
            for i in 0..<buffer.count {
                let b = buffer[i]
                guard b == UInt8(ascii: ",") || b == UInt8(ascii: "\n") else { continue }
                fields.starts.append(start)
                fields.ends.append(i)
                start = i + 1
                guard b == UInt8(ascii: "\n") else { continue }
                if line > 1 {
                    guard fields.starts.count == columns else {
                        throw FusionEngineError(
                            message: "\(path):\(line): \(fields.starts.count) fields, expected \(columns)")
                    }
                    try body(fields, line)
                }
                fields.starts.removeAll(keepingCapacity: true)
                fields.ends.removeAll(keepingCapacity: true)
                line += 1
            }
        }
    }
}
