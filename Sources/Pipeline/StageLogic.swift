import Foundation
import CompassCore
import IMUSimulator
import WireFormat
import Bags
import MessageBus

/// Behaviour shared by all stage logics; each lives on its stage's thread only.
class StageLogicBase: @unchecked Sendable {
    var notes: [String] = []
    /// Seconds a source spent paused because a reader was missing (its wall-clock pacing leaves
    /// them out, so it resumes where it stopped instead of rushing to catch up).
    var pausedSeconds = 0.0
    /// True when `process` only observes (or drops nothing and changes nothing): the stage then
    /// forwards each received bus message as it came instead of re-encoding it.
    var forwardsUnchanged: Bool { false }
    /// False when the stage does not even need to look at the frames (an identity calibration): bus
    /// messages are then forwarded without being unpacked.
    var observesFrames: Bool { true }
}

/// A source: drives the stream, handing frames to `emit` (which applies back-pressure).
protocol SourceLogic: StageLogicBase {
    func run(emit: ([WireFrame]) throws -> Void) throws
    func finish() throws -> [WireFrame]
}

/// A transform or sink: turns each input frame into output frames (none for sinks), appended to
/// `output` (one buffer per drained batch, not an array per frame).
protocol TransformLogic: StageLogicBase {
    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws
    /// Called once every input has ended: flush and return the last frames.
    func finish() throws -> [WireFrame]
}

/// What an in-place stage read from one frame in its first pass, for its second.
enum InPlaceSample {
    case imu(header: RosHeader, angularVelocity: Vector3, linearAcceleration: Vector3, offset: Int?)
    case magnetometer(header: RosHeader, field: Vector3, offset: Int?)
    /// A frame the stage passes on untouched.
    case unchanged

    /// Where the vector the stage may change starts in the payload (little-endian payloads only).
    var offset: Int? {
        switch self {
        case .imu(_, _, _, let o), .magnetometer(_, _, let o): return o
        case .unchanged: return nil
        }
    }
}

/// A transform or sink that reads frames where they arrived: no frames decoded into arrays, no
/// copies. One that changes frames only in place (fixed-size vectors) or not at all passes each bus
/// message on as it came, patched where needed (`forwardsMessage`); one that makes new frames
/// (fusion) or none (a sink) publishes only those. Two passes keep it exact: only when every frame of
/// a message passed the first does the second change state and bytes; otherwise the message takes
/// the general path (`process`).
protocol InPlaceTransform: TransformLogic {
    /// False when the current settings need the general path (dropping frames, say).
    var worksInPlace: Bool { get }
    /// True when `apply` writes into payloads (a message shared with other readers is copied first).
    var writesInPlace: Bool { get }
    /// True when the (patched) message itself goes on; false when only the frames `apply` adds do.
    var forwardsMessage: Bool { get }
    /// First pass: what `apply` needs from this frame, or nil when the frame needs the general path.
    func inPlaceSample(_ frame: WireFrame.View) -> InPlaceSample?
    /// Second pass: updates the stage, patches the frame's payload where needed, appends frames to
    /// publish (after the message, when it goes on).
    func apply(_ sample: InPlaceSample, to frame: WireFrame.View, extra: inout [WireFrame]) throws
}

/// The IMU and magnetometer samples of a frame seen in place; nil for anything else or undecodable.
func decodeInPlace(_ frame: WireFrame.View) -> InPlaceSample? {
    guard frame.encoding == "cdr" else { return nil }
    let raw = UnsafeRawBufferPointer(frame.payload)
    switch frame.topic {
    case PipelineTopics.imuRaw where frame.type == ImuMessage.typeName:
        guard let m = try? CDRSamples.imu(raw) else { return nil }
        return .imu(header: m.header, angularVelocity: m.angularVelocity, linearAcceleration: m.linearAcceleration, offset: m.angularVelocityOffset)
    case PipelineTopics.magnetometer where frame.type == MagneticFieldMessage.typeName:
        guard let m = try? CDRSamples.magneticField(raw) else { return nil }
        return .magnetometer(header: m.header, field: m.field, offset: m.fieldOffset)
    default:
        return nil
    }
}

/// A frame a stage does not handle (type or encoding), counted and logged, never fatal.
struct UnexpectedFrame: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}

/// Topic names inside a pipeline.
public enum PipelineTopics {
    public static let imuRaw = "imu/data_raw"
    public static let magnetometer = "imu/mag"
    public static let heading = "heading"
    public static let imuFused = "imu/data"
    public static let fix = "fix"
    public static let direction = "direction"
    public static let calibrationStatus = "calibration/status"
    public static let interferenceStatus = "interference/status"
}

