import CZeroMQ
import CYAML
import CSQLite
import CZstd
import CLZ4

/// Versions of the Debian C libraries this binary is linked against, as each library reports itself.
enum LinkedLibraries {
    static var report: [(name: String, version: String)] {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return [
            ("libzmq", "\(major).\(minor).\(patch)"),
            ("libyaml", String(cString: yaml_get_version_string())),
            ("sqlite3", String(cString: sqlite3_libversion())),
            ("zstd", String(cString: ZSTD_versionString())),
            ("lz4", String(cString: LZ4_versionString())),
        ]
    }
}
