import MessageBus
import Pipeline

/// A command that was used correctly but could not do its work (exit 1); the message names why.
struct CommandFailure: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// A command-line error: printed to stderr with a hint where to find the usage, exit status 2.
struct UsageError: Error, CustomStringConvertible {
    let message: String
    /// The command whose help the hint points to ("replay", "bag info"); nil for the overview.
    var command: String?
    init(message: String, command: String? = nil) {
        self.message = message
        self.command = command
    }
    var description: String { message }
}

/// Thrown when `-h` or `--help` was given: the command's help is printed, exit 0.
struct HelpRequested: Error {
    let help: CommandHelp
}

/// Option parsing against a command's `CommandHelp`: `--name value`, `--name=value`, `--flag`,
/// positionals in order. An unknown option names itself, the command and the nearest valid option.
struct Arguments {
    private(set) var positionals: [String] = []
    private var options: [String: String] = [:]
    private var repeated: [String: [String]] = [:]
    private var flags: Set<String> = []
    let help: CommandHelp

    init(_ args: [String], _ help: CommandHelp) throws {
        self.help = help
        let valued = help.valued, knownFlags = help.flags
        var i = 0
        while i < args.count {
            var a = args[i]
            if a == "-h" || a == "--help" { throw HelpRequested(help: help) }
            if a.hasPrefix("--") || (a.hasPrefix("-") && (valued.contains(a) || knownFlags.contains(a))) {
                var inline: String?
                if let eq = a.firstIndex(of: "=") {
                    inline = String(a[a.index(after: eq)...])
                    a = String(a[..<eq])
                }
                if valued.contains(a) {
                    let value: String
                    if let inline {
                        value = inline
                    } else {
                        guard i + 1 < args.count else {
                            throw UsageError(message: "\(a) needs a value (\(Self.label(a, help)))", command: help.path)
                        }
                        value = args[i + 1]
                        i += 1
                    }
                    options[a] = value
                    repeated[a, default: []].append(value)
                } else if knownFlags.contains(a), inline == nil {
                    flags.insert(a)
                } else {
                    let all = help.options.map(\.name) + ["--help"]
                    throw UsageError(
                        message: "unknown option '\(a)' for 'fusion-node \(help.path)'\(didYouMean(a, in: all))",
                        command: help.path)
                }
            } else {
                positionals.append(a)
            }
            i += 1
        }
    }

    static func label(_ name: String, _ help: CommandHelp) -> String {
        help.options.first { $0.name == name }.map(\.label) ?? name
    }

    func has(_ flag: String) -> Bool { flags.contains(flag) }
    /// Every value of a repeatable option, in order.
    func strings(_ name: String) -> [String] { repeated[name] ?? [] }
    func string(_ name: String) -> String? { options[name] }

    func double(_ name: String, minimum: Double = -.infinity, maximum: Double = 1e9) throws -> Double? {
        guard let v = options[name] else { return nil }
        guard let d = Double(v), d.isFinite, d >= minimum, d <= maximum else {
            throw UsageError(
                message:
                    "\(name) expects a number from \(SettingSpec.text(max(minimum, -1e9))) to "
                    + "\(SettingSpec.text(maximum)), got '\(v)'",
                command: help.path)
        }
        return d
    }

    func integer(_ name: String, minimum: Int = 0, maximum: Int = 1_000_000_000) throws -> Int? {
        guard let v = options[name] else { return nil }
        guard let n = Int(v), n >= minimum, n <= maximum else {
            throw UsageError(
                message: "\(name) expects an integer from \(minimum) to \(maximum), got '\(v)'", command: help.path)
        }
        return n
    }

    /// Exactly `count` positionals, else a usage error naming what is missing or extra.
    func requirePositionals(_ range: ClosedRange<Int>) throws {
        if positionals.count < range.lowerBound {
            throw UsageError(
                message: "'fusion-node \(help.path)' needs \(help.positionals)\nusage: \(help.synopsis)",
                command: help.path)
        }
        if positionals.count > range.upperBound {
            throw UsageError(
                message:
                    "unexpected argument '\(positionals[range.upperBound])' for 'fusion-node \(help.path)'\nusage: "
                    + "\(help.synopsis)",
                command: help.path)
        }
    }
}

extension Arguments {
    /// `--server-key FILE --key NAME`: makes `socket` a CURVE client of that server with that pair
    /// (both or neither).
    func applyCurveClientKeys(to socket: BusSocket) throws {
        switch (string("--server-key"), string("--key")) {
        case (let server?, let name?):
            do {
                try socket.makeCurveClient(
                    serverPublicKey: try CurveKeyPair.loadKey(server), keys: try CurveKeyPair.load(name: name))
            } catch let e as CurveKeyPair.KeyError { throw UsageError(message: e.message, command: help.path) }
        case (nil, nil): break
        default: throw UsageError(message: "--server-key and --key go together (CURVE)", command: help.path)
        }
    }
}
