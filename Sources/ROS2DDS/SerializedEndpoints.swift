import CCycloneDDS
import DDSSerializedType

/// What a topic endpoint is: ROS name, type, QoS, and its DDS spelling.
public struct ROS2Topic: Sendable, Equatable, CustomStringConvertible {
    /// The fully qualified ROS name ("/imu/data").
    public let name: String
    /// The ROS type ("sensor_msgs/msg/Imu").
    public let type: String
    public let qos: ROS2QoS
    public let ddsTopic: String
    public let ddsType: String

    public init(_ name: String, namespace: String = "/", type: String, qos: ROS2QoS) throws(ROS2NameError) {
        self.name = try ROS2Names.qualified(name, namespace: namespace)
        self.type = type
        self.qos = qos
        ddsTopic = try ROS2Names.ddsTopic(name, namespace: namespace)
        ddsType = try ROS2Names.ddsType(type)
    }

    public var description: String { "\(name) (\(type), \(qos))" }

    /// A topic entity on `participant` whose samples are serialized bytes.
    func makeTopic(_ participant: DomainParticipant) throws(DDSError) -> (dds_entity_t, OpaquePointer?) {
        var type: OpaquePointer?
        let topic = try DDSError.check(
            gcdds_create_serialized_topic(participant.handle, ddsTopic, ddsType, nil, &type),
            "creating DDS topic \(ddsTopic)")
        return (topic, type)
    }

    /// rmw puts "typehash=RIHS01_<sha256>;" in every endpoint's user data (Jazzy and later).
    var userData: String? { TypeHashes.rihs01(type).map { "typehash=\($0);" } }
}

/// Publishes serialized ROS 2 messages (encapsulation header + CDR body, as rosbag2 stores them) on
/// one topic, without decoding them.
public final class SerializedWriter: @unchecked Sendable {
    public let topic: ROS2Topic
    let handle: dds_entity_t
    /// The domain's type object for the topic (serialized samples are made from it).
    let type: OpaquePointer?

    public init(_ participant: DomainParticipant, _ topic: ROS2Topic) throws(DDSError) {
        self.topic = topic
        let (t, type) = try topic.makeTopic(participant)
        self.type = type
        let qos = topic.qos.makeQoS(userData: topic.userData)
        defer { dds_delete_qos(qos) }
        handle = try DDSError.check(
            dds_create_writer(participant.handle, t, qos, nil), "creating a writer on \(topic.ddsTopic)")
    }

    /// Sends one message. With reliable QoS and keep-all history this blocks while a matched reader
    /// is behind (up to the 100 ms max blocking time, then throws a timeout).
    public func write(_ bytes: [UInt8]) throws(DDSError) { try write(bytes[...]) }

    /// As above, for a payload inside a larger buffer (a frame received from the bus).
    public func write(_ bytes: ArraySlice<UInt8>) throws(DDSError) {
        let rc = bytes.withUnsafeBytes { gcdds_write_serialized(handle, type, $0.baseAddress, UInt32($0.count)) }
        try DDSError.check(rc, "writing on \(topic.ddsTopic)")
    }

    /// Sends what write batching gathered (see `DomainParticipant`); nothing to do without it.
    public func flush() { dds_write_flush(handle) }

    /// Readers currently matched (QoS and type agree).
    public var matchedReaders: Int {
        var s = dds_publication_matched_status_t()
        return dds_get_publication_matched_status(handle, &s) == 0 ? Int(s.current_count) : 0
    }

    /// Readers seen so far that asked for more than this writer offers, and the last policy at fault.
    public var incompatibleReaders: (count: Int, policy: String) {
        var s = dds_offered_incompatible_qos_status_t()
        guard dds_get_offered_incompatible_qos_status(handle, &s) == 0 else { return (0, "") }
        return (Int(s.total_count), policyName(dds_qos_policy_id_t(rawValue: s.last_policy_id)))
    }

    /// Waits until every matched reader acknowledged what was written (reliable), or the timeout.
    public func waitForAcknowledgments(timeoutSeconds: Double) -> Bool {
        dds_wait_for_acks(handle, dds_duration_t(timeoutSeconds * 1e9)) == 0
    }
}

/// One sample taken from a reader: its bytes and when its writer wrote it.
public struct SerializedSample: Sendable {
    public var bytes: [UInt8]
    /// The writer's source time stamp, nanoseconds since the epoch.
    public var sourceTimestamp: Int64
}

/// Takes serialized ROS 2 messages from one topic, without decoding them.
public final class SerializedReader: @unchecked Sendable {
    public let topic: ROS2Topic
    let handle: dds_entity_t
    private var slots: [OpaquePointer?]
    private var infos: [dds_sample_info_t]

