#if canImport(Glibc)
    import Glibc
#endif

/// Why a file could not be written: the path and the system's reason.
public struct FileWriteError: Error, CustomStringConvertible {
    public let path: String
    public let action: String
    public let reason: String
    public var description: String { "cannot \(action) \(path): \(reason)" }
    static func current(_ action: String, _ path: String) -> FileWriteError {
        FileWriteError(path: path, action: action, reason: String(cString: strerror(errno)))
    }
}

/// A buffered text file (fopen/fwrite) that checks every write, flush and close: a failure is an
/// error naming the file, never lost data reported as success.
public final class BufferedFileWriter {
    public let path: String
    private let file: UnsafeMutablePointer<FILE>
    private var buffer: [UInt8] = []
    private var closed = false
    static let flushBytes = 1 << 16

    public init(path: String) throws(FileWriteError) {
        self.path = path
        guard let f = fopen(path, "wb") else { throw .current("create", path) }
        file = f
        buffer.reserveCapacity(Self.flushBytes)
    }

    /// Continues a text file another process was writing when it was killed: a last line cut off
    /// without its newline is removed, then writing appends. A device, FIFO or a file that does not
    /// exist is opened for appending as it is. `isEmpty` tells whether anything was kept.
    public init(appendingCompleteLinesOf path: String) throws(FileWriteError) {
        self.path = path
        var info = stat()
        if stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size > 0 {
            guard let keep = Self.endOfLastCompleteLine(path, size: Int(info.st_size)) else {
                throw .current("read", path)
            }
            guard truncate(path, off_t(keep)) == 0 else { throw .current("truncate", path) }
            keptBytes = keep
            lastLine = Self.line(path, endingAt: keep)
        }
        guard let f = fopen(path, "ab") else { throw .current("open", path) }
        file = f
        buffer.reserveCapacity(Self.flushBytes)
    }

    /// Bytes of the file kept when appending (0 for a new file), and the last line kept (without its
    /// newline; nil when none was, or it is longer than 64 KiB).
    public private(set) var keptBytes = 0
    public private(set) var lastLine: String?

    /// The line whose newline is the byte before `end`.
    static func line(_ path: String, endingAt end: Int) -> String? {
        guard end > 0, let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        let start = max(0, end - 1 - (1 << 16))
        var bytes = [UInt8](repeating: 0, count: end - 1 - start)
        guard fseeko(f, off_t(start), SEEK_SET) == 0, fread(&bytes, 1, bytes.count, f) == bytes.count else {
            return nil
        }
        guard let newline = bytes.lastIndex(of: UInt8(ascii: "\n")) else {
            return start == 0 ? String(decoding: bytes, as: UTF8.self) : nil
        }
        return String(decoding: bytes[(newline + 1)...], as: UTF8.self)
    }

    /// The offset after the last newline of the file (0 when there is none), reading backwards.
    static func endOfLastCompleteLine(_ path: String, size: Int) -> Int? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var end = size
        while end > 0 {
            let start = max(0, end - chunk.count)
            guard fseeko(f, off_t(start), SEEK_SET) == 0 else { return nil }
            let n = end - start
            guard fread(&chunk, 1, n, f) == n else { return nil }
            if let i = chunk[0..<n].lastIndex(of: UInt8(ascii: "\n")) { return start + i + 1 }
            end = start
        }
        return 0
    }

    public func write(_ text: String) throws(FileWriteError) {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= Self.flushBytes { try flush() }
    }

    /// Hands what is buffered to the system.
    public func flush() throws(FileWriteError) {
        guard !buffer.isEmpty else { return }
        let n = buffer.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        guard n == buffer.count, fflush(file) == 0 else { throw .current("write", path) }
        buffer.removeAll(keepingCapacity: true)
    }

    public func close() throws(FileWriteError) {
        guard !closed else { return }
        closed = true
        do { try flush() } catch {
            fclose(file)
            throw error
        }
        guard fclose(file) == 0 else { throw .current("close", path) }
    }

    deinit { if !closed { fclose(file) } }
}
