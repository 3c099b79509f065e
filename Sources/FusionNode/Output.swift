#if canImport(Glibc)
import Glibc
#endif

/// Writes straight to file descriptor 2 (the C `stderr` global is not concurrency-safe in Swift 6).
func writeStandardError(_ text: String) {
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}

/// A buffered file writer (fopen/fwrite) for CSV output; reports failures instead of losing data.
final class TextFileWriter {
    let path: String
    private let file: UnsafeMutablePointer<FILE>
    private var buffer: [UInt8] = []

    init(path: String) throws {
        self.path = path
        guard let f = fopen(path, "wb") else {
            throw UsageError(message: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        file = f
        buffer.reserveCapacity(1 << 16)
    }

    func write(_ text: String) throws {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 16 { try flush() }
    }

    func flush() throws {
        guard !buffer.isEmpty else { return }
        let n = buffer.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        guard n == buffer.count else { throw UsageError(message: "write to \(path) failed: \(String(cString: strerror(errno)))") }
        buffer.removeAll(keepingCapacity: true)
    }

    func close() throws {
        try flush()
        guard fclose(file) == 0 else { throw UsageError(message: "closing \(path) failed: \(String(cString: strerror(errno)))") }
    }
}

/// A progress line on stderr, only when stderr is a terminal.
struct ProgressBar {
    let enabled = isatty(2) == 1
    let total: Double
    let started = monotonicSeconds()
    var lastDrawn = 0.0

    init(total: Double) { self.total = total }

    mutating func update(_ done: Double, unit: String) {
        guard enabled else { return }
        let now = monotonicSeconds()
        guard now - lastDrawn > 0.1 || done >= total else { return }
        lastDrawn = now
        let elapsed = now - started
        let fraction = total > 0 ? min(1, done / total) : 0
        let rate = elapsed > 0 ? done / elapsed : 0
        let eta = rate > 0 ? (total - done) / rate : 0
        let width = 30
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        writeStandardError("\r[\(bar)] \(fmt(fraction * 100, 1))% \(fmt(elapsed, 1))s \(fmt(rate, 0)) \(unit)/s ETA \(fmt(eta, 1))s ")
    }

    func finish() { if enabled { writeStandardError("\n") } }
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}

/// Fixed-point formatting without Foundation.
func fmt(_ x: Double, _ decimals: Int) -> String {
    guard x.isFinite else { return "nan" }
    var p = 1.0
    for _ in 0..<decimals { p *= 10 }
    let r = (abs(x) * p).rounded()
    let whole = Int(r / p)
    var frac = String(Int(r.truncatingRemainder(dividingBy: p)))
    while frac.count < decimals { frac = "0" + frac }
    return (x < 0 && r != 0 ? "-" : "") + String(whole) + (decimals > 0 ? "." + frac : "")
}
