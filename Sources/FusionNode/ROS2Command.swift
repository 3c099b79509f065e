#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import WireFormat
import ROS2DDS
import Pipeline

/// `fusion-node ros2 echo|list`: a look at a ROS 2 graph over DDS without ROS installed.
enum ROS2Command {
    static let echoHelp = CommandHelp(
        path: "ros2 echo", summary: "Print what a ROS 2 topic carries, as JSON lines (no ROS installation needed).",
        positionals: "TOPIC",
        options: [
            OptionHelp(
                "--type", "TYPE", "message type, e.g. sensor_msgs/msg/Imu",
                default: "the type its publishers announce"),
            OptionHelp("--qos", "QOS", ROS2QoS.syntax, default: "sensor_data"),
            OptionHelp("--domain-id", "N", "DDS domain (ROS_DOMAIN_ID)", default: "$ROS_DOMAIN_ID or 0"),
            OptionHelp("--namespace", "NS", "namespace a relative TOPIC resolves in", default: "/"),
            OptionHelp("--count", "N", "stop after N messages", default: "all"),
            OptionHelp(
                "--timeout", "SECONDS", "give up (exit 1) when nothing arrives for this long; 0 = wait", default: "0"),
            OptionHelp("--hex", nil, "print each message's serialized bytes (hex) beside the decoded message"),
        ],
        details: """
            Each line is {"topic", "type", "message"} (and "cdr" with --hex). A best-effort reader
            (sensor_data) hears reliable and best-effort publishers alike. Discovery follows CYCLONEDDS_URI
            when it is set (Pipelines/cyclonedds-loopback.xml keeps it on this host). While nothing arrives
            it says why on stderr: no publisher, another type, or a QoS that cannot match.
            """,
        examples: [
            "fusion-node ros2 echo /heading --count 5",
            "fusion-node ros2 echo imu/data --namespace /robot1 --qos 'reliable, depth 100'",
        ])

    static let listHelp = CommandHelp(
        path: "ros2 list", summary: "List the ROS 2 topics discovery sees, with their types and endpoints.",
        options: [
            OptionHelp("--domain-id", "N", "DDS domain (ROS_DOMAIN_ID)", default: "$ROS_DOMAIN_ID or 0"),
            OptionHelp("--wait", "SECONDS", "how long to listen to discovery first", default: "1"),
        ],
        examples: ["fusion-node ros2 list --wait 2"])

    /// Why nothing arrives on `topic`, with the nearest topic discovery sees when one is close ("did you
    /// mean '/heading'?" for /headings).
    static func whyNothing(_ discovery: EndpointDiscovery, _ topic: ROS2Topic, domain: UInt32) -> String {
        let why = discovery.whyNoPublisher(for: topic, domainId: domain)
        let seen = Set(discovery.all.compactMap { ROS2Names.rosTopic(ofDDSTopic: $0.ddsTopic) })
        return why + didYouMean(topic.name, in: seen.filter { $0 != topic.name }.sorted())
    }

    static func run(_ args: [String]) throws -> ExitCode {
        switch args.first {
        case "echo": return try echo(Array(args.dropFirst()))
        case "list": return try list(Array(args.dropFirst()))
        case "-h", "--help": throw GroupHelpRequested(group: "ros2")
        case let other?:
            throw UsageError(
                message: "unknown ros2 command '\(other)'\(didYouMean(other, in: ["echo", "list"]))\n"
                    + Commands.groupText("ros2"))
        case nil:
            throw UsageError(message: "'fusion-node ros2' needs a command\n" + Commands.groupText("ros2"))
        }
    }

    static func domainId(_ a: Arguments) throws -> UInt32 {
        if let d = try a.integer("--domain-id", minimum: 0, maximum: DomainParticipant.domainIds.upperBound) {
            return UInt32(d)
        }
        guard let env = getenv("ROS_DOMAIN_ID").map({ String(cString: $0) }), !env.isEmpty else { return 0 }
        guard let d = UInt32(env), DomainParticipant.domainIds.contains(Int(d)) else {
            throw UsageError(message: "ROS_DOMAIN_ID='\(env)' is not a domain id (0 to 232)")
        }
        return d
    }