func makeStageLogic(_ config: StageConfig, log: @escaping @Sendable (String) -> Void) throws -> StageLogicBase {
    let s = config.settings
    switch config.type {
    case .simulator: return SimulatorSource(s)
    case .bag: return try BagSource(s, log: log)
    case .lines: return try LinesSource(s, log: log)
    case .calibration: return CalibrationStage(s, log: log)
    case .gating: return try GatingStage(s, log: log)
    case .fusion: return FusionStage(s)
    case .direction: return DirectionStage(s)
    case .stdout: return StdoutSink(s)
    case .csv: return try CSVSink(s)
    case .record: return try RecordSink(s)
    case .publish: return try PublishSink(s, log: log)
    case .measure: return MeasureSink(s)
    }
}

// MARK: - Shared message building

func imuFrame(_ m: ImuMessage, topic: String = PipelineTopics.imuRaw) -> WireFrame {
    WireFrame(topic: topic, type: ImuMessage.typeName, encoding: "cdr", payload: m.cdr())
}

func magFrame(_ m: MagneticFieldMessage) -> WireFrame {
    WireFrame(topic: PipelineTopics.magnetometer, type: MagneticFieldMessage.typeName, encoding: "cdr", payload: m.cdr())
}

/// The two outputs of a fusion update: gyrocompass_msgs/Heading and sensor_msgs/Imu with orientation.
public enum FusionMessages {
    public static func heading(_ o: FusionOutput, header: RosHeader, field: Vector3?) -> HeadingMessage {
        HeadingMessage(header: header, magneticHeading: o.headingDegrees ?? .nan, trueHeading: .nan,
                       headingAccuracy: o.headingAccuracyDegrees ?? .nan, declination: .nan, orientation: o.orientation,
                       magneticField: field.map { $0 * 1e-6 } ?? Vector3(.nan, .nan, .nan),
                       source: HeadingMessage.Source.fusion.rawValue, flags: o.flags.rawValue)
    }

    /// Orientation covariance: only the heading (about z) is estimated; x and y stay 0 (unknown).
    public static func imu(_ o: FusionOutput, header: RosHeader, sample: ImuSample) -> ImuMessage {
        var zCovariance = Covariance9.zero
        zCovariance.m8 = o.headingVarianceDegrees2.map { $0 * radiansPerDegree * radiansPerDegree } ?? 0
        return ImuMessage(header: header, orientation: o.orientation, orientationCovariance: zCovariance,
                          angularVelocity: sample.angularVelocity - o.gyroBias, angularVelocityCovariance: .zero,
                          linearAcceleration: sample.specificForce, linearAccelerationCovariance: .zero)
    }
}

// MARK: - Sources

/// The seeded simulator as a source.
final class SimulatorSource: StageLogicBase, SourceLogic {
    let settings: StageSettings
    init(_ s: StageSettings) { settings = s }

    func scenario() -> SimulationScenario {
        var s = SimulationScenario()
        s.seed = UInt64(max(0, settings.integer("seed")))
        s.sampleRateHz = settings.number("rate_hz")
        s.startHeadingDegrees = 30
        switch settings.string("scenario") {
        case "figure_eight": s.motion = [.rest(seconds: 3), .figureEight(seconds: 12), .turn(degreesPerSecond: 30, seconds: 6)]
        case "walking": s.motion = [.rest(seconds: 2), .walking(seconds: 30, stepsPerSecond: 1.8), .turn(degreesPerSecond: 30, seconds: 6)]
        case "rest": s.motion = [.rest(seconds: 60)]
        case "plausible_disturbance":
            // Heading 30, pitch 10; from 20 s a field of 1.5 uT south and 8 uT east: strength and dip stay
            // within tolerance, the compass turns by 24 degrees.
            s.motion = [.rest(seconds: 40)]
            s.startPitchDegrees = 10
            s.disturbances = [ScheduledDisturbance(startSeconds: 20, durationSeconds: 10, fieldMicrotesla: Vector3(8, -1.5, 0), rampSeconds: 0.2)]
        default:
            s.motion = [.rest(seconds: 3), .turn(degreesPerSecond: 45, seconds: 4),
                        .moveTo(headingDegrees: 120, pitchDegrees: 20, rollDegrees: -15, seconds: 2), .rest(seconds: 2),
                        .walking(seconds: 6, stepsPerSecond: 1.8), .figureEight(seconds: 8),
                        .moveTo(headingDegrees: 30, pitchDegrees: 0, rollDegrees: 0, seconds: 2)]
            s.disturbances = [ScheduledDisturbance(startSeconds: 16, durationSeconds: 3, fieldMicrotesla: Vector3(20, 0, 0))]
        }
        let h = settings.numberList("hard_iron_ut")
        s.sensors.hardIronMicrotesla = Vector3(h[0], h[1], h[2])
        s.loops = true
        s.startTime = 1_700_000_000
        return s
    }

