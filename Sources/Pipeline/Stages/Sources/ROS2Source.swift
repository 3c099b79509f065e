import CompassCore
import WireFormat
import MessageBus
import ROS2DDS

/// Live ROS 2 topics as a source: sensor_msgs/Imu, MagneticField and (optionally) NavSatFix taken
/// from DDS as serialized bytes and passed on as the same frames a bag source produces (nothing
/// decoded or re-encoded; each payload is checked once and a malformed one is counted and skipped).
/// Samples of different topics are put back in header-stamp order within `order_window_ms` (a sample
/// waits until every other sensor topic has shown one stamped no earlier, or the window passes), so
/// a driver publishing imu and mag together fuses as a replay of its recording would, even when DDS
/// delivers one topic late (a retransmission); samples of a sensor pair stamped alike go at once.
final class ROS2Source: StageLogic, SourceLogic, @unchecked Sendable {
    struct Settings {
        /// DDS domain (ROS_DOMAIN_ID).
        var domainId = 0
        /// Namespace relative topic names resolve in.
        var namespace = "/"
        /// ROS topics read as imu/data_raw, imu/mag and fix ("" = not read).
        var imuTopic = "imu/data_raw", magTopic = "imu/mag", fixTopic = ""
        /// QoS of each reader.
        var imuQoS = ROS2QoS.sensorData, magQoS = ROS2QoS.sensorData
        var fixQoS = ROS2QoS.sensorData
        /// How long a sample may wait for one of another topic stamped before it, seconds.
        var orderWindowSeconds = 0.002
        /// Seconds to run (0 = until stopped); seconds without data, once data came, that end the
        /// stream (0 = never).
        var durationSeconds = 0.0, idleEndSeconds = 0.0

        static let specs: [SettingSpec] = [
            ROS2Settings.domainSpec,
            ROS2Settings.namespaceSpec,
            SettingSpec(
                "imu_topic", .string, "imu/data_raw", "ROS topic with sensor_msgs/msg/Imu (raw: no orientation)"),
            SettingSpec("mag_topic", .string, "imu/mag", "ROS topic with sensor_msgs/msg/MagneticField ('' = none)"),
            SettingSpec(
                "use_mag", .bool, "true", "read the magnetometer; false = gyro and accelerometer only"),
            SettingSpec("fix_topic", .string, "", "ROS topic with sensor_msgs/msg/NavSatFix ('' = none), e.g. fix"),
            SettingSpec("qos", .string, "sensor_data", "QoS of every reader: " + ROS2QoS.syntax),
            SettingSpec("imu_qos", .string, "", "QoS of the imu reader ('' = qos)"),
            SettingSpec("mag_qos", .string, "", "QoS of the mag reader ('' = qos)"),
            SettingSpec("fix_qos", .string, "", "QoS of the fix reader ('' = qos)"),
            SettingSpec(
                "order_window_ms", .number, "2",
                "how long a sample waits for one of another topic stamped before it (0 = arrival order)",
                range: 0...1000),
            SettingSpec("duration", .number, "0", "seconds to run; 0 = until stopped", range: SettingSpec.secondsRange),
            SettingSpec(
                "end_after_idle", .number, "0",
                "end the stream after this many seconds without data, once data came (0 = never)",
                range: SettingSpec.secondsRange),
            SettingSpec.pauseWithoutSubscribers,
        ]

        init(_ s: StageSettings) {
            domainId = s.integer("domain_id")
            namespace = s.string("namespace")
            imuTopic = s.string("imu_topic")
            magTopic = s.bool("use_mag") ? s.string("mag_topic") : ""
            fixTopic = s.string("fix_topic")
            func qos(_ key: String) -> ROS2QoS {
                let text = s.string(key).isEmpty ? s.string("qos") : s.string(key)
                return (try? ROS2QoS(parsing: text)) ?? .sensorData
            }
            imuQoS = qos("imu_qos")
            magQoS = qos("mag_qos")
            fixQoS = qos("fix_qos")
            orderWindowSeconds = s.number("order_window_ms") / 1000
            durationSeconds = s.number("duration")
            idleEndSeconds = s.number("end_after_idle")
        }
    }

