import CCycloneDDS
import Foundation

/// One DDS domain participant: what a ROS 2 context is on the wire. Discovery follows Cyclone's
/// configuration: its defaults (multicast on the default interface), or the XML file named by
/// `CYCLONEDDS_URI` (Pipelines/cyclonedds-loopback.xml keeps everything on 127.0.0.1). Deleting the
/// participant (on `close` or deinit) leaves the domain cleanly: peers see its endpoints go at once
/// instead of waiting for a lease to expire.
public final class DomainParticipant: @unchecked Sendable {
    public let domainId: UInt32
    let handle: dds_entity_t
    private var closed = false
    private let lock = NSLock()

    /// ROS 2's domain ids are 0...232 (the port arithmetic of DDSI-RTPS leaves no more on UDP).
    public static let domainIds: ClosedRange<Int> = 0...232

    /// `writeBatching`: this process's writers in the domain gather samples into larger packets until
    /// `SerializedWriter.flush` (Cyclone's Internal/WriteBatch): far fewer system calls at high rates,
    /// no added latency when the writer flushes after each burst. The first participant of a domain
    /// in a process decides it for all.
    public init(domainId: UInt32 = 0, writeBatching: Bool = false) throws(DDSError) {
        self.domainId = domainId
        if writeBatching { try Self.createBatchingDomain(domainId) }
        // rmw_cyclonedds announces the participant's security enclave in its user data.
        let qos = dds_create_qos()
        defer { dds_delete_qos(qos) }
        let enclave = Array("enclave=/;".utf8)
        enclave.withUnsafeBytes { dds_qset_userdata(qos, $0.baseAddress, $0.count) }
        handle = try DDSError.check(
            dds_create_participant(domainId, qos, nil), "creating a participant in DDS domain \(domainId)")
    }

    nonisolated(unsafe) private static var domainsMade: Set<UInt32> = []
    private static let domainsLock = NSLock()

    /// Creates the domain with the user's configuration (CYCLONEDDS_URI) plus write batching, unless
    /// this process already has it.
    static func createBatchingDomain(_ domainId: UInt32) throws(DDSError) {
        domainsLock.lock()
        defer { domainsLock.unlock() }
        guard !domainsMade.contains(domainId) else { return }
        let user = ProcessInfo.processInfo.environment["CYCLONEDDS_URI"] ?? ""
        let batching =
            "<CycloneDDS><Domain Id=\"any\"><Internal><WriteBatch>true</WriteBatch></Internal></Domain></CycloneDDS>"
        let config = user.isEmpty ? batching : user + "," + batching
        let rc = dds_create_domain(domainId, config)
        // An existing domain (made by a participant without batching) keeps its configuration.
        guard rc >= 0 || rc == DDS_RETCODE_PRECONDITION_NOT_MET else {
            throw DDSError(operation: "creating DDS domain \(domainId) with \(config)", code: rc)
        }
        domainsMade.insert(domainId)
    }

    /// Leaves the domain; endpoints made from this participant stop working.
    public func close() {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { return }
        closed = true
        dds_delete(handle)
    }

    deinit { close() }

    /// The Cyclone configuration in use, for messages: the file or "Cyclone's defaults".
    public static var configurationSource: String {
        if let uri = ProcessInfo.processInfo.environment["CYCLONEDDS_URI"], !uri.isEmpty {
            return "CYCLONEDDS_URI=\(uri)"
        }
        return "Cyclone's defaults (multicast discovery)"
    }
}
