import MessageBus
import YAML

/// The top-level `retransmit` block: what the publisher of a live stream keeps, so that a reader
/// that missed frames (a gap) or a restarted sink asks for them again (docs/security.md, "Restarts").
///
///     retransmit:
///       seconds: 5            # how long each bus message is kept (0 = no retransmission)
///       max_bytes: 67108864   # the most kept per publisher, oldest dropped first
///
/// Streams a restarted stage recomputes (a bag, the simulator) keep nothing: recomputation
/// rebuilds them whole.
public struct RetransmitSettings: Sendable, Equatable {
    /// Seconds a sent message stays available, 0 to 60; default 5.
    public var seconds = 5.0
    /// Bytes kept per publisher, 4096 to 1 GiB; default 64 MiB (5 s of bulk replay at 285,000
    /// samples/s is about 40 MiB uncompressed; a 1 kHz live IMU needs under 1 MiB).
    public var maximumBytes = 64 << 20
    /// How long a reader waits for an answer before counting the frames as lost, milliseconds.
    public static let replyTimeoutMilliseconds: Int32 = 1000

    public var isOn: Bool { seconds > 0 }

    static let keys = ["seconds", "max_bytes"]

    static func parse(_ node: YAMLNode, file: String, environment: [String: String]) throws(PipelineConfigError)
        -> RetransmitSettings
    {
        func fail(_ n: YAMLNode, _ message: String) -> PipelineConfigError {
            PipelineConfigError(file: file, mark: n.mark, message: message)
        }
        guard let entries = node.mapping else {
            throw fail(node, "'retransmit' must be a mapping with 'seconds' and/or 'max_bytes'")
        }
        var settings = RetransmitSettings()
        for (k, v) in entries {
            guard let name = k.scalar, keys.contains(name) else {
                throw fail(
                    k,
                    "unknown retransmit key '\(k.scalar ?? "?")'\(didYouMean(k.scalar ?? "", in: keys)) "
                        + "(expected \(keys.joined(separator: ", ")))")
            }
            let text = try v.scalar.map { (s) throws(PipelineConfigError) in try substitute(s, v, environment, file) }
            if name == "seconds" {
                guard let t = text, let s = Double(t), s.isFinite, (0...60).contains(s) else {
                    throw fail(v, "'seconds' must be a number from 0 to 60, found '\(v.scalar ?? v.kind)'")
                }
                settings.seconds = s
            } else {
                guard let t = text, let n = Int(t), (4096...(1 << 30)).contains(n) else {
                    throw fail(
                        v, "'max_bytes' must be an integer from 4096 to \(1 << 30), found '\(v.scalar ?? v.kind)'")
                }
                settings.maximumBytes = n
            }
        }
        return settings
    }
}

extension PipelineConfig {
    /// Where `stage` serves retransmissions: only a stage publishing a live stream, with retransmission
    /// on; its `retransmit_endpoint`, else one derived from its endpoint (`Retransmission.defaultEndpoint`).
    public func retransmitEndpoint(of stage: String) -> String? {
        guard retransmit.isOn, let s = self.stage(named: stage), !s.type.isSink, !isReproducible(stage) else {
            return nil
        }
        return s.retransmitEndpoint ?? Retransmission.defaultEndpoint(for: s.endpoint)
    }

    /// Every live publisher has a retransmit endpoint of its own, shared with no other endpoint.
    func checkRetransmitEndpoints() throws(PipelineConfigError) {
        var taken = Dictionary(boundEndpoints.map { ($0.endpoint, "the endpoint of stage '\($0.stage)'") }) { a, _ in a
        }
        let reproducible = reproducibleStages()
        for s in stages where !s.type.isSink && retransmit.isOn && !reproducible.contains(s.name) {
            guard let endpoint = s.retransmitEndpoint ?? Retransmission.defaultEndpoint(for: s.endpoint) else {
                throw PipelineConfigError(
                    file: file, mark: s.mark,
                    message: "stage '\(s.name)' publishes a live stream on \(s.endpoint), whose port gives no "
                        + "retransmit endpoint: give it 'retransmit_endpoint', or turn retransmission off "
                        + "('retransmit: {seconds: 0}')")
            }
            if let other = taken[endpoint] {
                throw PipelineConfigError(
                    file: file, mark: s.mark,
                    message: "the retransmit endpoint of stage '\(s.name)', \(endpoint), is \(other): give '\(s.name)' "
                        + "a 'retransmit_endpoint' of its own (by default a tcp stage retransmits on the next port)")
            }
            taken[endpoint] = "the retransmit endpoint of stage '\(s.name)'"
        }
    }
}
