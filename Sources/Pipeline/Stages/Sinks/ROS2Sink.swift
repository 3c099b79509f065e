import Foundation
import CompassCore
import WireFormat
import MessageBus
import ROS2DDS

/// The fusion outputs on ROS 2 topics over DDS, as imu_filter_madgwick publishes them:
///   imu/data            sensor_msgs/msg/Imu with orientation and its covariance (bytes as fused)
///   heading             gyrocompass_msgs/msg/Heading (bytes as fused)
///   heading/quaternion  geometry_msgs/msg/QuaternionStamped: the heading as a rotation about the
///                       vertical (true north when known), for users without gyrocompass_msgs
///   /tf                 tf2_msgs/msg/TFMessage fixed_frame -> the IMU frame (publish_tf)
///   /diagnostics        diagnostic_msgs/msg/DiagnosticArray: heading, calibration and interference
///                       health once per diagnostics_period_s (wall clock), and once at the end
/// With world_frame enu and no offsets the Imu bytes go out exactly as the fusion stage made them.
final class ROS2Sink: StageLogic, SinkLogic, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        var domainId = 0
        var namespace = "/"
        /// ROS topics ("" = not published).
        var imuTopic = "imu/data", headingTopic = "heading", quaternionTopic = "heading/quaternion"
        /// The sensor readings as they arrive (imu/data_raw, imu/mag), for a ROS 2 graph fed by a simulated
        /// or recorded sensor ("" = not published).
        var rawImuTopic = "", magnetometerTopic = ""
        /// QoS of every writer, written the ROS 2 way (`ROS2QoS.syntax`).
        var qosText = "default"
        /// Publish fixed_frame -> IMU frame on /tf.
        var publishTF = false
        var fixedFrame = "odom"
        /// The world frame of the published orientation: ENU (REP-103) or NED.
        var worldFrame = WorldFrame.enu
        /// Rotation about the vertical applied to the published orientation, radians
        /// (counterclockwise seen from above); the declination is subtracted from it, as
        /// imu_filter_madgwick does, so a magnetic orientation becomes a true one.
        var yawOffsetRadians = 0.0, declinationRadians = 0.0
        /// Roll and pitch standard deviation for the orientation covariance, radians (0 = leave the
        /// filter's: heading only).
        var orientationStddevRadians = 0.0
        /// Hold the stream until this many subscribers matched (counted over the published topics).
        var waitForSubscribers = 0
        /// ROS topic for the health ("" = none), and how often it is published, seconds.
        var diagnosticsTopic = "/diagnostics"
        var diagnosticsPeriodSeconds = 1.0
        /// 95 % heading bounds that make the heading status a warning and an error, degrees.
        var diagnosticsWarnAccuracyDegrees = 10.0
        var diagnosticsErrorAccuracyDegrees = 45.0

        enum WorldFrame: String, CaseIterable {
            case enu, ned
        }

        static let table = SettingTable<Settings>([
            ROS2Settings.domain(\.domainId),
            ROS2Settings.namespace(\.namespace),
            .string("imu_topic", \.imuTopic, "ROS topic for sensor_msgs/msg/Imu with orientation ('' = none)"),
            .string("heading_topic", \.headingTopic, "ROS topic for gyrocompass_msgs/msg/Heading ('' = none)"),
            .string(
                "quaternion_topic", \.quaternionTopic,
                "ROS topic for the heading as geometry_msgs/msg/QuaternionStamped ('' = none)"),
            .string(
                "raw_imu_topic", \.rawImuTopic,
                "ROS topic for the raw IMU readings it reads (imu/data_raw, sensor_msgs/msg/Imu) ('' = none): a "
                    + "simulated or recorded sensor for a ROS 2 graph"),
            .string(
                "mag_topic", \.magnetometerTopic,
                "ROS topic for the magnetometer readings it reads (imu/mag, sensor_msgs/msg/MagneticField) ('' = none)"
            ),
            .string("qos", \.qosText, "QoS of every writer: " + ROS2QoS.syntax),
            .bool("publish_tf", \.publishTF, "publish fixed_frame -> IMU frame on /tf (tf2_msgs/msg/TFMessage)"),
            .string("fixed_frame", \.fixedFrame, "parent frame of the /tf transform"),
            .choice("world_frame", \.worldFrame, "world frame of the orientation"),
            .number(
                "yaw_offset", \.yawOffsetRadians, unit: "rad", range: -7...7,
                "rotation about the vertical added to the orientation"),
            .number(
                "declination", \.declinationRadians, unit: "rad", range: -3.15...3.15,
                "magnetic declination subtracted from the yaw, east positive"),
            .number(
                "orientation_stddev", \.orientationStddevRadians, unit: "rad", range: 0...3.15,
                "roll and pitch standard deviation in the orientation covariance (0 = heading only)"),
            .integer(
                "wait_for_subscribers", \.waitForSubscribers, range: 0...10_000,
                "hold the stream until this many subscribers matched"),
            .string(
                "diagnostics_topic", \.diagnosticsTopic,
                "ROS topic for the health as diagnostic_msgs/msg/DiagnosticArray ('' = none)"),
            .number(
                "diagnostics_period_s", \.diagnosticsPeriodSeconds, unit: "s", range: 0.01...3600,
                "publish the health this often (diagnostic_updater's default: 1 s)"
            ).formerly("diagnostics_period"),
            .number(
                "diagnostics_warn_accuracy_deg", \.diagnosticsWarnAccuracyDegrees, unit: "deg",
                range: SettingSpec.degreesRange, "a 95 % heading bound above this makes the heading status WARN"),
            .number(
                "diagnostics_error_accuracy_deg", \.diagnosticsErrorAccuracyDegrees, unit: "deg",
                range: SettingSpec.degreesRange, "a 95 % heading bound above this makes the heading status ERROR"),
        ])

        var worldNED: Bool { worldFrame == .ned }
        /// The writers' QoS (checked when the file loaded).
        var qos: ROS2QoS { (try? ROS2QoS(parsing: qosText)) ?? .rosDefault }

        /// True when the Imu must be rewritten (otherwise its bytes go on as they are).
        var changesOrientation: Bool {
            worldNED || yawOffsetRadians != declinationRadians || orientationStddevRadians > 0
        }
    }

    static let type = StageType(
        name: "ros2_sink", role: .sink,
        summary:
            "the fused orientation and heading on ROS 2 topics over DDS (imu/data, heading, /tf), or the readings it "
            + "reads (imu/data_raw, imu/mag)",
        settings: Settings.table, restart: .joinsLive,
        check: { settings, _ in
            ROS2Settings.check(
                qos: ["qos": settings.qosText],
                topics: [
                    "imu_topic": settings.imuTopic, "heading_topic": settings.headingTopic,
                    "quaternion_topic": settings.quaternionTopic, "diagnostics_topic": settings.diagnosticsTopic,
                    "raw_imu_topic": settings.rawImuTopic, "mag_topic": settings.magnetometerTopic,
                ], namespace: settings.namespace)
        }
    ) { settings, context in try ROS2Sink(settings, stage: context.stage, stop: context.stop, log: context.log) }

    let settings: Settings
    let stage: String
    let log: @Sendable (String) -> Void
    let participant: DomainParticipant
    let discovery: EndpointDiscovery
    var imuWriter: SerializedWriter?, headingWriter: SerializedWriter?, quaternionWriter: SerializedWriter?
    var tfWriter: SerializedWriter?, diagnosticsWriter: SerializedWriter?
    var rawImuWriter: SerializedWriter?, magnetometerWriter: SerializedWriter?
    var writers: [SerializedWriter] {
        [imuWriter, headingWriter, quaternionWriter, tfWriter, diagnosticsWriter, rawImuWriter, magnetometerWriter]
            .compactMap { $0 }
    }
    var health = HealthDiagnostics()
    var lastDiagnostics = 0.0
    /// Messages written per ROS topic; writes that waited for a slow reliable reader.
    var written: [String: Int] = [:]
    var blockedWrites = 0
    var warnings = SilentTopicWarnings()
    var lastCheck = 0.0
    var reportedIncompatible: [String: Int] = [:]
    /// Rotation from the filter's ENU (magnetic) world to the published world.
    let worldRotation: Quaternion

    /// The run's stop request, polled between reads.
    let stop: StopToken

    init(
        _ settings: Settings, stage: String, stop: StopToken = StopToken(), log: @escaping @Sendable (String) -> Void
    ) throws {
        self.stop = stop
        self.settings = settings
        self.stage = stage
        self.log = log
        let yaw = settings.yawOffsetRadians - settings.declinationRadians
        let aboutUp = Quaternion(w: cos(yaw / 2), x: 0, y: 0, z: sin(yaw / 2))
        // ENU -> NED: half a turn about the axis between east and north.
        let enuToNED = Quaternion(w: 0, x: 0.5.squareRoot(), y: 0.5.squareRoot(), z: 0)
        worldRotation = settings.worldNED ? enuToNED * aboutUp : aboutUp
        do {
            // Batched writes, flushed after each burst of input: few packets in bulk, no wait when live.
            let participant = try DomainParticipant(domainId: UInt32(settings.domainId), writeBatching: true)
            self.participant = participant
            func writer(_ name: String, _ type: String, _ qos: ROS2QoS) throws -> SerializedWriter? {
                name.isEmpty
                    ? nil
                    : try SerializedWriter(
                        participant, try ROS2Topic(name, namespace: settings.namespace, type: type, qos: qos))
            }
            let qos = settings.qos
            imuWriter = try writer(settings.imuTopic, ImuMessage.typeName, qos)
            headingWriter = try writer(settings.headingTopic, HeadingMessage.typeName, qos)
            quaternionWriter = try writer(settings.quaternionTopic, QuaternionStampedMessage.typeName, qos)
            rawImuWriter = try writer(settings.rawImuTopic, ImuMessage.typeName, qos)
            magnetometerWriter = try writer(settings.magnetometerTopic, MagneticFieldMessage.typeName, qos)
            // tf2's broadcaster QoS: reliable, volatile, keep last 100.
            var tfQoS = ROS2QoS.rosDefault
            tfQoS.history = .keepLast(100)
            tfWriter = settings.publishTF ? try writer("/tf", TFMessage.typeName, tfQoS) : nil
            // diagnostic_updater's publisher: reliable, volatile, keep last 10 (the ROS default).
            diagnosticsWriter = try writer(settings.diagnosticsTopic, DiagnosticArrayMessage.typeName, .rosDefault)
            discovery = try EndpointDiscovery(participant, .subscriptions)
        } catch let e as DDSError {
            throw StageFailure("\(stage): \(e)")
        } catch let e as ROS2NameError {
            throw StageFailure("\(stage): \(e)")
        }
        super.init()
        health.warnAccuracyDegrees = settings.diagnosticsWarnAccuracyDegrees
        health.errorAccuracyDegrees = settings.diagnosticsErrorAccuracyDegrees
        lastDiagnostics = Clocks.monotonicSeconds()
        try waitForSubscribers()
    }

    func waitForSubscribers() throws {
        // The health topic is not what a run waits for: a monitor may come and go.
        let writers = writers.filter { $0 !== diagnosticsWriter }
        guard settings.waitForSubscribers > 0, !writers.isEmpty else { return }
        var announced = 0.0
        let start = Clocks.monotonicSeconds()
        func matched() -> Int { writers.reduce(0) { $0 + $1.matchedReaders } }
        while matched() < settings.waitForSubscribers {
            if stop.requested { return }
            let waited = Clocks.monotonicSeconds() - start
            if waited >= announced {
                log(
                    "\(stage): waiting for \(settings.waitForSubscribers - matched()) subscriber(s) of "
                        + writers.map(\.topic.name).joined(separator: ", "))
                announced = waited + 5
            }
            usleep(2000)
        }
        // Volatile readers that just matched can still miss the first samples; give discovery a moment.
        usleep(50_000)
    }

    var inputHandling: InputHandling { .decoded }

    func consume(_ frame: consuming WireFrame) throws {
        if diagnosticsWriter != nil { try observeHealth(frame) }
        switch frame.topic {
        case PipelineTopics.imuRaw:
            guard rawImuWriter != nil else { return }
            try requireCDR(frame, ImuMessage.typeName)
            try write(frame.payload, rawImuWriter)
        case PipelineTopics.magnetometer:
            guard magnetometerWriter != nil else { return }
            try requireCDR(frame, MagneticFieldMessage.typeName)
            try write(frame.payload, magnetometerWriter)
        case PipelineTopics.imuFused:
            guard imuWriter != nil || tfWriter != nil else { return }
            try requireCDR(frame, ImuMessage.typeName)
            if !settings.changesOrientation && tfWriter == nil {
                try write(frame.payload, imuWriter)
                return
            }
            var imu = try decoded(frame, as: ImuMessage.self)
            if settings.changesOrientation {
                imu.orientation = worldRotation * imu.orientation
                if settings.orientationStddevRadians > 0 {
                    let v = settings.orientationStddevRadians * settings.orientationStddevRadians
                    imu.orientationCovariance.m0 = v
                    imu.orientationCovariance.m4 = v
                }
                try write(imu.cdr()[...], imuWriter)
            } else {
                try write(frame.payload, imuWriter)
            }
            if tfWriter != nil {
                let transform = TFMessage.Transform(
                    header: RosHeader(stamp: imu.header.stamp, frameId: settings.fixedFrame),
                    childFrameId: imu.header.frameId, translation: Vector3(0, 0, 0), rotation: imu.orientation)
                try write(TFMessage(transforms: [transform]).cdr()[...], tfWriter)
            }
        case PipelineTopics.heading:
            guard headingWriter != nil || quaternionWriter != nil else { return }
            try requireCDR(frame, HeadingMessage.typeName)
            try write(frame.payload, headingWriter)
            if quaternionWriter != nil {
                let h = try decoded(frame, as: HeadingMessage.self)
                let degrees = h.trueHeading.isFinite ? h.trueHeading : h.magneticHeading
                guard degrees.isFinite else { return }
                // ENU yaw = 90 deg - heading; NED yaw = heading (both about their own vertical).
                let yaw = settings.worldNED ? degrees * radiansPerDegree : (90 - degrees) * radiansPerDegree
                let q = Quaternion(w: cos(yaw / 2), x: 0, y: 0, z: sin(yaw / 2))
                try write(QuaternionStampedMessage(header: h.header, quaternion: q).cdr()[...], quaternionWriter)
            }
        default:
            return
        }
    }

    /// Feeds the health, and publishes it when a diagnostics period has passed.
    func observeHealth(_ frame: borrowing WireFrame) throws {
        guard try health.observe(frame: frame) else { return }
        let now = Clocks.monotonicSeconds()
        if now - lastDiagnostics >= settings.diagnosticsPeriodSeconds {
            lastDiagnostics = now
            try write(health.report().cdr()[...], diagnosticsWriter)
        }
    }

    /// Writes one message; a reliable keep-all reader that is behind holds the stream (lossless, as
    /// the edges between stages are) until it catches up or the run is stopped.
    func write(_ bytes: ArraySlice<UInt8>, _ writer: SerializedWriter?) throws {
        guard let writer else { return }
        while true {
            do {
                try writer.write(bytes)
                written[writer.topic.name, default: 0] += 1
                break
            } catch  where error.isTimeout {
                blockedWrites += 1
                if stop.requested { return }
            } catch {
                throw StageFailure("\(stage): \(error)")
            }
        }
        let now = Clocks.monotonicSeconds()
        if now - lastCheck >= 1 {
            lastCheck = now
            watchSubscribers(now: now)
        }
    }

    func watchSubscribers(now: Double) {
        for w in writers {
            let incompatible = w.incompatibleReaders
            if incompatible.count > reportedIncompatible[w.topic.name, default: 0] {
                reportedIncompatible[w.topic.name] = incompatible.count
                log(
                    "\(stage): \(w.topic.name): \(incompatible.count) subscriber(s) refused: their QoS asks for more "
                        + "than this publisher offers (\(w.topic.qos); policy: \(incompatible.policy))")
            }
            warnings.observe(w.topic.name, matched: w.matchedReaders > 0, now: now, log: log) {
                discovery.whyNoSubscriber(for: w.topic).map { "\(stage): \($0)" }
            }
        }
    }

    func inputDrained() throws {
        for w in writers { w.flush() }
    }

    func close() throws {
        // The health at the end of the run, so a short replay reports at least once.
        if diagnosticsWriter != nil, health.heading != nil {
            try write(health.report(final: true).cdr()[...], diagnosticsWriter)
        }
        for w in writers { w.flush() }
        // Reliable subscribers get everything before this participant leaves the domain.
        for w in writers where w.topic.qos.reliability == .reliable && w.matchedReaders > 0 {
            if !w.waitForAcknowledgments(timeoutSeconds: 2) {
                notes.append("\(w.topic.name): not every subscriber acknowledged the last messages within 2 s")
            }
        }
        var parts = writers.map { "\(written[$0.topic.name, default: 0]) on \($0.topic.name)" }
        if blockedWrites > 0 { parts.append("\(blockedWrites) write(s) waited for a slow reliable subscriber") }
        notes.append("published over DDS (domain \(settings.domainId)): " + parts.joined(separator: ", "))
        participant.close()
        return
    }
}