    static let type = StageType(
        name: "ros2_source", role: .source,
        summary: "live ROS 2 topics over DDS (imu/data_raw, imu/mag, fix), taken as serialized CDR",
        settings: Settings.specs,
        outputTopics: [PipelineTopics.imuRaw, PipelineTopics.magnetometer, PipelineTopics.fix],
        check: ROS2Settings.check(
            qosSettings: ["qos", "imu_qos", "mag_qos", "fix_qos"],
            topicSettings: ["imu_topic", "mag_topic", "fix_topic"])
    ) { s, context in try ROS2Source(Settings(s), stage: context.stage, log: context.log) }

    /// One subscribed topic: its reader, the pipeline topic it feeds and how a payload is checked.
    struct Input {
        let reader: SerializedReader
        let pipelineTopic: String
        let check: ([UInt8]) -> CDRError?
        /// Sensor streams are merged in writing order; fixes (1 Hz or so) go as they come.
        var ordered: Bool { pipelineTopic != PipelineTopics.fix }
        /// The newest header stamp taken, nanoseconds.
        var newestStamp: Int64 = .min
        var taken = 0, malformed = 0
    }

    let settings: Settings
    let stage: String
    let log: @Sendable (String) -> Void
    let participant: DomainParticipant
    var inputs: [Input] = []
    let waitSet: ReaderWaitSet
    let discovery: EndpointDiscovery
    var warnings = SilentTopicWarnings()

    init(_ settings: Settings, stage: String, log: @escaping @Sendable (String) -> Void) throws {
        self.settings = settings
        self.stage = stage
        self.log = log
        do {
            let participant = try DomainParticipant(domainId: UInt32(settings.domainId))
            self.participant = participant
            var inputs: [Input] = []
            func input<M: RosMessage>(_ name: String, _ m: M.Type, _ qos: ROS2QoS, _ topic: String) throws
                -> Input
            {
                let t = try ROS2Topic(name, namespace: settings.namespace, type: M.typeName, qos: qos)
                return Input(
                    reader: try SerializedReader(participant, t), pipelineTopic: topic,
                    check: { bytes in
                        do throws(CDRError) {
                            _ = try M(cdrBytes: bytes)
                            return nil
                        } catch { return error }
                    })
            }
            inputs.append(try input(settings.imuTopic, ImuMessage.self, settings.imuQoS, PipelineTopics.imuRaw))
            if !settings.magTopic.isEmpty {
                inputs.append(
                    try input(
                        settings.magTopic, MagneticFieldMessage.self, settings.magQoS, PipelineTopics.magnetometer))
            }
            if !settings.fixTopic.isEmpty {
                inputs.append(try input(settings.fixTopic, NavSatFixMessage.self, settings.fixQoS, PipelineTopics.fix))
            }
            self.inputs = inputs
            waitSet = try ReaderWaitSet(participant, readers: inputs.map(\.reader))
            discovery = try EndpointDiscovery(participant, .publications)
        } catch let e as DDSError {
            throw StageFailure("\(stage): \(e)")
        } catch let e as ROS2NameError {
            throw StageFailure("\(stage): \(e)")
        }
        super.init()
        log(
            "\(stage): reading " + inputs.map { "\($0.reader.topic)" }.joined(separator: ", ")
                + " in DDS domain \(settings.domainId)")
    }

    /// A taken sample waiting for its turn.
    struct Pending {
        /// Header stamp, nanoseconds.
        let stamp: Int64
        /// The input it came from: among equal stamps the IMU sample goes first (the fusion stage then
        /// pairs its magnetometer sample at once), whichever DDS delivered first.
        let rank: Int
        let arrivalSeconds: Double
        let order: Int
        let frame: WireFrame
    }

