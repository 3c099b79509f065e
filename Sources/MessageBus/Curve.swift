#if canImport(Glibc)
    import Glibc
#endif
import CZeroMQ

/// A CurveZMQ key pair as Z85 text (40 characters each), as `zmq_curve_keypair` makes them. On disk
/// a pair named NAME is NAME.key (the public key, to hand out) and NAME.key_secret (mode 0600).
public struct CurveKeyPair: Sendable, Equatable {
    public let publicKey: String
    public let secretKey: String

    public struct KeyError: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    public static func generate() throws(KeyError) -> CurveKeyPair {
        var publicKey = [CChar](repeating: 0, count: 41), secretKey = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&publicKey, &secretKey) == 0 else {
            throw KeyError(message: "libzmq cannot make CURVE keys (built without libsodium?)")
        }
        return CurveKeyPair(
            publicKey: text(ofNullTerminated: publicKey), secretKey: text(ofNullTerminated: secretKey))
    }

    /// Writes NAME.key and NAME.key_secret; refuses to replace either, and leaves neither behind when
    /// it cannot write both (a public key without its secret would be handed out for nothing).
    public func write(name: String) throws(KeyError) {
        for path in [name + ".key", name + ".key_secret"] {
            var st = stat()
            if lstat(path, &st) == 0 { throw KeyError(message: "\(path) exists: keys are never replaced") }
        }
        try Self.writeNew(name + ".key_secret", secretKey + "\n", mode: 0o600)
        do { try Self.writeNew(name + ".key", publicKey + "\n", mode: 0o644) } catch {
            unlink(name + ".key_secret")
            throw error
        }
    }

    /// The pair named NAME (both files); the secret one must be private (see `loadKey`).
    public static func load(name: String) throws(KeyError) -> CurveKeyPair {
        CurveKeyPair(
            publicKey: try loadKey(name + ".key"), secretKey: try loadKey(name + ".key_secret", secret: true))
    }

    /// One Z85 key from a file (the first line that is not a comment). A `secret` key's file must be
    /// this user's and closed to others, as ssh asks of a private key: one others can read is no longer
    /// a secret, and one others can write lets them choose the server's identity.
    public static func loadKey(_ path: String, secret: Bool = false) throws(KeyError) -> String {
        guard let f = fopen(path, "r") else {
            throw KeyError(message: "cannot read the key \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(f) }
        if secret {
            var st = stat()
            guard fstat(fileno(f), &st) == 0 else {
                throw KeyError(message: "cannot read the key \(path): \(String(cString: strerror(errno)))")
            }
            guard st.st_uid == getuid() else {
                throw KeyError(message: "the secret key \(path) belongs to another user: refused")
            }
            guard st.st_mode & 0o077 == 0 else {
                throw KeyError(
                    message: "the secret key \(path) is open to others (mode \(String(st.st_mode & 0o777, radix: 8))): "
                        + "refused; make it private with chmod 600 \(path)")
            }
        }
        var buffer = [CChar](repeating: 0, count: 256)
        while fgets(&buffer, 256, f) != nil {
            let line = text(ofNullTerminated: buffer).trimmingWhitespace
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard isZ85Key(line) else { throw KeyError(message: "\(path) does not hold a 40-character Z85 CURVE key") }
            return line
        }
        throw KeyError(message: "\(path) holds no key")
    }

    /// The public keys in a directory (every *.key file), for an allow-list.
    public static func loadPublicKeys(directory: String) throws(KeyError) -> [String] {
        guard let dir = opendir(directory) else {
            throw KeyError(message: "cannot read the key directory \(directory): \(String(cString: strerror(errno)))")
        }
        defer { closedir(dir) }
        // Whoever can add a file here chooses whom the servers admit.
        var st = stat()
        guard fstat(dirfd(dir), &st) == 0, st.st_mode & 0o022 == 0, st.st_uid == getuid() || st.st_uid == 0 else {
            throw KeyError(
                message: "the allowed-clients directory \(directory) can be changed by others (mode "
                    + "\(String(st.st_mode & 0o777, radix: 8)), owner \(st.st_uid)): refused; anyone able to add a key "
                    + "there would be admitted (chmod 755 \(directory))")
        }
        var keys: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasSuffix(".key") else { continue }
            keys.append(try loadKey(directory + "/" + name))
        }
        return keys
    }

    static func isZ85Key(_ text: String) -> Bool {
        var binary = [UInt8](repeating: 0, count: 32)
        return text.utf8.count == 40 && zmq_z85_decode(&binary, text) != nil
    }

    static func writeNew(_ path: String, _ text: String, mode: mode_t) throws(KeyError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode)
        guard fd >= 0 else { throw KeyError(message: "cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress, $0.count) }) == bytes.count, fchmod(fd, mode) == 0
        else {
            throw KeyError(message: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}

/// What a pipeline's sockets present and accept: the server pair every binding socket uses, the
/// client pair its connecting sockets present, and the client public keys its ZAP handler admits.
public struct CurveSecurity: Sendable {
    public let server: CurveKeyPair
    public let client: CurveKeyPair
    public let allowedClients: Set<String>

    public init(server: CurveKeyPair, client: CurveKeyPair, allowedClients: Set<String>) {
        self.server = server
        self.client = client
        // The pipeline's own stages connect with its client key.
        self.allowedClients = allowedClients.union([client.publicKey])
    }
}

extension BusSocket {
    /// This (binding) socket accepts only CURVE clients, each checked by the context's ZAP handler.
    public func makeCurveServer(_ keys: CurveKeyPair) throws(BusError) {
        try setOption(ZMQ_CURVE_SERVER, 1)
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: Array(keys.secretKey.utf8) + [0])
        try setOption(ZMQ_ZAP_DOMAIN, bytes: Array("gyrocompass".utf8))
        // Clients refused before ZAP is asked (plaintext, or a wrong server key) are counted too.
        try context.zapHandler?.watchHandshakes(of: self)
    }

    /// This (connecting) socket talks CURVE to a server with `serverPublicKey`, presenting `keys`.
    public func makeCurveClient(serverPublicKey: String, keys: CurveKeyPair) throws(BusError) {
        try setOption(ZMQ_CURVE_SERVERKEY, bytes: Array(serverPublicKey.utf8) + [0])
        try setOption(ZMQ_CURVE_PUBLICKEY, bytes: Array(keys.publicKey.utf8) + [0])
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: Array(keys.secretKey.utf8) + [0])
    }
}

extension String {
    var trimmingWhitespace: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\r" || f == "\n" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" || l == "\n" { s = s.dropLast() }
        return String(s)
    }
}

/// The text of a C buffer up to its first NUL (the whole buffer if it has none).
func text(ofNullTerminated buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
