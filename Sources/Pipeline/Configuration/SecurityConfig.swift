import MessageBus
import YAML

/// The top-level `security` block: CURVE keys for every tcp and ipc endpoint of the pipeline.
///
///     security:
///       server_key: keys/server         # NAME: NAME.key and NAME.key_secret (fusion-node keygen NAME)
///       client_key: keys/client         # the pair this pipeline's reading stages present
///       allowed_clients: keys/clients   # directory of client public keys (*.key) the servers admit
///
/// Paths are relative to the working directory. Every binding socket (stage endpoints, publish
/// sinks) becomes a CURVE server whose ZAP handler admits only the allowed keys (and the pipeline's
/// own client key); every connecting stage input a CURVE client of the server key.
enum SecurityConfig {
    static let keys = ["server_key", "client_key", "allowed_clients"]

    static func parse(_ node: YAMLNode, file: String, environment: [String: String]) throws(PipelineConfigError)
        -> CurveSecurity
    {
        func fail(_ n: YAMLNode, _ message: String) -> PipelineConfigError {
            PipelineConfigError(file: file, mark: n.mark, message: message)
        }
        guard let entries = node.mapping else {
            throw fail(node, "'security' must be a mapping with \(keys.joined(separator: ", "))")
        }
        var values: [String: (String, YAMLNode)] = [:]
        for (k, v) in entries {
            guard let name = k.scalar, keys.contains(name) else {
                throw fail(
                    k,
                    "unknown security key '\(k.scalar ?? "?")'\(didYouMean(k.scalar ?? "", in: keys)) "
                        + "(expected \(keys.joined(separator: ", ")))")
            }
            guard let text = v.scalar, !v.isNull else { throw fail(v, "'\(name)' must be a path") }
            values[name] = (try substitute(text, v, environment, file), v)
        }
        for key in keys where values[key] == nil {
            throw fail(node, "'security' needs '\(key)'")
        }
        do {
            let server = try CurveKeyPair.load(name: values["server_key"]!.0)
            let client = try CurveKeyPair.load(name: values["client_key"]!.0)
            let allowed = try CurveKeyPair.loadPublicKeys(directory: values["allowed_clients"]!.0)
            return CurveSecurity(server: server, client: client, allowedClients: Set(allowed))
        } catch {
            let which = keys.first { error.message.contains(values[$0]!.0) } ?? "server_key"
            throw fail(values[which]!.1, error.message)
        }
    }
}