    func run(emit: ([WireFrame]) throws -> Void) throws {
        var sim = IMUSimulator(scenario: scenario())
        let rate = settings.number("rate_hz")
        let total = settings.number("duration") > 0 ? Int((settings.number("duration") * rate).rounded()) : Int.max
        let realtime = settings.bool("realtime")
        let started = ProcessInfo.processInfo.systemUptime
        var batch: [WireFrame] = []
        var k = 0
        let wallStamps = settings.string("stamp") == "wall"
        while k < total, let x = sim.next() {
            let header = RosHeader(stamp: wallStamps ? wallClockNow() : RosTime(seconds: x.imu.timestamp), frameId: "imu_link")
            batch.append(imuFrame(ImuMessage(header: header, orientation: Quaternion(w: 1, x: 0, y: 0, z: 0),
                                              orientationCovariance: .notProvided, angularVelocity: x.imu.angularVelocity,
                                              angularVelocityCovariance: .zero, linearAcceleration: x.imu.specificForce, linearAccelerationCovariance: .zero)))
            batch.append(magFrame(MagneticFieldMessage(header: header, magneticField: x.magnetometer.fieldMicrotesla * 1e-6, magneticFieldCovariance: .zero)))
            k += 1
            if realtime {
                try emit(batch); batch.removeAll(keepingCapacity: true)
                let ahead = Double(k) / rate - (ProcessInfo.processInfo.systemUptime - started - pausedSeconds)
                if ahead > 0 { usleep(UInt32(ahead * 1e6)) }
            } else if batch.count >= 64 {
                try emit(batch); batch.removeAll(keepingCapacity: true)
            }
        }
        try emit(batch)
    }

    func finish() throws -> [WireFrame] { [] }
}

/// A recorded bag as a source: its IMU and magnetometer messages, remapped to the pipeline's topics,
/// forwarded as stored (no re-encoding), paced by log time when `rate` > 0.
final class BagSource: StageLogicBase, SourceLogic {
    let settings: StageSettings
    let bag: BagReader
    let log: @Sendable (String) -> Void
    init(_ s: StageSettings, log: @escaping @Sendable (String) -> Void) throws {
        settings = s
        self.log = log
        bag = try BagReader(path: s.string("path"))
        super.init()
        topicsListCache = try bag.topics()
    }
    var topicsListCache: [BagTopic] = []