    public init(_ participant: DomainParticipant, _ topic: ROS2Topic, batch: Int = 256) throws(DDSError) {
        self.topic = topic
        let (t, _) = try topic.makeTopic(participant)
        let qos = topic.qos.makeQoS(userData: topic.userData)
        defer { dds_delete_qos(qos) }
        handle = try DDSError.check(
            dds_create_reader(participant.handle, t, qos, nil), "creating a reader on \(topic.ddsTopic)")
        slots = Array(repeating: nil, count: batch)
        infos = Array(repeating: dds_sample_info_t(), count: batch)
    }

    /// Appends every sample waiting (valid data only) to `into`; returns how many.
    @discardableResult
    public func take(into samples: inout [SerializedSample]) throws(DDSError) -> Int {
        var total = 0
        while true {
            let n = slots.withUnsafeMutableBufferPointer { s in
                infos.withUnsafeMutableBufferPointer { i in
                    gcdds_take_serialized(handle, s.baseAddress!, i.baseAddress!, UInt32(s.count))
                }
            }
            try DDSError.check(n, "taking from \(topic.ddsTopic)")
            for k in 0..<Int(n) {
                guard let sample = slots[k] else { continue }
                if infos[k].valid_data {
                    let size = gcdds_sample_size(sample)
                    var bytes = [UInt8](repeating: 0, count: Int(size))
                    bytes.withUnsafeMutableBytes { gcdds_sample_copy(sample, $0.baseAddress, size) }
                    samples.append(SerializedSample(bytes: bytes, sourceTimestamp: infos[k].source_timestamp))
                    total += 1
                }
                gcdds_release(sample)
                slots[k] = nil
            }
            if Int(n) < slots.count { return total }
        }
    }

    /// Writers currently matched (QoS and type agree).
    public var matchedWriters: Int {
        var s = dds_subscription_matched_status_t()
        return dds_get_subscription_matched_status(handle, &s) == 0 ? Int(s.current_count) : 0
    }

    /// Writers seen so far that offered less than this reader asks, and the last policy at fault.
    public var incompatibleWriters: (count: Int, policy: String) {
        var s = dds_requested_incompatible_qos_status_t()
        guard dds_get_requested_incompatible_qos_status(handle, &s) == 0 else { return (0, "") }
        return (Int(s.total_count), policyName(dds_qos_policy_id_t(rawValue: s.last_policy_id)))
    }

    /// Samples the middleware lost for this reader (best effort gaps, or a keep-last history overrun
    /// is not counted: that is the history's promise).
    public var samplesLost: Int {
        var s = dds_sample_lost_status_t()
        return dds_get_sample_lost_status(handle, &s) == 0 ? Int(s.total_count) : 0
    }
}

/// Waits for data on several readers at once, with a timeout so the caller can check for a stop.
public final class ReaderWaitSet: @unchecked Sendable {
    let handle: dds_entity_t

    public init(_ participant: DomainParticipant, readers: [SerializedReader]) throws(DDSError) {
        handle = try DDSError.check(dds_create_waitset(participant.handle), "creating a wait set")
        for (i, r) in readers.enumerated() {
            let condition = try DDSError.check(
                dds_create_readcondition(r.handle, gcdds_any_state()),
                "creating a read condition on \(r.topic.ddsTopic)")
            try DDSError.check(dds_waitset_attach(handle, condition, dds_attach_t(i)), "attaching \(r.topic.ddsTopic)")
        }
    }

    /// True when some reader has data; false at the timeout.
    public func wait(timeoutSeconds: Double) throws(DDSError) -> Bool {
        let n = dds_waitset_wait(handle, nil, 0, dds_duration_t(timeoutSeconds * 1e9))
        return try DDSError.check(n, "waiting for data") > 0
    }
}

func policyName(_ id: dds_qos_policy_id_t) -> String {
    switch id {
    case DDS_RELIABILITY_QOS_POLICY_ID: return "reliability"
    case DDS_DURABILITY_QOS_POLICY_ID: return "durability"
    case DDS_HISTORY_QOS_POLICY_ID: return "history"
    case DDS_DEADLINE_QOS_POLICY_ID: return "deadline"
    case DDS_LIVELINESS_QOS_POLICY_ID: return "liveliness"
    case DDS_DATA_REPRESENTATION_QOS_POLICY_ID: return "data representation"
    case DDS_TYPE_CONSISTENCY_ENFORCEMENT_QOS_POLICY_ID: return "type consistency"
    default: return "QoS policy \(id.rawValue)"
    }
}
