import CompassCore
import WireFormat
import Bags

/// `fusion-node replay BAG [--csv OUT.csv] [--filter kalman|complementary] ...`: decodes IMU and
/// magnetometer messages from a bag, runs a fusion filter over them and writes the estimate.
struct ReplayCommand {
    static let valued: Set<String> = ["--csv", "--accuracy-csv", "--sensor-latency", "--record", "--storage", "--compression", "--filter", "--imu-topic", "--mag-topic", "--start", "--duration", "--time"]
    static let flags: Set<String> = ["--salvage", "--quiet"]
    static let usage = """
    fusion-node replay BAG [options]
      --csv OUT.csv          write t,qw,qx,qy,qz for every IMU sample (orientation of the sensor frame
                             relative to ENU, y = magnetic north; t = header stamp in seconds)
      --accuracy-csv OUT.csv write t,heading_deg,accuracy_deg,flags for every IMU sample (accuracy =
                             the filter's 95 % bound of the heading error, empty while not valid)
      --record PATH          record the fused output (/heading: gyrocompass_msgs/msg/Heading, /imu/data:
                             sensor_msgs/msg/Imu with the orientation) into a rosbag2 directory, or a
                             bare file when PATH ends in .mcap or .db3
      --storage mcap|sqlite3 storage of a recorded directory (default mcap)
      --compression zstd|lz4|none   MCAP chunk compression (default zstd)
      --filter NAME          kalman (default) or complementary
      --sensor-latency S     the IMU's output latency in seconds: the orientation is predicted this
                             far ahead with the current rate (default 0)
      --imu-topic TOPIC      default /imu/data_raw (sensor_msgs/msg/Imu)
      --mag-topic TOPIC      default /imu/mag (sensor_msgs/msg/MagneticField)
      --start SECONDS        skip this long from the start of the bag
      --duration SECONDS     replay only this long
      --time header|log      timestamps from the header stamp (default) or the bag's log time
      --salvage              keep reading past damage and report it
      --quiet                no summary on stderr
    """

    struct Summary {
        var imuMessages = 0, magMessages = 0, outputs = 0, decodeErrors = 0, otherTopics = 0
        var skipped = SkippedSampleCounts()
        var seconds = 0.0
    }

