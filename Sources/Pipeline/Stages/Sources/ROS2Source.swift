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
    struct Settings: DeclaredSettings {
        /// DDS domain (ROS_DOMAIN_ID).
        var domainId = 0
        /// Namespace relative topic names resolve in.
        var namespace = "/"
        /// ROS topics read as imu/data_raw, imu/mag and fix ("" = not read).
        var imuTopic = "imu/data_raw", magnetometerTopic = "imu/mag", fixTopic = ""
        /// Read the magnetometer; false = gyro and accelerometer only.
        var useMagnetometer = true
        /// ROS topics with a GNSS receiver's velocity and dual-antenna heading, read as gnss/velocity and
        /// gnss/heading ("" = not read).
        var velocityTopic = "", gnssHeadingTopic = ""
        /// Magnetometers besides the primary, as NAME=TOPIC: the ROS topic read as imu/mag/NAME (mag_qos).
        var extraMagnetometers: [String] = []
        /// ROS topic with the motors' current, read as motor/current ("" = none), and its type.
        var currentTopic = ""
        var currentType = CurrentType.batteryState

        enum CurrentType: String, CaseIterable {
            /// sensor_msgs/msg/BatteryState (`current`, negative while discharging).
            case batteryState = "battery_state"
            /// std_msgs/msg/Float32 or Float64: amperes drawn, stamped on arrival.
            case float32, float64

            var typeName: String {
                switch self {
                case .batteryState: BatteryStateMessage.typeName
                case .float32: "std_msgs/msg/Float32"
                case .float64: "std_msgs/msg/Float64"
                }
            }
        }
        /// QoS of every reader, and of each ("" = `qos`), written the ROS 2 way (`ROS2QoS.syntax`).
        var qos = "sensor_data", imuQoSText = "", magQoSText = "", fixQoSText = ""
        /// ROS topic with the robot's static transforms, read as tf_static ("" = none); its QoS is
        /// a static broadcaster's (reliable, transient local: the transforms sent before we joined).
        var tfTopic = "", tfQoSText = "default, transient_local"
        /// How long a sample may wait for one of another topic stamped before it, milliseconds.
        var orderWindowMilliseconds = 2.0
        /// Seconds to run (0 = until stopped); seconds without data, once data came, that end the
        /// stream (0 = never).
        var durationSeconds = 0.0, idleEndSeconds = 0.0
        var pauseWithoutSubscribers = true

        static let table = SettingTable<Settings>([
            ROS2Settings.domain(\.domainId),
            ROS2Settings.namespace(\.namespace),
            .string("imu_topic", \.imuTopic, "ROS topic with sensor_msgs/msg/Imu (raw: no orientation)"),
            .string("mag_topic", \.magnetometerTopic, "ROS topic with sensor_msgs/msg/MagneticField ('' = none)"),
            .strings(
                "extra_magnetometers", \.extraMagnetometers,
                "magnetometers besides the primary as NAME=TOPIC (mast=mast/mag): the ROS topic (mag_qos) passed on "
                    + "as imu/mag/NAME, fused with the primary by the kalman filter"),
            .bool("use_mag", \.useMagnetometer, "read the magnetometer; false = gyro and accelerometer only"),
            .string("fix_topic", \.fixTopic, "ROS topic with sensor_msgs/msg/NavSatFix ('' = none), e.g. fix"),
            .string(
                "velocity_topic", \.velocityTopic,
                "ROS topic with a GNSS receiver's velocity (geometry_msgs/msg/TwistWithCovarianceStamped, ENU; '' = "
                    + "none), e.g. vel"),
            .string(
                "gnss_heading_topic", \.gnssHeadingTopic,
                "ROS topic with a dual-antenna receiver's heading (sensor_msgs/msg/Imu orientation and yaw variance; "
                    + "'' = none)"),
            .string(
                "current_topic", \.currentTopic, "ROS topic with the motors' current, read as motor/current ('' = none)"
            ),
            .choice(
                "current_type", \.currentType,
                "type of current_topic: battery_state (sensor_msgs/msg/BatteryState), or float32/float64 "
                    + "(std_msgs, amperes drawn, stamped on arrival)"),
            .string("qos", \.qos, "QoS of every reader: " + ROS2QoS.syntax),
            .string("imu_qos", \.imuQoSText, "QoS of the imu reader ('' = qos)"),
            .string("mag_qos", \.magQoSText, "QoS of the mag reader ('' = qos)"),
            .string("fix_qos", \.fixQoSText, "QoS of the fix reader ('' = qos)"),
            .string(
                "tf_topic", \.tfTopic,
                "ROS topic with static transforms (tf2_msgs/msg/TFMessage, e.g. /tf_static), passed on as 'tf_static' "
                    + "for a mount stage's tf rotations ('' = none)"),
            .string("tf_qos", \.tfQoSText, "QoS of the tf reader (a static broadcaster's: latched)"),
            .number(
                "order_window_ms", \.orderWindowMilliseconds, unit: "ms", range: 0...1000,
                "how long a sample waits for one of another topic stamped before it (0 = arrival order)"),
            .number(
                "duration_s", \.durationSeconds, unit: "s", range: SettingSpec.secondsRange,
                "how long to run; 0 = until stopped"
            ).formerly("duration"),
            .number(
                "end_after_idle_s", \.idleEndSeconds, unit: "s", range: SettingSpec.secondsRange,
                "end the stream after this long without data, once data came (0 = never)"
            ).formerly("end_after_idle"),
            .pauseWithoutSubscribers(\.pauseWithoutSubscribers),
        ])

        /// The magnetometer topic read ("" = none).
        var magTopic: String { useMagnetometer ? magnetometerTopic : "" }
        var imuQoS: ROS2QoS { Self.profile(imuQoSText.isEmpty ? qos : imuQoSText) }
        var magQoS: ROS2QoS { Self.profile(magQoSText.isEmpty ? qos : magQoSText) }
        var fixQoS: ROS2QoS { Self.profile(fixQoSText.isEmpty ? qos : fixQoSText) }
        var tfQoS: ROS2QoS { Self.profile(tfQoSText) }
        var orderWindowSeconds: Double { orderWindowMilliseconds / 1000 }

        /// A profile checked when the file loaded (`ROS2Settings.check`).
        private static func profile(_ text: String) -> ROS2QoS { (try? ROS2QoS(parsing: text)) ?? .sensorData }
    }

    static let type = StageType(
        name: "ros2_source", role: .source,
        summary: "live ROS 2 topics over DDS (imu/data_raw, imu/mag, fix), taken as serialized CDR",
        settings: Settings.table,
        outputTopics: [
            PipelineTopics.imuRaw, PipelineTopics.magnetometer, PipelineTopics.fix, PipelineTopics.tfStatic,
            PipelineTopics.gnssVelocity, PipelineTopics.gnssHeading, PipelineTopics.motorCurrent,
        ],
        check: { settings, _ in
            if let problem = ExtraMagnetometer.problem(settings.extraMagnetometers, primaryTopic: settings.magTopic) {
                return problem
            }
            return ROS2Settings.check(
                qos: [
                    "qos": settings.qos, "imu_qos": settings.imuQoSText, "mag_qos": settings.magQoSText,
                    "fix_qos": settings.fixQoSText, "tf_qos": settings.tfQoSText,
                ],
                topics: [
                    "imu_topic": settings.imuTopic, "mag_topic": settings.magnetometerTopic,
                    "fix_topic": settings.fixTopic, "tf_topic": settings.tfTopic,
                    "velocity_topic": settings.velocityTopic, "gnss_heading_topic": settings.gnssHeadingTopic,
                    "current_topic": settings.currentTopic,
                ], namespace: settings.namespace)
        }
    ) { settings, context in try ROS2Source(settings, stage: context.stage, stop: context.stop, log: context.log) }

    var pausesWithoutSubscribers: Bool { settings.pauseWithoutSubscribers }

    /// One subscribed topic: its reader, the pipeline topic it feeds and how a payload is checked.
    struct Input {
        let reader: SerializedReader
        let pipelineTopic: String
        let check: ([UInt8]) -> CDRError?
        /// Sensor streams are merged in writing order; fixes, GNSS (1-20 Hz, stamped by the receiver's
        /// clock) and transforms go as they come.
        var ordered: Bool { !Self.unordered.contains(pipelineTopic) && !convertsFloat }
        static let unordered: Set<String> = [
            PipelineTopics.fix, PipelineTopics.tfStatic, PipelineTopics.gnssVelocity, PipelineTopics.gnssHeading,
        ]
        /// A std_msgs float current (no header): turned into a BatteryState stamped on arrival.
        var convertsFloat = false
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

    /// The run's stop request, polled between reads.
    let stop: StopToken

    init(
        _ settings: Settings, stage: String, stop: StopToken = StopToken(), log: @escaping @Sendable (String) -> Void
    ) throws {
        self.stop = stop
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
            for extra in try ExtraMagnetometer.parse(settings.extraMagnetometers, primaryTopic: settings.magTopic) {
                inputs.append(
                    try input(
                        extra.topic, MagneticFieldMessage.self, settings.magQoS,
                        PipelineTopics.magnetometer(named: extra.name)))
            }
            if !settings.fixTopic.isEmpty {
                inputs.append(try input(settings.fixTopic, NavSatFixMessage.self, settings.fixQoS, PipelineTopics.fix))
            }
            if !settings.tfTopic.isEmpty {
                inputs.append(try input(settings.tfTopic, TFMessage.self, settings.tfQoS, PipelineTopics.tfStatic))
            }
            if !settings.velocityTopic.isEmpty {
                inputs.append(
                    try input(
                        settings.velocityTopic, TwistWithCovarianceStampedMessage.self, settings.fixQoS,
                        PipelineTopics.gnssVelocity))
            }
            if !settings.gnssHeadingTopic.isEmpty {
                inputs.append(
                    try input(settings.gnssHeadingTopic, ImuMessage.self, settings.fixQoS, PipelineTopics.gnssHeading))
            }
            if !settings.currentTopic.isEmpty { inputs.append(try Self.currentInput(settings, participant)) }
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

    /// The motors' current (BatteryState, or a std_msgs Float32/Float64 in amperes) as an input; a
    /// float is converted to BatteryState when it is read.
    static func currentInput(_ settings: Settings, _ participant: DomainParticipant) throws -> Input {
        let t = try ROS2Topic(
            settings.currentTopic, namespace: settings.namespace, type: settings.currentType.typeName,
            qos: settings.imuQoS)
        let type = settings.currentType.typeName
        var current = Input(
            reader: try SerializedReader(participant, t), pipelineTopic: PipelineTopics.motorCurrent,
            check: { bytes in
                if type == BatteryStateMessage.typeName {
                    do throws(CDRError) {
                        _ = try BatteryStateMessage(cdrBytes: bytes)
                    } catch { return error }
                    return nil
                }
                let decoded = bytes.withUnsafeBytes { b in
                    Result { () throws(CDRError) in try standardFloatValue(type: type, cdr: b) }
                }
                if case .failure(let error) = decoded { return error }
                return nil
            })
        current.convertsFloat = type != BatteryStateMessage.typeName
        return current
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
        while !stop.requested {
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
                        if inputs[i].convertsFloat {
                            // No header: stamped with the wall clock on arrival, as a BatteryState.
                            let type = inputs[i].reader.topic.type
                            let amperes = sample.bytes.withUnsafeBytes { try? standardFloatValue(type: type, cdr: $0) }
                            let message = BatteryStateMessage(
                                header: RosHeader(stamp: Clocks.wallNow(), frameId: ""), drawnAmperes: amperes ?? .nan)
                            pending.append(
                                Pending(
                                    stamp: .min, rank: i, arrivalSeconds: arrival, order: arrivals,
                                    frame: cdrFrame(message, topic: PipelineTopics.motorCurrent)))
                            arrivals += 1
                            continue
                        }
                        // A payload that decoded has a header stamp; transforms (no header) go first.
                        let stamp =
                            inputs[i].pipelineTopic == PipelineTopics.tfStatic
                            ? .min : sample.bytes.withUnsafeBytes { CDRHeaderStamp.read($0) }?.nanoseconds ?? .min
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
            guard
                all || p.stamp <= watermark || p.arrivalSeconds <= expired || !inputs[p.rank].ordered
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