    func run(emit: ([WireFrame]) throws -> Double) throws {
        defer { participant.close() }
        let start = Clocks.monotonicSeconds()
        var lastData = start
        var pending: [Pending] = []
        var taken: [SerializedSample] = []
        var arrivals = 0
        while !PipelineSignals.stopRequested {
            let now = Clocks.monotonicSeconds()
            if settings.durationSeconds > 0 && now - start >= settings.durationSeconds { break }
            if settings.idleEndSeconds > 0 && arrivals > 0 && now - lastData >= settings.idleEndSeconds { break }
            let wait = pending.isEmpty ? 0.1 : max(0.0002, settings.orderWindowSeconds / 2)
            if try waitSet.wait(timeoutSeconds: wait) {
                let arrival = Clocks.monotonicSeconds()
                lastData = arrival
                for i in inputs.indices {
                    taken.removeAll(keepingCapacity: true)
                    try inputs[i].reader.take(into: &taken)
                    for sample in taken {
                        inputs[i].taken += 1
                        if let problem = inputs[i].check(sample.bytes) {
                            inputs[i].malformed += 1
                            if inputs[i].malformed <= 10 || inputs[i].malformed.isMultiple(of: 1000) {
                                log(
                                    "\(stage): \(inputs[i].reader.topic.name): malformed message skipped "
                                        + "(\(inputs[i].malformed) so far): \(problem)")
                            }
                            continue
                        }
                        // A payload that decoded has a header stamp.
                        let stamp = sample.bytes.withUnsafeBytes { CDRHeaderStamp.read($0) }?.nanoseconds ?? .min
                        inputs[i].newestStamp = max(inputs[i].newestStamp, stamp)
                        let type = inputs[i].reader.topic.type
                        pending.append(
                            Pending(
                                stamp: stamp, rank: i, arrivalSeconds: arrival, order: arrivals,
                                frame: WireFrame(
                                    topic: inputs[i].pipelineTopic, type: type, encoding: "cdr", payload: sample.bytes))
                        )
                        arrivals += 1
                    }
                }
            }
            if !pending.isEmpty { try release(&pending, emit: emit) }
            watchForSilence(now: Clocks.monotonicSeconds())
        }
        if !pending.isEmpty { try release(&pending, emit: emit, all: true) }
        report()
    }

    /// Emits, in stamp order (imu, mag, fix among equal stamps), every pending sample no other topic
    /// can still precede: stamped no later than the newest sample of every sensor topic that has a
    /// publisher, or waiting longer than the window.
    func release(_ pending: inout [Pending], emit: ([WireFrame]) throws -> Double, all: Bool = false) throws {
        pending.sort { ($0.stamp, $0.rank, $0.order) < ($1.stamp, $1.rank, $1.order) }
        let watermark =
            inputs.filter { $0.ordered && ($0.reader.matchedWriters > 0 || $0.newestStamp != .min) }
            .map(\.newestStamp).min() ?? .max
        let expired = Clocks.monotonicSeconds() - settings.orderWindowSeconds
        var count = 0
        for p in pending {
            guard all || p.stamp <= watermark || p.arrivalSeconds <= expired || p.frame.topic == PipelineTopics.fix
            else { break }
            count += 1
        }
        guard count > 0 else { return }
        _ = try emit(pending[..<count].map(\.frame))
        pending.removeFirst(count)
    }

    func watchForSilence(now: Double) {
        for input in inputs {
            let reader = input.reader
            warnings.observe(reader.topic.name, matched: reader.matchedWriters > 0, now: now, log: log) {
                "\(stage): " + discovery.whyNoPublisher(for: reader.topic, domainId: UInt32(settings.domainId))
            }
        }
    }

    func report() {
        for input in inputs {
            var text = "\(input.reader.topic.name): \(input.taken) message(s)"
            if input.malformed > 0 { text += ", \(input.malformed) malformed skipped" }
            let lost = input.reader.samplesLost
            if lost > 0 { text += ", \(lost) lost by DDS (best effort)" }
            notes.append(text)
            losses += input.malformed
        }
    }
}