    static func run(_ args: [String]) throws -> Int32 {
        let a = try Arguments(args, valued: valued, flags: flags)
        guard a.positionals.count == 1 else { throw UsageError(message: "replay needs exactly one BAG\n" + usage) }
        let bagPath = a.positionals[0]
        let kindName = a.string("--filter") ?? "kalman"
        guard let kind = FilterKind(rawValue: kindName) else {
            throw UsageError(message: "--filter expects one of \(FilterKind.allCases.map(\.rawValue).joined(separator: ", ")), got '\(kindName)'")
        }
        let useLogTime: Bool
        switch a.string("--time") ?? "header" {
        case "header": useLogTime = false
        case "log": useLogTime = true
        case let other: throw UsageError(message: "--time expects header or log, got '\(other)'")
        }
        let imuTopic = a.string("--imu-topic") ?? "/imu/data_raw"
        let magTopic = a.string("--mag-topic") ?? "/imu/mag"
        let bag = try BagReader(path: bagPath)
        var options = BagReadOptions()
        options.topics = [imuTopic, magTopic]
        options.salvage = a.has("--salvage")
        if let start = try a.double("--start", minimum: 0) ?? nil, let first = try firstLogTime(bag) {
            options.startTime = first + UInt64(start * 1e9)
        }
        if let d = try a.double("--duration", minimum: 0) {
            let base = try options.startTime ?? firstLogTime(bag) ?? 0
            options.endTime = base + UInt64(d * 1e9)
        }
        let csv = try a.string("--csv").map { try TextFileWriter(path: $0) }
        try csv?.write("t,qw,qx,qy,qz\n")
        let accuracyCSV = try a.string("--accuracy-csv").map { try TextFileWriter(path: $0) }
        try accuracyCSV?.write("t,heading_deg,accuracy_deg,flags\n")

        let latency = try a.double("--sensor-latency", minimum: 0) ?? 0
        guard latency <= 1 else { throw UsageError(message: "--sensor-latency is in seconds; \(latency) is not a plausible latency") }
        var filter = kind.make(CommonFilterOptions(sensorLatencySeconds: latency))
        let recorder = try a.string("--record").map { path -> BagRecorder in
            let storage: BagReader.Storage
            switch a.string("--storage") ?? "mcap" {
            case "mcap": storage = .mcap
            case "sqlite3": storage = .sqlite3
            case let other: throw UsageError(message: "--storage expects mcap or sqlite3, got '\(other)'")
            }
            let compression: String
            switch a.string("--compression") ?? "zstd" {
            case "zstd": compression = "zstd"
            case "lz4": compression = "lz4"
            case "none": compression = ""
            case let other: throw UsageError(message: "--compression expects zstd, lz4 or none, got '\(other)'")
            }
            return try BagRecorder(path: path, storage: storage, compression: compression)
        }
        // The header stamps of the IMU messages not fused yet, so recorded stamps are exact (a Double
        // holds 1.7e9 s only to about 0.24 us).
        var pendingStamps: [RosTime] = [], stampHead = 0
        var frameId = "imu_link"
        var aligner = SampleAligner()
        var summary = Summary()
        let started = monotonicSeconds()
        func fuse(_ pair: (imu: ImuSample, magnetometer: MagnetometerSample?)) throws {
            let stamp = stampHead < pendingStamps.count ? pendingStamps[stampHead] : RosTime(seconds: pair.imu.timestamp)
            stampHead += 1
            if stampHead > 4096 { pendingStamps.removeFirst(stampHead); stampHead = 0 }
            guard let o = filter.update(imu: pair.imu, magnetometer: pair.magnetometer) else { return }
            if let recorder { try record(o, pair, stamp, frameId, recorder) }
            summary.outputs += 1
            let q = o.orientation
            try csv?.write("\(o.timestamp),\(q.w),\(q.x),\(q.y),\(q.z)\n")
            if let accuracyCSV {
                let h = o.headingDegrees.map { fmt($0, 4) } ?? ""
                let acc = o.headingAccuracyDegrees.map { fmt($0, 4) } ?? ""
                try accuracyCSV.write("\(o.timestamp),\(h),\(acc),\(o.flags.description)\n")
            }
        }
        var progress = ProgressBar(total: Double(try bag.topics().filter { $0.name == imuTopic }.first?.messageCount ?? 0))
        try bag.forEachMessage(options) { message in
            if message.topic == magTopic {
                do {
                    let m = try MagneticFieldMessage(cdrBytes: message.data)
                    var sample = m.sample
                    if useLogTime { sample.timestamp = Double(message.logTime) * 1e-9 }
                    summary.magMessages += 1
                    if let pair = aligner.magnetometer(sample) { try fuse(pair) }
                } catch {
                    summary.decodeErrors += 1
                    writeStandardError("fusion-node: \(bagPath): \(message.topic) at log time \(message.logTime): \(error)\n")
                }
            } else if message.topic == imuTopic {
                let imu: ImuSample
                do {
                    let decoded = try ImuMessage(cdrBytes: message.data)
                    var sample = decoded.sample
                    if useLogTime { sample.timestamp = Double(message.logTime) * 1e-9 }
                    imu = sample
                    frameId = decoded.header.frameId
                    pendingStamps.append(useLogTime ? RosTime(sec: Int32(clamping: message.logTime / 1_000_000_000),
                                                               nanosec: UInt32(message.logTime % 1_000_000_000)) : decoded.header.stamp)
                } catch {
                    summary.decodeErrors += 1
                    writeStandardError("fusion-node: \(bagPath): \(message.topic) at log time \(message.logTime): \(error)\n")
                    return
                }
                summary.imuMessages += 1
                if let pair = aligner.imu(imu) { try fuse(pair) }
                progress.update(Double(summary.imuMessages), unit: "samples")
            } else {
                summary.otherTopics += 1
            }
        }
        if let pair = aligner.finish() { try fuse(pair) }
        progress.finish()
        try csv?.close()
        try accuracyCSV?.close()
        try recorder?.finish()
        summary.skipped = filter.skipped
        summary.seconds = monotonicSeconds() - started
        for d in bag.damage { writeStandardError("fusion-node: damage: \(d)\n") }
        if !a.has("--quiet") {
            let k = summary.skipped
            writeStandardError("replay \(bagPath): \(summary.imuMessages) IMU + \(summary.magMessages) magnetometer messages, "
                + "\(summary.outputs) estimates (\(kind.rawValue)) in \(fmt(summary.seconds, 3)) s; "
                + "skipped: \(k.nonFiniteImu) non-finite IMU, \(k.zeroSpecificForce) zero accel, \(k.timestampNotIncreasing) non-increasing time, "
                + "\(k.nonFiniteMagnetometer + k.zeroMagneticField) bad magnetometer, \(summary.decodeErrors) undecodable\n")
        }
        if summary.imuMessages == 0 {
            writeStandardError("fusion-node: \(bagPath) has no messages on \(imuTopic)\n")
            return 1
        }
        return 0
    }

    /// Writes one estimate as /heading and /imu/data.
    static func record(_ o: FusionOutput, _ pair: (imu: ImuSample, magnetometer: MagnetometerSample?), _ stamp: RosTime,
                       _ frameId: String, _ recorder: BagRecorder) throws {
        let header = RosHeader(stamp: stamp, frameId: frameId)
        let logTime = UInt64(clamping: stamp.nanoseconds)
        let field = pair.magnetometer.map { $0.fieldMicrotesla * 1e-6 } ?? Vector3(.nan, .nan, .nan)
        let heading = HeadingMessage(header: header, magneticHeading: o.headingDegrees ?? .nan, trueHeading: .nan,
                                     headingAccuracy: o.headingAccuracyDegrees ?? .nan, declination: .nan,
                                     orientation: o.orientation, magneticField: field,
                                     source: HeadingMessage.Source.fusion.rawValue, flags: o.flags.rawValue)
        try recorder.write(topic: "/heading", type: HeadingMessage.typeName, definition: MessageDefinitions.heading,
                           logTime: logTime, data: heading.cdr())
        // Orientation covariance: only the heading (about z) is estimated here; x and y stay 0 (unknown).
        let zVariance = o.headingVarianceDegrees2.map { $0 * radiansPerDegree * radiansPerDegree } ?? 0
        let imu = ImuMessage(header: header, orientation: o.orientation,
                             orientationCovariance: [0, 0, 0, 0, 0, 0, 0, 0, zVariance],
                             angularVelocity: pair.imu.angularVelocity - o.gyroBias, angularVelocityCovariance: [Double](repeating: 0, count: 9),
                             linearAcceleration: pair.imu.specificForce, linearAccelerationCovariance: [Double](repeating: 0, count: 9))
        try recorder.write(topic: "/imu/data", type: ImuMessage.typeName, definition: MessageDefinitions.imu,
                           logTime: logTime, data: imu.cdr())
    }

    static func firstLogTime(_ bag: BagReader) throws -> UInt64? {
        var first: UInt64?
        struct Stop: Error {}
        do { try bag.forEachMessage { first = $0.logTime; throw Stop() } } catch is Stop {}
        return first
    }
}
