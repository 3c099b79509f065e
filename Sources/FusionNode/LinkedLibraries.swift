import BuildInfo
import CCycloneDDS
import CLZ4
import CNcurses
import CSQLite
import CSodium
import CYAML
import CZeroMQ
import CZstd

/// What this binary is: its version and commit (fixed at build time from CHANGELOG.md and git), and the
/// Debian C libraries it runs on.
enum BuildIdentity {
    static let version = BuildInfo.version
    static let commit = BuildInfo.commit

    /// Each library as it reports itself at run time, so an upgraded Debian package shows. Cyclone DDS
    /// has no run-time version call: its version is the one of the headers the binary was built with.
    static var linkedLibraries: [(name: String, version: String)] {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return [
            ("libzmq", "\(major).\(minor).\(patch)"),
            ("cyclonedds", "\(DDS_VERSION) (built with)"),
            ("zstd", String(cString: ZSTD_versionString())),
            ("lz4", String(cString: LZ4_versionString())),
            ("sqlite3", String(cString: sqlite3_libversion())),
            ("libyaml", String(cString: yaml_get_version_string())),
            ("ncurses", String(String(cString: curses_version()).trimmingPrefix("ncurses "))),
            ("libsodium", String(cString: sodium_version_string())),
        ]
    }

    /// `fusion-node --version`: the first line is `fusion-node VERSION`, for scripts.
    static var text: String {
        var lines = ["fusion-node \(version)", "commit \(commit)"]
        lines += linkedLibraries.map { "\($0.name) \($0.version)" }
        return lines.joined(separator: "\n") + "\n"
    }
}
