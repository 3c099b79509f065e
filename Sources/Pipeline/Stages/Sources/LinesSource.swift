import Foundation
import CompassCore
import WireFormat
import MessageBus

/// Text lines from stdin or a serial device, one sample per line:
///   t,gx,gy,gz,ax,ay,az,mx,my,mz      (seconds, rad/s, m/s^2, tesla)
/// or the same fields as an NMEA-style sentence "$GCIMU,t,...,mz*HH" with the usual XOR checksum.
/// Malformed lines are counted and logged with their line number.
final class LinesSource: StageLogic, SourceLogic, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// "-" for stdin, or a serial device such as /dev/ttyUSB0.
        var device = "-"
        /// Serial speed, baud (devices only).
        var baud = 115_200
        var pauseWithoutSubscribers = true

        static let table = SettingTable<Settings>([
            .string("device", \.device, "'-' for stdin, or a serial device such as /dev/ttyUSB0"),
            .integer(
                "baud", \.baud, unit: "baud", range: 9600...921_600,
                "serial speed (devices only): " + serialSpeeds.keys.sorted().map(String.init).joined(separator: ", ")),
            .pauseWithoutSubscribers(\.pauseWithoutSubscribers),
        ])
    }

    static let serialSpeeds: [Int: speed_t] = [
        9600: speed_t(B9600), 19200: speed_t(B19200), 38400: speed_t(B38400), 57600: speed_t(B57600),
        115_200: speed_t(B115200), 230_400: speed_t(B230400), 460_800: speed_t(B460800), 921_600: speed_t(B921600),
    ]

    static let type = StageType(
        name: "lines", role: .source, summary: "text samples from stdin or a serial device (CSV or $GCIMU sentences)",
        settings: Settings.table, outputTopics: [PipelineTopics.imuRaw, PipelineTopics.magnetometer],
        check: { settings, _ in
            serialSpeeds[settings.baud] == nil
                ? SettingProblem(
                    "baud",
                    "unsupported speed \(settings.baud) (use "
                        + "\(serialSpeeds.keys.sorted().map(String.init).joined(separator: ", ")))"
                )
                : nil
        }
    ) { settings, context in try LinesSource(settings, stop: context.stop, log: context.log) }

    let handle: FileHandle
    let device: String
    let pausesWithoutSubscribers: Bool
    let log: @Sendable (String) -> Void
    var malformed = 0

    /// The run's stop request, polled between reads.
    let stop: StopToken

    init(_ settings: Settings, stop: StopToken = StopToken(), log: @escaping @Sendable (String) -> Void) throws {
        self.stop = stop
        self.log = log
        device = settings.device
        pausesWithoutSubscribers = settings.pauseWithoutSubscribers
        if device == "-" {
            handle = FileHandle.standardInput
            return
        }
        let fd = open(device, O_RDONLY | O_NOCTTY)
        guard fd >= 0 else {
            throw StageFailure("cannot open \(device): \(String(cString: strerror(errno)))")
        }
        if isatty(fd) == 1, let speed = Self.serialSpeeds[settings.baud] {
            var tio = termios()
            tcgetattr(fd, &tio)
            cfmakeraw(&tio)
            cfsetispeed(&tio, speed)
            cfsetospeed(&tio, speed)
            tcsetattr(fd, TCSANOW, &tio)
        }
        handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    /// Parses one line; nil with a reason for a bad one.
    static func parse(_ line: Substring) -> Result<(Double, Vector3, Vector3, Vector3), UnexpectedFrame> {
        var body = line
        if body.hasPrefix("$") {
            guard let star = body.lastIndex(of: "*") else {
                return .failure(UnexpectedFrame(reason: "sentence without '*' checksum"))
            }
            let payload = body[body.index(after: body.startIndex)..<star]
            let given = body[body.index(after: star)...].trimmingCharacters(in: .whitespaces)
            let sum = payload.utf8.reduce(UInt8(0)) { $0 ^ $1 }
            guard let expected = UInt8(given, radix: 16), expected == sum else {
                return .failure(
                    UnexpectedFrame(
                        reason: "checksum \(given) does not match \(String(sum, radix: 16, uppercase: true))"))
            }
            guard payload.hasPrefix("GCIMU,") else {
                return .failure(UnexpectedFrame(reason: "unknown sentence \(payload.prefix(6))"))
            }
            body = payload.dropFirst(6)
        }
        let fields = body.split(separator: ",", omittingEmptySubsequences: false)
            .map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard fields.count == 10 else {
            return .failure(
                UnexpectedFrame(reason: "expected 10 comma-separated numbers, found \(fields.count) fields"))
        }
        let values = fields.compactMap { $0 }
        guard values.count == 10, values.allSatisfy(\.isFinite) else {
            return .failure(UnexpectedFrame(reason: "a field is not a finite number"))
        }
        // A ROS stamp holds whole seconds in an Int32.
        guard values[0] >= Double(Int32.min), values[0] < Double(Int32.max) else {
            return .failure(
                UnexpectedFrame(
                    reason: "time \(values[0]) s is outside what a ROS stamp holds (\(Int32.min) to \(Int32.max) s)"))
        }
        return .success(
            (
                values[0], Vector3(values[1], values[2], values[3]), Vector3(values[4], values[5], values[6]),
                Vector3(values[7], values[8], values[9])
            ))
    }

    /// Longest line read, bytes: a sample line is about 200.
    static let maximumLineBytes = 65_536

    func run(emit: ([WireFrame]) throws -> Double) throws {
        var pending = Data()
        var lineNumber = 0
        // True inside a line already counted as too long: its bytes are dropped up to its newline.
        var discarding = false
        while !stop.requested {
            let chunk = handle.availableData
            if chunk.isEmpty { break }  // end of file
            pending.append(chunk)
            var frames: [WireFrame] = []
            while let newline = pending.firstIndex(of: 0x0A) {
                let lineData = pending[pending.startIndex..<newline]
                pending.removeSubrange(pending.startIndex...newline)
                if discarding {
                    discarding = false
                    continue
                }
                lineNumber += 1
                let text = String(decoding: lineData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                if text.isEmpty || text.hasPrefix("#") { continue }
                switch Self.parse(Substring(text)) {
                case .success(let (t, gyro, accel, mag)):
                    let header = RosHeader(stamp: RosTime(seconds: t), frameId: "imu_link")
                    appendRawSample(header, angularVelocity: gyro, specificForce: accel, fieldTesla: mag, to: &frames)
                case .failure(let why):
                    malformed += 1
                    if malformed <= 20 { log("lines: \(device) line \(lineNumber): \(why)") }
                }
            }
            if pending.count > Self.maximumLineBytes {
                // No sample line is this long: a stream without newlines must not grow without bound.
                if !discarding {
                    lineNumber += 1
                    malformed += 1
                    if malformed <= 20 {
                        log("lines: \(device) line \(lineNumber): longer than \(Self.maximumLineBytes) bytes; skipped")
                    }
                }
                discarding = true
                pending.removeAll(keepingCapacity: true)
            }
            _ = try emit(frames)
        }
        if malformed > 0 { notes.append("\(malformed) malformed line(s)") }
        losses += malformed
    }
}