    func run(emit: ([WireFrame]) throws -> Void) throws {
        let imuTopic = settings.string("imu_topic"), magTopic = settings.string("mag_topic"), fixTopic = settings.string("fix_topic")
        var options = BagReadOptions()
        options.topics = fixTopic.isEmpty ? [imuTopic, magTopic] : [imuTopic, magTopic, fixTopic]
        options.salvage = settings.bool("salvage")
        var first: UInt64?
        struct Stop: Error {}
        do { try bag.forEachMessage(options) { first = $0.logTime; throw Stop() } } catch is Stop {}
        guard let first else { notes.append("no messages on \(imuTopic) or \(magTopic)"); return }
        if settings.number("start") > 0 { options.startTime = first + UInt64(settings.number("start") * 1e9) }
        if settings.number("duration") > 0 { options.endTime = (options.startTime ?? first) + UInt64(settings.number("duration") * 1e9) }
        // The bag's own definitions decide how its payloads are read (see SchemaAdapter).
        var adapters: [String: SchemaAdapter] = [:]
        for topic in topicsListCache where topic.name == imuTopic || topic.name == magTopic {
            let schema = bag.schema(forTopic: topic.name)
            do {
                adapters[topic.name] = try SchemaAdapter(type: topic.type, schemaEncoding: schema?.encoding, schemaText: schema?.text)
            } catch {
                throw PipelineRunError.stageFailed(stage: "bag", reason: "\(settings.string("path")): topic \(topic.name): \(error)")
            }
            if adapters[topic.name]?.mode == .byName { notes.append("\(topic.name): read through the bag's own \(topic.type) definition") }
        }
        var undecodable = 0
        let rate = settings.number("rate")
        let logTime = settings.string("time") == "log"
        let total = try bag.topics().filter { $0.name == imuTopic || $0.name == magTopic }.reduce(0) { $0 + $1.messageCount }
        var progress = Progress(total: settings.bool("progress") ? total : 0)
        repeat {
            var batch: [WireFrame] = []
            var startWall: Double?, startLog: UInt64 = 0, pausedBefore = 0.0
            try bag.forEachMessage(options) { m in
                let topic = m.topic == imuTopic ? PipelineTopics.imuRaw : m.topic == magTopic ? PipelineTopics.magnetometer : PipelineTopics.fix
                var payload = m.data
                if let adapter = adapters[m.topic], adapter.mode == .byName {
                    do { payload = try adapter.standardPayload(m.data) } catch {
                        undecodable += 1
                        if undecodable <= 10 { log("bag: \(m.topic) at log time \(m.logTime): \(error)") }
                        return
                    }
                }
                if logTime && payload.count >= 12 && m.encoding == "cdr" {
                    // The header stamp (int32 sec, uint32 nanosec, little endian) follows the 4-byte encapsulation.
                    let sec = UInt32(truncatingIfNeeded: m.logTime / 1_000_000_000), ns = UInt32(m.logTime % 1_000_000_000)
                    for i in 0..<4 { payload[4 + i] = UInt8(truncatingIfNeeded: sec >> (8 * i)); payload[8 + i] = UInt8(truncatingIfNeeded: ns >> (8 * i)) }
                }
                batch.append(WireFrame(topic: topic, type: m.type, encoding: m.encoding, payload: payload))
                progress.advance()
                if rate > 0 {
                    if startWall == nil { startWall = ProcessInfo.processInfo.systemUptime; startLog = m.logTime; pausedBefore = pausedSeconds }
                    let due = Double(m.logTime - startLog) * 1e-9 / rate
                    let ahead = due - (ProcessInfo.processInfo.systemUptime - startWall! - (pausedSeconds - pausedBefore))
                    if ahead > 0.0005 { try emit(batch); batch.removeAll(keepingCapacity: true); usleep(UInt32(ahead * 1e6)) }
                } else if batch.count >= 64 {
                    try emit(batch); batch.removeAll(keepingCapacity: true)
                }
            }
            try emit(batch)
            for d in bag.damage { log("bag: damage: \(d)") }
        } while settings.bool("loop") && !PipelineSignals.stopRequested
        progress.finish()
        if undecodable > 0 { notes.append("\(undecodable) undecodable message(s) skipped") }
    }

    func finish() throws -> [WireFrame] { [] }
}

/// Text lines from stdin or a serial device, one sample per line:
///   t,gx,gy,gz,ax,ay,az,mx,my,mz      (seconds, rad/s, m/s^2, tesla)
/// or the same fields as an NMEA-style sentence "$GCIMU,t,...,mz*HH" with the usual XOR checksum.
/// Malformed lines are counted and logged with their line number.
final class LinesSource: StageLogicBase, SourceLogic {
    let handle: FileHandle
    let device: String
    let log: @Sendable (String) -> Void
    var malformed = 0

    init(_ s: StageSettings, log: @escaping @Sendable (String) -> Void) throws {
        self.log = log
        device = s.string("device")
        if device == "-" {
            handle = FileHandle.standardInput
        } else {
            let fd = open(device, O_RDONLY | O_NOCTTY)
            guard fd >= 0 else { throw PipelineRunError.stageFailed(stage: "lines", reason: "cannot open \(device): \(String(cString: strerror(errno)))") }
            if isatty(fd) == 1 {
                var tio = termios()
                tcgetattr(fd, &tio)
                cfmakeraw(&tio)
                let speeds: [Int: speed_t] = [9600: speed_t(B9600), 19200: speed_t(B19200), 38400: speed_t(B38400), 57600: speed_t(B57600),
                                              115200: speed_t(B115200), 230400: speed_t(B230400), 460800: speed_t(B460800), 921600: speed_t(B921600)]
                guard let speed = speeds[s.integer("baud")] else {
                    throw PipelineRunError.stageFailed(stage: "lines", reason: "unsupported baud \(s.integer("baud")) (use \(speeds.keys.sorted().map(String.init).joined(separator: ", ")))")
                }
                cfsetispeed(&tio, speed); cfsetospeed(&tio, speed)
                tcsetattr(fd, TCSANOW, &tio)
            }
            handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        }
    }

