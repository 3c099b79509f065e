#if canImport(Glibc)
    import Glibc
#endif

/// A read-only memory map of a whole file (nothing is copied until a message is extracted).
final class MappedFile: @unchecked Sendable {
    let path: String
    let bytes: UnsafeRawBufferPointer
    private let base: UnsafeMutableRawPointer?

    init(path: String) throws(BagError) {
        self.path = path
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw .cannotOpen(path: path, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .cannotOpen(path: path, reason: String(cString: strerror(errno))) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw .cannotOpen(path: path, reason: "not a regular file") }
        let size = Int(st.st_size)
        if size == 0 {
            base = nil
            bytes = UnsafeRawBufferPointer(start: nil, count: 0)
            return
        }
        let p = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0)
        guard let p, p != MAP_FAILED else { throw .cannotOpen(path: path, reason: String(cString: strerror(errno))) }
        base = p
        bytes = UnsafeRawBufferPointer(start: p, count: size)
    }

    deinit { if let base { munmap(base, bytes.count) } }
}
