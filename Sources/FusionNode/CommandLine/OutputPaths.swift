#if canImport(Glibc)
    import Glibc
#endif
import Foundation

/// Outputs never name what the command reads, nor each other: `--csv run.mcap --overwrite` would
/// replace the recording it replays, and one file for two outputs would hold both mixed.
enum OutputPaths {
    /// Device and inode of an existing file or directory; nil when there is none at `path`.
    static func identity(_ path: String) -> (dev: UInt64, ino: UInt64)? {
        var s = stat()
        guard stat(path, &s) == 0 else { return nil }
        return (UInt64(s.st_dev), UInt64(s.st_ino))
    }

    /// The absolute path with `.` and `..` resolved and the parent's symlinks followed, for outputs
    /// that do not exist yet.
    static func resolved(_ path: String) -> String {
        let url = URL(fileURLWithPath: path)
        let parent = url.deletingLastPathComponent().resolvingSymlinksInPath()
        return parent.appendingPathComponent(url.lastPathComponent).standardizedFileURL.path
    }

    /// The files an input stands for: itself, and for a directory (a rosbag2 directory) the files in it.
    static func files(of input: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: input, isDirectory: &isDirectory), isDirectory.boolValue,
            let names = try? FileManager.default.contentsOfDirectory(atPath: input)
        else { return [input] }
        return [input] + names.map { (input as NSString).appendingPathComponent($0) }
    }

    /// A usage error when an output names an input (or a file in an input directory), or two outputs
    /// name the same file. `outputs`: (option, path); `inputs`: (what, path).
    static func refuseClashes(
        outputs: [(option: String, path: String)], inputs: [(what: String, path: String)],
        command: String
    ) throws {
        func same(_ a: String, _ b: String) -> Bool {
            if let x = identity(a), let y = identity(b) { return x == y }
            return resolved(a) == resolved(b)
        }
        for o in outputs where o.path != "-" && !o.path.hasPrefix("/dev/") {
            for i in inputs {
                for file in files(of: i.path) where same(o.path, file) {
                    throw UsageError(
                        message: "\(o.option) \(o.path) is \(file == i.path ? "" : "a file of ")the \(i.what) "
                            + "\(i.path) this command reads: give another path", command: command)
                }
            }
        }
        for (k, o) in outputs.enumerated() where o.path != "-" && !o.path.hasPrefix("/dev/") {
            for p in outputs[(k + 1)...] where same(o.path, p.path) {
                throw UsageError(
                    message: "\(o.option) and \(p.option) both name \(o.path): each output needs its own file",
                    command: command)
            }
        }
    }
}