    /// Parses one line; nil with a reason for a bad one.
    static func parse(_ line: Substring) -> Result<(Double, Vector3, Vector3, Vector3), UnexpectedFrame> {
        var body = line
        if body.hasPrefix("$") {
            guard let star = body.lastIndex(of: "*") else { return .failure(UnexpectedFrame(reason: "sentence without '*' checksum")) }
            let payload = body[body.index(after: body.startIndex)..<star]
            let given = body[body.index(after: star)...].trimmingCharacters(in: .whitespaces)
            let sum = payload.utf8.reduce(UInt8(0)) { $0 ^ $1 }
            guard let expected = UInt8(given, radix: 16), expected == sum else {
                return .failure(UnexpectedFrame(reason: "checksum \(given) does not match \(String(sum, radix: 16, uppercase: true))"))
            }
            guard payload.hasPrefix("GCIMU,") else { return .failure(UnexpectedFrame(reason: "unknown sentence \(payload.prefix(6))")) }
            body = payload.dropFirst(6)
        }
        let fields = body.split(separator: ",", omittingEmptySubsequences: false).map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard fields.count == 10 else { return .failure(UnexpectedFrame(reason: "expected 10 comma-separated numbers, found \(fields.count) fields")) }
        guard let values = Optional(fields.compactMap { $0 }), values.count == 10, values.allSatisfy(\.isFinite) else {
            return .failure(UnexpectedFrame(reason: "a field is not a finite number"))
        }
        return .success((values[0], Vector3(values[1], values[2], values[3]), Vector3(values[4], values[5], values[6]), Vector3(values[7], values[8], values[9])))
    }

    func run(emit: ([WireFrame]) throws -> Void) throws {
        var pending = Data()
        var lineNumber = 0
        while !PipelineSignals.stopRequested {
            let chunk = handle.availableData
            if chunk.isEmpty { break }   // end of file
            pending.append(chunk)
            var frames: [WireFrame] = []
            while let newline = pending.firstIndex(of: 0x0A) {
                let lineData = pending[pending.startIndex..<newline]
                pending.removeSubrange(pending.startIndex...newline)
                lineNumber += 1
                let text = String(decoding: lineData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                if text.isEmpty || text.hasPrefix("#") { continue }
                switch Self.parse(Substring(text)) {
                case .success(let (t, gyro, accel, mag)):
                    let header = RosHeader(stamp: RosTime(seconds: t), frameId: "imu_link")
                    frames.append(imuFrame(ImuMessage(header: header, orientation: Quaternion(w: 1, x: 0, y: 0, z: 0),
                                                      orientationCovariance: .notProvided, angularVelocity: gyro,
                                                      angularVelocityCovariance: .zero, linearAcceleration: accel, linearAccelerationCovariance: .zero)))
                    frames.append(magFrame(MagneticFieldMessage(header: header, magneticField: mag, magneticFieldCovariance: .zero)))
                case .failure(let why):
                    malformed += 1
                    if malformed <= 20 { log("lines: \(device) line \(lineNumber): \(why)") }
                }
            }
            try emit(frames)
        }
        if malformed > 0 { notes.append("\(malformed) malformed line(s)") }
    }

    func finish() throws -> [WireFrame] { [] }
}

/// A progress line on stderr (elapsed, rate, ETA), only when stderr is a terminal.
struct Progress {
    let total: Int
    let enabled: Bool
    var done = 0
    var lastDrawn = 0.0
    let started = ProcessInfo.processInfo.systemUptime
    init(total: Int) { self.total = total; enabled = total > 0 && isatty(2) == 1 }

    mutating func advance() {
        done += 1
        guard enabled, done % 1024 == 0 else { return }
        let now = ProcessInfo.processInfo.systemUptime
        guard now - lastDrawn > 0.1 else { return }
        lastDrawn = now
        draw(now)
    }

    func draw(_ now: Double) {
        let elapsed = now - started
        let fraction = min(1, Double(done) / Double(max(total, 1)))
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        let eta = rate > 0 ? Double(total - done) / rate : 0
        let filled = Int(fraction * 30)
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: 30 - filled)
        let numbers = String(format: "%5.1f%% %6.1fs %9.0f msg/s ETA %5.1fs ", fraction * 100, elapsed, rate, max(0, eta))
        try? FileHandle.standardError.write(contentsOf: Data("\r[\(bar)] \(numbers)".utf8))
    }

    func finish() {
        guard enabled else { return }
        draw(ProcessInfo.processInfo.systemUptime)
        try? FileHandle.standardError.write(contentsOf: Data("\n".utf8))
    }
}

/// The wall clock (CLOCK_REALTIME) as a ROS time: shared by every process on the machine.
func wallClockNow() -> RosTime {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return RosTime(sec: Int32(truncatingIfNeeded: ts.tv_sec), nanosec: UInt32(ts.tv_nsec))
}
