import MessageBus
import Pipeline

/// `fusion-node keygen NAME`: a CurveZMQ key pair for a pipeline's `security` block or a client.
enum KeygenCommand {
    static let help = CommandHelp(
        path: "keygen",
        summary: "Write a CURVE key pair: NAME.key (public, to hand out) and NAME.key_secret (mode 0600).",
        positionals: "NAME",
        details: """
            A pipeline's `security` block names a server pair, a client pair and a directory of client
            public keys it admits; copy a client's NAME.key into that directory to let it subscribe.
            Existing files are never replaced.
            """,
        examples: ["fusion-node keygen keys/server", "fusion-node keygen keys/clients/laptop"])

    static func run(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(1...1)
        let name = a.positionals[0]
        do {
            let pair = try CurveKeyPair.generate()
            try pair.write(name: name)
            print("\(name).key: \(pair.publicKey)")
            print("\(name).key_secret: written with mode 0600")
        } catch {
            writeStandardError("fusion-node: \(error)\n")
            return .failed
        }
        return .complete
    }
}
