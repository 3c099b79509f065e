#if canImport(Glibc)
    import Glibc
#endif
import YAML

/// Where stages publish and who may reach them. Default ipc endpoints live in a private directory
/// (mode 0700: under `$XDG_RUNTIME_DIR` when set, else `/tmp/gyrocompass-<uid>`), never at a fixed
/// path in a world-writable one; binding tcp on an address other than loopback needs the pipeline's
/// explicit `insecure: true` (there is no encryption on the bus) and is warned about.
public enum EndpointPolicy {
    /// The private directory for default ipc endpoints.
    public static func privateDirectory(environment: [String: String]) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") { return runtime + "/gyrocompass" }
        return "/tmp/gyrocompass-\(getuid())"
    }

    /// Set by a supervisor for its stage processes (its process id): default ipc endpoints then carry
    /// it, so each supervised run of a pipeline file has endpoints of its own.
    public static let runVariable = "GYROCOMPASS_RUN_ID"

    /// Whether a process is accepting connections on the ipc endpoint `endpoint` (a path, or `@name` in
    /// the abstract namespace). libzmq binds an ipc path by replacing whatever socket file is there, so
    /// a second run of the same pipeline would take the first one's endpoints and the two would read
    /// each other's streams; a live listener is therefore refused before binding. A file nobody
    /// listens on (left by a killed run) is not in use.
    static func ipcEndpointInUse(_ endpoint: String) -> Bool {
        guard endpoint.hasPrefix("ipc://") else { return false }
        let path = Array(endpoint.dropFirst(6).utf8)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !path.isEmpty, path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            for (i, b) in path.enumerated() { bytes[i] = b }
            if path[0] == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract namespace, as libzmq spells it
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count + (path[0] == UInt8(ascii: "@") ? 0 : 1))
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) == 0 }
        }
    }

    /// Creates the private directory (0700) or checks that an existing one is ours and private.
    static func preparePrivateDirectory(_ path: String) throws(StageFailure) {
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw StageFailure("cannot create the ipc directory \(path): \(String(cString: strerror(errno)))")
        }
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw StageFailure("\(path) is not a directory; ipc endpoints need a private one")
        }
        guard st.st_uid == getuid(), st.st_mode & 0o077 == 0 else {
            throw StageFailure(
                "\(path) belongs to another user or is open to others (mode \(String(st.st_mode & 0o777, radix: 8))); "
                    + "ipc endpoints need a private directory (chmod 700, or remove it)")
        }
    }

    /// The host of a tcp endpoint, nil for other transports.
    static func tcpHost(_ endpoint: String) -> String? {
        guard endpoint.hasPrefix("tcp://") else { return nil }
        var rest = endpoint.dropFirst(6)
        if let semicolon = rest.firstIndex(of: ";") { rest = rest[rest.index(after: semicolon)...] }  // source;dest
        if rest.hasPrefix("[") {
            return rest.firstIndex(of: "]").map { String(rest[rest.index(after: rest.startIndex)..<$0]) }
        }
        return rest.lastIndex(of: ":").map { String(rest[..<$0]) } ?? String(rest)
    }

    /// True for an address only this machine can reach.
    public static func isLoopback(_ endpoint: String) -> Bool {
        guard let host = tcpHost(endpoint) else { return true }  // ipc and inproc are local
        return host == "localhost" || host.hasPrefix("127.") || host == "::1" || host == "lo"
    }

    /// A refusal for a non-loopback tcp bind unless the pipeline says `insecure: true`.
    static func check(_ endpoint: String, insecure: Bool, file: String, mark: YAMLMark, what: String)
        throws(PipelineConfigError)
    {
        guard !isLoopback(endpoint), !insecure else { return }
        throw PipelineConfigError(
            file: file, mark: mark,
            message: "\(what) \(endpoint) binds an address other hosts can reach, and the bus has no encryption or "
                + "authentication: bind 127.0.0.1, or accept that with 'insecure: true' at the top of a pipeline file "
                + "(--insecure for replay)")
    }
}

extension PipelineConfig {
    /// Every endpoint a stage of this pipeline binds (stage endpoints, publish sinks' `bind`).
    var boundEndpoints: [(stage: String, endpoint: String)] {
        stages.flatMap { s in
            (s.type.isSink ? [] : [(s.name, s.endpoint)])
                + (s.type.settings.contains { $0.name == "bind" } ? [(s.name, s.settings.string("bind"))] : [])
        }
    }

    /// Before a run: the private ipc directory exists with mode 0700, and every bind other hosts can
    /// reach (accepted with `insecure: true`) is named in a warning.
    func prepareEndpoints(for stageNames: Set<String>, log: @Sendable (String) -> Void) throws {
        let mine = boundEndpoints.filter { stageNames.contains($0.stage) }
        if mine.contains(where: { $0.endpoint.hasPrefix("ipc://" + privateDirectory + "/") }) {
            try EndpointPolicy.preparePrivateDirectory(privateDirectory)
        }
        for (stage, endpoint) in mine where EndpointPolicy.ipcEndpointInUse(endpoint) {
            throw StageFailure(
                "stage '\(stage)': \(endpoint) is in use by another process (another run of this pipeline?): "
                    + "binding it would take that run's stream; stop it, or give this run other endpoints (a "
                    + "different top-level 'name', or different 'endpoint' settings)")
        }
        for (stage, endpoint) in mine where !EndpointPolicy.isLoopback(endpoint) && security == nil {
            log(
                "warning: stage '\(stage)' binds \(endpoint), reachable from other hosts, unencrypted and "
                    + "unauthenticated (insecure: true)")
        }
    }
}
