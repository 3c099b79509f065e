#if canImport(Glibc)
    import Glibc
#endif

/// A progress line on stderr (elapsed, rate, ETA), drawn only when stderr is a terminal and at most
/// ten times a second.
public struct Progress {
    let total: Int
    let unit: String
    let enabled: Bool
    var done = 0
    var lastDrawn = 0.0
    let started = Clocks.monotonicSeconds()

    public init(total: Int, unit: String = "msg") {
        self.total = total
        self.unit = unit
        enabled = total > 0 && isatty(2) == 1
    }

    public mutating func advance(by count: Int = 1) {
        done += count
        guard enabled, done % 1024 < count else { return }
        let now = Clocks.monotonicSeconds()
        guard now - lastDrawn > 0.1 else { return }
        lastDrawn = now
        draw(now)
    }

    func draw(_ now: Double) {
        let elapsed = now - started
        let fraction = min(1, Double(done) / Double(max(total, 1)))
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        let eta = rate > 0 ? Double(total - done) / rate : 0
        let filled = Int(fraction * 30)
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: 30 - filled)
        let numbers =
            "\(padded(format(fraction * 100, 1), 5))% \(padded(format(elapsed, 1), 6))s "
            + "\(padded(format(rate, 0), 9)) \(unit)/s ETA \(padded(format(max(0, eta), 1), 5))s "
        writeStandardError("\r[\(bar)] \(numbers)")
    }

    public func finish() {
        guard enabled else { return }
        draw(Clocks.monotonicSeconds())
        writeStandardError("\n")
    }

    private func padded(_ text: String, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - text.count)) + text
    }
}

/// Writes straight to file descriptor 2 (the C `stderr` global is not concurrency-safe in Swift 6).
public func writeStandardError(_ text: String) {
    var bytes = Array(terminalSafe(text).utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}

/// `text` with every control character except newline, carriage return and tab written as `\xHH`
/// (`\u{HHHH}` for C1): names and errors taken from a bag or a peer cannot move the cursor, retitle
/// the terminal or hide what follows.
public func terminalSafe(_ text: String) -> String {
    func isControl(_ v: UInt32) -> Bool {
        (v < 0x20 && v != 0x0A && v != 0x0D && v != 0x09) || (0x7F...0x9F).contains(v)
    }
    guard text.unicodeScalars.contains(where: { isControl($0.value) }) else { return text }
    var out = ""
    for s in text.unicodeScalars {
        guard isControl(s.value) else {
            out.unicodeScalars.append(s)
            continue
        }
        let hex = String(s.value, radix: 16)
        out += s.value < 0x80 ? "\\x" + (hex.count < 2 ? "0" : "") + hex : "\\u{" + hex + "}"
    }
    return out
}
