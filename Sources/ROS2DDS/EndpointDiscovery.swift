import CCycloneDDS
import DDSSerializedType

/// What discovery has seen of other endpoints, so a reader that hears nothing (or a writer nobody
/// reads) can say why: nobody publishes that topic, a publisher uses another type, or its QoS
/// cannot serve ours. Reads Cyclone's built-in DCPSPublication / DCPSSubscription topics.
public final class EndpointDiscovery: @unchecked Sendable {
    /// One remote (or local) endpoint as discovery announced it.
    public struct Endpoint: Sendable, Equatable {
        public let ddsTopic: String
        public let ddsType: String
        public let reliability: ROS2QoS.Reliability?
        public let durability: ROS2QoS.Durability?
    }

    public enum Kind { case publications, subscriptions }

    let kind: Kind
    let reader: dds_entity_t
    /// Endpoints alive now, by their DDS instance handle.
    private(set) var endpoints: [dds_instance_handle_t: Endpoint] = [:]

    public init(_ participant: DomainParticipant, _ kind: Kind) throws(DDSError) {
        self.kind = kind
        let topic = kind == .publications ? gcdds_builtin_publications() : gcdds_builtin_subscriptions()
        reader = try DDSError.check(dds_create_reader(participant.handle, topic, nil, nil), "reading DDS discovery")
    }

    /// Takes what discovery learnt since the last call.
    public func refresh() {
        var pointers = [UnsafeMutableRawPointer?](repeating: nil, count: 64)
        var infos = [dds_sample_info_t](repeating: dds_sample_info_t(), count: 64)
        while true {
            let n = pointers.withUnsafeMutableBufferPointer { p in
                infos.withUnsafeMutableBufferPointer { i in dds_take(reader, p.baseAddress, i.baseAddress, 64, 64) }
            }
            guard n > 0 else { return }
            for k in 0..<Int(n) {
                let info = infos[k]
                if info.instance_state != DDS_IST_ALIVE {
                    endpoints[info.instance_handle] = nil
                    continue
                }
                guard info.valid_data, let p = pointers[k] else { continue }
                let e = p.assumingMemoryBound(to: dds_builtintopic_endpoint_t.self).pointee
                let qos = ROS2QoS.announced(e.qos)
                endpoints[info.instance_handle] = Endpoint(
                    ddsTopic: e.topic_name.map { String(cString: $0) } ?? "",
                    ddsType: e.type_name.map { String(cString: $0) } ?? "",
                    reliability: qos?.0, durability: qos?.1)
            }
            pointers.withUnsafeMutableBufferPointer { _ = dds_return_loan(reader, $0.baseAddress, n) }
            if n < 64 { return }
        }
    }

    /// Every endpoint alive now.
    public var all: [Endpoint] { Array(endpoints.values) }

    /// Endpoints on a DDS topic.
    public func on(_ ddsTopic: String) -> [Endpoint] { endpoints.values.filter { $0.ddsTopic == ddsTopic } }

    /// Why a reader of `topic` has no matched publisher, in one sentence naming the topic.
    public func whyNoPublisher(for topic: ROS2Topic, domainId: UInt32) -> String {
        refresh()
        let here = on(topic.ddsTopic)
        let otherType = here.filter { $0.ddsType != topic.ddsType }
        if let t = otherType.first {
            let theirs = ROS2Names.rosType(ofDDSType: t.ddsType) ?? t.ddsType
            return "\(topic.name): a publisher sends \(theirs), this reader expects \(topic.type); types must match"
        }
        for e in here {
            if let offered = e.reliability.flatMap({ r in e.durability.map { (r, $0) } }),
                let why = topic.qos.mismatch(offered: offered)
            {
                return "\(topic.name): a publisher's QoS cannot serve this reader (\(topic.qos)): \(why)"
            }
        }
        if !here.isEmpty { return "\(topic.name): publisher seen, not matched yet" }
        let leaf = topic.name.split(separator: "/").last.map(String.init) ?? topic.name
        let similar = Set(
            endpoints.values.compactMap { ROS2Names.rosTopic(ofDDSTopic: $0.ddsTopic) }
                .filter { $0.hasSuffix("/" + leaf) && $0 != topic.name }
        ).sorted()
        var text =
            "\(topic.name): no publisher seen in DDS domain \(domainId) (\(DomainParticipant.configurationSource))"
        if !similar.isEmpty { text += "; published nearby: \(similar.prefix(4).joined(separator: ", "))" }
        return text
    }

    /// Why a writer of `topic` has no matched subscriber, or nil when nobody tried to subscribe.
    public func whyNoSubscriber(for topic: ROS2Topic) -> String? {
        refresh()
        let here = on(topic.ddsTopic)
        if let t = here.first(where: { $0.ddsType != topic.ddsType }) {
            let theirs = ROS2Names.rosType(ofDDSType: t.ddsType) ?? t.ddsType
            return "\(topic.name): a subscriber expects \(theirs), this publisher sends \(topic.type)"
        }
        for e in here {
            guard let r = e.reliability, let d = e.durability else { continue }
            let asked = ROS2QoS(reliability: r, durability: d, history: .keepLast(1))
            let offered = (topic.qos.reliability, topic.qos.durability)
            if let why = asked.mismatch(
                offered: offered, writer: "this publisher offers", reader: "the subscriber asks for")
            {
                return "\(topic.name): a subscriber's QoS cannot be served by this publisher (\(topic.qos)): \(why)"
            }
        }
        return nil
    }
}
