#if canImport(Glibc)
    import Glibc
#endif
import WireFormat
import Bags
import MessageBus

/// A recorded bag as a source: its IMU and magnetometer messages (and fixes, if asked), remapped to
/// the pipeline's topics, forwarded as stored (no re-encoding), paced by log time when `rate` > 0.
final class BagSource: StageLogic, SourceLogic, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// rosbag2 directory, or a .mcap / .db3 file.
        var path = ""
        /// Bag topics read as imu/data_raw, imu/mag and fix ("" = no fixes).
        var imuTopic = "/imu/data_raw", magTopic = "/imu/mag", fixTopic = ""
        /// Bag topic with the motors' current, read as motor/current ("" = none).
        var currentTopic = ""
        /// Bag topics with a GNSS receiver's velocity and dual-antenna heading, read as gnss/velocity and
        /// gnss/heading ("" = none).
        var velocityTopic = "", gnssHeadingTopic = ""
        /// Read the magnetometer topic; false: the heading comes from GNSS alone.
        var useMagnetometer = true
        /// Magnetometers besides the primary, as NAME=TOPIC: the bag topic read as imu/mag/NAME.
        var extraMagnetometers: [String] = []
        /// Bag topic with the robot's static transforms (tf2_msgs/TFMessage), passed on first as
        /// tf_static for a mount stage's tf rotations ("" = none).
        var tfTopic = ""
        /// Playback speed: 1 = real time, 2 = twice, 0 = as fast as possible.
        var rate = 0.0
        /// Seconds skipped from the start; seconds played (0 = all).
        var startSeconds = 0.0, durationSeconds = 0.0
        /// Start again at the end.
        var loop = false
        /// Read past damage, reporting it.
        var salvage = false
        /// Which time stamps each message: its header stamp, or the time it was logged.
        var time = Time.header
        /// Progress bar on stderr when it is a terminal.
        var progress = true
        var pauseWithoutSubscribers = true

        enum Time: String, CaseIterable {
            case header, log
        }

        static let table = SettingTable<Settings>([
            .string("path", \.path, required: true, "rosbag2 directory or .mcap / .db3 file"),
            .string("imu_topic", \.imuTopic, "bag topic with sensor_msgs/msg/Imu"),
            .string("mag_topic", \.magTopic, "bag topic with sensor_msgs/msg/MagneticField"),
            .strings(
                "extra_magnetometers", \.extraMagnetometers,
                "magnetometers besides the primary as NAME=TOPIC (mast=/mast/mag): the bag topic passed on as "
                    + "imu/mag/NAME, fused with the primary by the kalman filter"),
            .number(
                "rate", \.rate, unit: "x real time", range: 0...10_000,
                "playback speed: 1 = real time, 2 = twice, 0 = as fast as possible"),
            .number(
                "start_s", \.startSeconds, unit: "s", range: SettingSpec.secondsRange, "time to skip from the start"
            ).formerly("start"),
            .number(
                "duration_s", \.durationSeconds, unit: "s", range: SettingSpec.secondsRange, "time to play; 0 = all"
            ).formerly("duration"),
            .bool("loop", \.loop, "start again at the end"),
            .bool("salvage", \.salvage, "read past damage, reporting it"),
            .choice("time", \.time, "header: keep the header stamps; log: stamp each message with its log time"),
            .string(
                "fix_topic", \.fixTopic, "bag topic with sensor_msgs/msg/NavSatFix to pass on as 'fix' ('' = none)"),
            .string(
                "current_topic", \.currentTopic,
                "bag topic with the motors' current, passed on as 'motor/current': sensor_msgs/msg/BatteryState, or "
                    + "std_msgs/msg/Float32 or Float64 in amperes drawn, stamped with its log time ('' = none)"),
            .string(
                "velocity_topic", \.velocityTopic,
                "bag topic with a GNSS receiver's velocity (geometry_msgs/msg/TwistWithCovarianceStamped, ENU), "
                    + "passed on as 'gnss/velocity' ('' = none)"),
            .string(
                "gnss_heading_topic", \.gnssHeadingTopic,
                "bag topic with a dual-antenna receiver's heading (sensor_msgs/msg/Imu orientation and yaw "
                    + "variance), passed on as 'gnss/heading' ('' = none)"),
            .bool(
                "use_mag", \.useMagnetometer,
                "read mag_topic; false: no magnetometer (the fusion stage's use_mag: false takes the heading from "
                    + "GNSS)"),
            .bool("progress", \.progress, "progress bar on stderr when it is a terminal"),
            .string(
                "tf_topic", \.tfTopic,
                "bag topic with static transforms (tf2_msgs/msg/TFMessage, e.g. /tf_static), passed on before the "
                    + "first sample as 'tf_static' for a mount stage's tf rotations ('' = none)"),
            .pauseWithoutSubscribers(\.pauseWithoutSubscribers),
        ])
    }

    static let type = StageType(
        name: "bag", role: .source, summary: "a recorded ROS 2 bag (MCAP or sqlite3), replayed as stored",
        settings: Settings.table,
        outputTopics: [
            PipelineTopics.imuRaw, PipelineTopics.magnetometer, PipelineTopics.fix, PipelineTopics.motorCurrent,
            PipelineTopics.tfStatic, PipelineTopics.gnssVelocity, PipelineTopics.gnssHeading,
        ],
        check: { settings, _ in ExtraMagnetometer.problem(settings.extraMagnetometers, primaryTopic: settings.magTopic)
        }
    ) { settings, context in try BagSource(settings, stop: context.stop, log: context.log) }

    /// The types a current topic may have.
    static let currentTypes = [BatteryStateMessage.typeName, "std_msgs/msg/Float32", "std_msgs/msg/Float64"]

    var pausesWithoutSubscribers: Bool { settings.pauseWithoutSubscribers }

    let settings: Settings
    let bag: BagReader
    let topics: [BagTopic]
    let log: @Sendable (String) -> Void

    /// The run's stop request, polled between reads.
    let stop: StopToken

    init(_ settings: Settings, stop: StopToken = StopToken(), log: @escaping @Sendable (String) -> Void) throws {
        self.stop = stop
        self.log = log
        let bag = try BagReader(path: settings.path)
        let topics = try bag.topics()
        self.bag = bag
        self.topics = topics
        // Topics as the bag spells them (with or without the leading slash); a missing one is named
        // with the topics the bag has.
        var resolved = settings
        // `types`, when given: the types the topic may carry.
        func resolve(_ topic: String, _ role: String, types: [String] = []) throws -> String {
            guard let found = BagTopicLookup.find(topic, in: topics) else {
                throw StageFailure(BagTopicLookup.missing(topic, role: role, bag: settings.path, topics: topics))
            }
            let type = topics.first { $0.name == found }?.type ?? ""
            guard types.isEmpty || types.contains(type) else {
                throw StageFailure(
                    "\(settings.path): \(role) \(found) carries \(type), not "
                        + (types.count == 1 ? types[0] : "one of " + types.joined(separator: ", ")))
            }
            return found
        }
        resolved.imuTopic = try resolve(settings.imuTopic, "imu_topic")
        resolved.magTopic = settings.useMagnetometer ? try resolve(settings.magTopic, "mag_topic") : ""
        for extra in try ExtraMagnetometer.parse(settings.extraMagnetometers, primaryTopic: settings.magTopic) {
            let topic = try resolve(
                extra.topic, "extra magnetometer \(extra.name)", types: [MagneticFieldMessage.typeName])
            guard topic != resolved.magTopic, extraTopics[topic] == nil else {
                throw StageFailure("extra_magnetometers: \(topic) is already read as another magnetometer")
            }
            extraTopics[topic] = extra.name
        }
        if !settings.velocityTopic.isEmpty {
            resolved.velocityTopic = try resolve(
                settings.velocityTopic, "velocity_topic", types: [TwistWithCovarianceStampedMessage.typeName])
        }
        if !settings.gnssHeadingTopic.isEmpty {
            resolved.gnssHeadingTopic = try resolve(
                settings.gnssHeadingTopic, "gnss_heading_topic", types: [ImuMessage.typeName])
        }
        if !settings.fixTopic.isEmpty { resolved.fixTopic = try resolve(settings.fixTopic, "fix_topic") }
        if !settings.tfTopic.isEmpty {
            resolved.tfTopic = try resolve(settings.tfTopic, "tf_topic", types: [TFMessage.typeName])
        }
        if !settings.currentTopic.isEmpty {
            resolved.currentTopic = try resolve(settings.currentTopic, "current_topic", types: Self.currentTypes)
        }
        self.settings = resolved
    }

    /// Bag topics of the extra magnetometers, with their names.
    var extraTopics: [String: String] = [:]

    /// The pipeline topic a bag topic is read as.
    func pipelineTopic(_ bagTopic: String) -> String {
        if let name = extraTopics[bagTopic] { return PipelineTopics.magnetometer(named: name) }
        return switch bagTopic {
        case settings.imuTopic: PipelineTopics.imuRaw
        case settings.magTopic: PipelineTopics.magnetometer
        case settings.currentTopic: PipelineTopics.motorCurrent
        case settings.velocityTopic: PipelineTopics.gnssVelocity
        case settings.gnssHeadingTopic: PipelineTopics.gnssHeading
        default: PipelineTopics.fix
        }
    }

    /// A bag's log time (nanoseconds since the epoch) as a header stamp.
    static func stamp(logTime: UInt64) -> RosTime {
        RosTime(sec: Int32(truncatingIfNeeded: logTime / 1_000_000_000), nanosec: UInt32(logTime % 1_000_000_000))
    }

    /// A current as a BatteryState frame: stored ones as they are, a Float32/Float64 (amperes drawn,
    /// no header) converted, stamped with its log time. Nil when the payload does not decode.
    func currentFrame(_ m: BagMessage) -> WireFrame? {
        guard m.encoding == "cdr" else { return nil }
        let stamp = Self.stamp(logTime: m.logTime)
        if m.type == BatteryStateMessage.typeName {
            var payload = m.data
            if settings.time == .log { CDRHeaderStamp.overwrite(stamp, in: &payload) }
            return WireFrame(topic: PipelineTopics.motorCurrent, type: m.type, encoding: m.encoding, payload: payload)
        }
        guard let value = try? m.data.withUnsafeBytes({ try standardFloatValue(type: m.type, cdr: $0) }) else {
            return nil
        }
        return cdrFrame(
            BatteryStateMessage(header: RosHeader(stamp: stamp, frameId: ""), drawnAmperes: value),
            topic: PipelineTopics.motorCurrent)
    }

    func run(emit: ([WireFrame]) throws -> Double) throws {
        do { try replayAll(emit: emit) } catch let e as BagError where e.isDamage {
            throw StageFailure("\(e) (the bag is damaged: --salvage, or salvage: true, replays what is intact)")
        }
    }

    /// The bag's static transforms, whenever they were logged (a recording usually starts with them,
    /// but `start` may skip past that), as tf_static frames; at most 1,000 messages.
    func staticTransforms() throws -> [WireFrame] {
        guard !settings.tfTopic.isEmpty else { return [] }
        var options = BagReadOptions()
        options.topics = [settings.tfTopic]
        options.salvage = settings.salvage
        var frames: [WireFrame] = []
        struct Enough: Error {}
        do {
            try bag.forEachMessage(options) { m in
                frames.append(
                    WireFrame(topic: PipelineTopics.tfStatic, type: m.type, encoding: m.encoding, payload: m.data))
                if frames.count >= 1000 { throw Enough() }
            }
        } catch is Enough {}
        if !frames.isEmpty { notes.append("\(frames.count) static transform message(s) from \(settings.tfTopic)") }
        return frames
    }

    func replayAll(emit: ([WireFrame]) throws -> Double) throws {
        let transforms = try staticTransforms()
        if !transforms.isEmpty { _ = try emit(transforms) }
        let sensorTopics = [settings.imuTopic, settings.magTopic].filter { !$0.isEmpty } + extraTopics.keys.sorted()
        var options = BagReadOptions()
        options.topics = Set(
            sensorTopics
                + [settings.fixTopic, settings.currentTopic, settings.velocityTopic, settings.gnssHeadingTopic]
                .filter { !$0.isEmpty })
        options.salvage = settings.salvage
        var first: UInt64?
        struct Stop: Error {}
        do {
            try bag.forEachMessage(options) {
                first = $0.logTime
                throw Stop()
            }
        } catch is Stop {}
        guard let first else {
            notes.append("no messages on \(sensorTopics.joined(separator: " or "))")
            return
        }
        if settings.startSeconds > 0 { options.startTime = first + UInt64(settings.startSeconds * 1e9) }
        if settings.durationSeconds > 0 {
            options.endTime = (options.startTime ?? first) + UInt64(settings.durationSeconds * 1e9)
        }
        let adapters = try schemaAdapters(for: sensorTopics)
        try replay(options, first: first, sensorTopics: sensorTopics, adapters: adapters, emit: emit)
    }

    func replay(
        _ options: BagReadOptions, first: UInt64, sensorTopics: [String], adapters: [String: SchemaAdapter],
        emit: ([WireFrame]) throws -> Double
    ) throws {
        var emitted = 0
        var undecodable = 0
        let total = topics.filter { sensorTopics.contains($0.name) }.reduce(0) { $0.addingSaturated($1.messageCount) }
        var progress = Progress(total: settings.progress ? total : 0)
        repeat {
            var batch: [WireFrame] = []
            var startWall: Double?, startLog: UInt64 = 0, pausedSeconds = 0.0
            try bag.forEachMessage(options) { m in
                if m.topic == settings.currentTopic {
                    guard let frame = currentFrame(m) else {
                        undecodable += 1
                        if undecodable <= 10 { log("bag: \(m.topic) at log time \(m.logTime): not a current") }
                        return
                    }
                    batch.append(frame)
                    return
                }
                var payload = m.data
                if let adapter = adapters[m.topic], adapter.mode == .byName {
                    do { payload = try adapter.standardPayload(m.data) } catch {
                        undecodable += 1
                        if undecodable <= 10 { log("bag: \(m.topic) at log time \(m.logTime): \(error)") }
                        return
                    }
                }
                if (settings.time == .log) && m.encoding == "cdr" {
                    CDRHeaderStamp.overwrite(Self.stamp(logTime: m.logTime), in: &payload)
                }
                batch.append(
                    WireFrame(topic: pipelineTopic(m.topic), type: m.type, encoding: m.encoding, payload: payload))
                emitted += 1
                progress.advance()
                if settings.rate > 0 {
                    // Paced by log time; time spent paused for a missing reader is left out.
                    if startWall == nil {
                        startWall = Clocks.monotonicSeconds()
                        startLog = m.logTime
                        pausedSeconds = 0
                    }
                    let due = Double(m.logTime - startLog) * 1e-9 / settings.rate
                    let ahead = due - (Clocks.monotonicSeconds() - startWall! - pausedSeconds)
                    if ahead > 0.0005 {
                        pausedSeconds += try emit(batch)
                        batch.removeAll(keepingCapacity: true)
                        usleep(UInt32(ahead * 1e6))
                    }
                } else if batch.count >= 64 {
                    _ = try emit(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
            _ = try emit(batch)
            for d in bag.damage { log("bag: damage: \(d)") }
            losses += bag.damage.count
        } while settings.loop && !stop.requested && emitted > 0
        progress.finish()
        if undecodable > 0 { notes.append("\(undecodable) undecodable message(s) skipped") }
        losses += undecodable
        if emitted == 0 && settings.startSeconds > 0 {
            var whole = options
            whole.startTime = nil
            whole.endTime = nil
            var last = first
            try bag.forEachMessage(whole) { last = max(last, $0.logTime) }
            throw StageFailure(
                "start \(format(settings.startSeconds, 1)) s is past the end of \(settings.path): its messages on "
                    + "\(sensorTopics.joined(separator: " and ")) span \(format(Double(last - first) * 1e-9, 1)) s")
        }
    }

    /// The bag's own definitions decide how its payloads are read (see SchemaAdapter).
    func schemaAdapters(for sensorTopics: [String]) throws -> [String: SchemaAdapter] {
        var adapters: [String: SchemaAdapter] = [:]
        for topic in topics where sensorTopics.contains(topic.name) {
            let schema = bag.schema(forTopic: topic.name)
            do {
                adapters[topic.name] = try SchemaAdapter(
                    type: topic.type, schemaEncoding: schema?.encoding, schemaText: schema?.text)
            } catch {
                throw StageFailure("\(settings.path): topic \(topic.name): \(error)")
            }
            if adapters[topic.name]?.mode == .byName {
                notes.append("\(topic.name): read through the bag's own \(topic.type) definition")
            }
        }
        return adapters
    }
}
