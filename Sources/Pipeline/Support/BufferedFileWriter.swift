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
