import Pipeline
/// A command-line error: printed to stderr with a usage hint, exit status 2.
struct UsageError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// Minimal option parsing: `--name value`, `--flag`, positionals in order.
struct Arguments {
    private(set) var positionals: [String] = []
    private var options: [String: String] = [:]
    private var flags: Set<String> = []

    /// `valued` lists the options that take a value; every other `--x` is a flag from `known`.
    init(_ args: [String], valued: Set<String>, flags knownFlags: Set<String>) throws {
        var i = 0
        while i < args.count {
            let a = args[i]
            if a.hasPrefix("--") {
                if valued.contains(a) {
                    guard i + 1 < args.count else { throw UsageError(message: "\(a) needs a value") }
                    options[a] = args[i + 1]
                    i += 2
                    continue
                }
                guard knownFlags.contains(a) else { throw UsageError(message: "unknown option '\(a)'") }
                flags.insert(a)
            } else {
                positionals.append(a)
            }
            i += 1
        }
    }

    func has(_ flag: String) -> Bool { flags.contains(flag) }
    func string(_ name: String) -> String? { options[name] }

    func double(_ name: String, minimum: Double = -.infinity) throws -> Double? {
        guard let v = options[name] else { return nil }
        guard let d = Double(v), d.isFinite, d >= minimum else {
            throw UsageError(
                message:
                    "\(name) expects a number\(minimum > -.infinity ? " >= \(format(minimum, 0))" : ""), got '\(v)'")
        }
        return d
    }

    func integer(_ name: String, minimum: Int = 0) throws -> Int? {
        guard let v = options[name] else { return nil }
        guard let n = Int(v), n >= minimum else {
            throw UsageError(message: "\(name) expects an integer >= \(minimum), got '\(v)'")
        }
        return n
    }
}