    static func echo(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, echoHelp)
        try a.requirePositionals(1...1)
        let domain = try domainId(a)
        let namespace = a.string("--namespace") ?? "/"
        let qos: ROS2QoS
        do { qos = try ROS2QoS(parsing: a.string("--qos") ?? "sensor_data") } catch {
            throw UsageError(message: "--qos \(error)", command: echoHelp.path)
        }
        let name: String
        do { name = try ROS2Names.qualified(a.positionals[0], namespace: namespace) } catch {
            throw UsageError(message: "\(error)", command: echoHelp.path)
        }
        let limit = try a.integer("--count", minimum: 1)
        let timeout = try a.double("--timeout", minimum: 0, maximum: 1_000_000) ?? 0
        let hex = a.has("--hex")
        let stop = StopToken().handleSignals()
        let participant = try DomainParticipant(domainId: domain)
        defer { participant.close() }
        let discovery = try EndpointDiscovery(participant, .publications)
        let started = Clocks.monotonicSeconds()
        var type = a.string("--type")
        if let t = type, KnownInterfaces.schema(for: t) == nil {
            writeStandardError("fusion-node: warning: \(t) is not a type this build can decode; printing sizes only\n")
        }
        if type == nil {
            type = try discoveredType(
                discovery, name: name, qos: qos, domain: domain, timeout: timeout, since: started, stop: stop)
        }
        guard let type else { return stop.requested ? .interrupted : .failed }
        var warnedAt = started
        let topic = try ROS2Topic(name, type: type, qos: qos)
        let reader = try SerializedReader(participant, topic)
        let waitSet = try ReaderWaitSet(participant, readers: [reader])
        writeStandardError("fusion-node: echoing \(topic) in DDS domain \(domain)\n")
        let schema = KnownInterfaces.schema(for: topic.type)
        var printed = 0
        var samples: [SerializedSample] = []
        var lastArrival = Clocks.monotonicSeconds()
        warnedAt = lastArrival
        while !stop.requested {
            guard try waitSet.wait(timeoutSeconds: 0.2) else {
                let now = Clocks.monotonicSeconds()
                if timeout > 0, now - lastArrival >= timeout {
                    writeStandardError(
                        "fusion-node: nothing arrived on \(name) for \(format(timeout, 1)) s; giving up\n")
                    return .failed
                }
                if now - warnedAt >= 5 {
                    warnedAt = now
                    let why =
                        reader.matchedWriters > 0
                        ? "\(name): \(reader.matchedWriters) publisher(s) matched, nothing sent for "
                            + "\(format(now - lastArrival, 0)) s"
                        : whyNothing(discovery, topic, domain: domain)
                    writeStandardError("fusion-node: \(why)\n")
                }
                continue
            }
            samples.removeAll(keepingCapacity: true)
            try reader.take(into: &samples)
            lastArrival = Clocks.monotonicSeconds()
            warnedAt = lastArrival
            for s in samples {
                guard let line = jsonLine(s.bytes, topic: name, type: topic.type, schema: schema, hex: hex) else {
                    continue
                }
                print(line)
                printed += 1
                if let limit, printed >= limit {
                    fflush(nil)
                    return .complete
                }
            }
            fflush(nil)
        }
        return .interrupted
    }

    /// One message as the JSON line `echo` prints: decoded when the type is known (a malformed one is
    /// said and nil), its size otherwise; with `hex`, its CDR bytes too.
    static func jsonLine(
        _ bytes: [UInt8], topic name: String, type: String, schema: MessageSchema?, hex: Bool
    ) -> String? {
        var body = "{\"bytes\":\(bytes.count)}"
        if let schema {
            do { body = try schema.decode(bytes).json } catch {
                writeStandardError("fusion-node: \(name): malformed \(type) skipped: \(error)\n")
                return nil
            }
        }
        var line = "{\"topic\":\(JSONText.string(name)),\"type\":\(JSONText.string(type)),\"message\":\(body)"
        if hex { line += ",\"cdr\":\"" + bytes.map { String(format: "%02x", $0) }.joined() + "\"" }
        return line + "}"
    }

    /// The ROS type of `name`'s first publisher, as discovery shows it, saying every 5 s what is
    /// missing; nil when `timeout` (seconds, 0: none) passes first (said) or a stop is requested.
    static func discoveredType(
        _ discovery: EndpointDiscovery, name: String, qos: ROS2QoS, domain: UInt32, timeout: Double,
        since started: Double,
        stop: StopToken
    ) throws -> String? {
        let ddsTopic = "rt" + name
        var warnedAt = started
        while !stop.requested {
            discovery.refresh()
            if let e = discovery.on(ddsTopic).first { return ROS2Names.rosType(ofDDSType: e.ddsType) ?? e.ddsType }
            let now = Clocks.monotonicSeconds()
            if timeout > 0, now - started >= timeout {
                writeStandardError("fusion-node: no publisher of \(name) within \(format(timeout, 1)) s; giving up\n")
                return nil
            }
            if now - warnedAt >= 5 {
                warnedAt = now
                let anyType = try ROS2Topic(name, type: "unknown/msg/Unknown", qos: qos)
                writeStandardError(
                    "fusion-node: \(whyNothing(discovery, anyType, domain: domain)); "
                        + "waiting (--type TYPE subscribes without waiting)\n")
            }
            usleep(20_000)
        }
        return nil
    }

    static func list(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, listHelp)
        try a.requirePositionals(0...0)
        let wait = try a.double("--wait", minimum: 0, maximum: 3600) ?? 1
        let participant = try DomainParticipant(domainId: try domainId(a))
        defer { participant.close() }
        let publications = try EndpointDiscovery(participant, .publications)
        let subscriptions = try EndpointDiscovery(participant, .subscriptions)
        usleep(UInt32(wait * 1e6))
        publications.refresh()
        subscriptions.refresh()
        var topics: [String: (types: Set<String>, publishers: Int, subscribers: Int)] = [:]
        for (e, isPublisher) in publications.all.map({ ($0, true) }) + subscriptions.all.map({ ($0, false) }) {
            guard let name = ROS2Names.rosTopic(ofDDSTopic: e.ddsTopic) else { continue }
            var entry = topics[name] ?? ([], 0, 0)
            entry.types.insert(ROS2Names.rosType(ofDDSType: e.ddsType) ?? e.ddsType)
            if isPublisher { entry.publishers += 1 } else { entry.subscribers += 1 }
            topics[name] = entry
        }
        for (name, e) in topics.sorted(by: { $0.key < $1.key }) {
            print(
                "\(name) [\(e.types.sorted().joined(separator: ", "))] \(e.publishers) publisher(s), "
                    + "\(e.subscribers) subscriber(s)"
            )
        }
        if topics.isEmpty { writeStandardError("fusion-node: no ROS 2 topics seen in \(format(wait, 1)) s\n") }
        return .complete
    }
}
