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
///
/// A regular file is written as `PATH.partial` and renamed onto `PATH` by a successful `close()`: a
/// run that is killed, or fails writing (a full disk), leaves no file under the name that looks
/// complete, and an existing `PATH` stays as it was until then. A device, FIFO or socket (`/dev/stdout`)
/// is written where it is.
public final class BufferedFileWriter {
    /// The file the caller named.
    public let path: String
    /// Where the bytes go until `close()`: the file `path` names (a symlink followed) + `partialSuffix`,
    /// or `path` itself when it is no regular file.
    public let writingPath: String
    /// The file `close()` renames `writingPath` onto: `path` with symlinks followed, so a link stays a link.
    let finalPath: String
    public static let partialSuffix = ".partial"
    private let file: UnsafeMutablePointer<FILE>
    private var buffer: [UInt8] = []
    private var closed = false
    static let flushBytes = 1 << 16

    public init(path: String) throws(FileWriteError) {
        self.path = path
        finalPath = Self.followed(path)
        writingPath = Self.writingPath(for: finalPath)
        guard let f = fopen(writingPath, "wb") else { throw .current("create", writingPath) }
        file = f
        buffer.reserveCapacity(Self.flushBytes)
    }

    /// Continues a text file another process was writing when it was killed: a last line cut off
    /// without its newline is removed, then writing appends. A device, FIFO or a file that does not
    /// exist is opened for appending as it is. `isEmpty` tells whether anything was kept.
    public init(appendingCompleteLinesOf named: String) throws(FileWriteError) {
        self.path = named
        let finalPath = Self.followed(named)
        self.finalPath = finalPath
        let path = Self.writingPath(for: finalPath)
        writingPath = path
        var info = stat()
        // The earlier run finished (its file was renamed): continue that file.
        if path != finalPath, stat(path, &info) != 0, stat(finalPath, &info) == 0 {
            guard rename(finalPath, path) == 0 else { throw .current("continue", finalPath) }
        }
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

    /// The file a path names once symlinks are followed (the path itself when it does not exist yet).
    static func followed(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// `path` + `partialSuffix` for a regular file or none yet; `path` for a device, FIFO or socket.
    static func writingPath(for path: String) -> String {
        var info = stat()
        if stat(path, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG { return path }
        return path + partialSuffix
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

    /// A row built as bytes (`TextRow`).
    public func write(_ row: TextRow) throws(FileWriteError) {
        buffer.append(contentsOf: row.bytes)
        if buffer.count >= Self.flushBytes { try flush() }
    }

    /// Hands what is buffered to the system.
    public func flush() throws(FileWriteError) {
        guard !buffer.isEmpty else { return }
        let n = buffer.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
        guard n == buffer.count, fflush(file) == 0 else { throw .current("write", writingPath) }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Writes what is buffered and closes the file under `writingPath`; false when it was closed before.
    private func closeFile() throws(FileWriteError) -> Bool {
        guard !closed else { return false }
        closed = true
        do { try flush() } catch {
            fclose(file)
            throw error
        }
        guard fclose(file) == 0 else { throw .current("close", writingPath) }
        return true
    }

    public func close() throws(FileWriteError) {
        guard try closeFile(), writingPath != finalPath else { return }
        guard rename(writingPath, finalPath) == 0 else { throw .current("rename onto", finalPath) }
    }

    /// Closes what was written under `writingPath` without renaming it: the stream it holds is known
    /// to be incomplete, so the file keeps the name that says so. Returns that name.
    @discardableResult
    public func abandon() throws(FileWriteError) -> String {
        _ = try closeFile()
        return writingPath
    }

    deinit { if !closed { fclose(file) } }
}
