#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif
import Foundation
import Pipeline

/// `fusion-node fleet`: many bags replayed on a Dask cluster. Dask is Python, so the command is the Python
/// package's (`gyrocompass.fleet`, whose workers call this build's library); this hands it the arguments.
enum FleetCommand {
    static let help = CommandHelp(
        path: "fleet",
        summary: "Replay a fleet's bags on a Dask cluster (local by default); compare two runs; each robot's iron.",
        positionals: "BAGS... -o OUT | compare A B | health OUT",
        details: """
            Every bag (directories, globs, bag files, or text files listing them) is replayed as `replay` does,
            by Dask workers calling libgyrocompass; OUT/BAG/ gets orientation.csv and accuracy.csv (or Parquet
            with pyarrow) and one row of OUT/summary.csv: duration, samples, bound percentiles, shares of time
            trusted / disturbed / uncalibrated / gyro-only, the calibration found, errors. A re-run skips bags
            whose row has the same key (bag bytes, options, version); a bag that fails is a row with its error
            (exit 3). `--scheduler tcp://HOST:8786` runs on a cluster. `fleet compare A B` lists the bags that
            changed the most (with truth files, the heading RMSE per bag and group); `fleet health OUT` lists
            each robot's hard iron over time and its jumps. `fusion-node fleet --help` lists every option
            (the Python package's). Needs Python with gyrocompass, dask and distributed (GYROCOMPASS_PYTHON
            names the interpreter, default python3); docs/fleet.md shows how to start a cluster.
            """,
        examples: [
            "fusion-node fleet bags/ -o runs/today",
            "fusion-node fleet 'bags/**/*.mcap' -o runs/complementary --filter complementary --workers 2",
            "fusion-node fleet compare runs/today runs/complementary --by heading",
            "fusion-node fleet health runs/today",
        ])

    /// Started by `python -c`: a clear message where the package or Dask is missing, then the module's
    /// command line under this command's name.
    static let bootstrap = """
        import sys
        try:
            from gyrocompass.fleet import _entry
            import distributed
        except ImportError as e:
            sys.stderr.write('fusion-node fleet: ' + str(e) + ': the command runs the Python package gyrocompass '
                             "with Dask (pip install 'gyrocompass[fleet]'), or set GYROCOMPASS_PYTHON to a Python "
                             'that has them\\n')
            sys.exit(2)
        sys.argv[0] = 'fusion-node fleet'
        sys.exit(_entry())
        """

    static func run(_ args: [String]) throws -> ExitCode {
        let python = ProcessInfo.processInfo.environment["GYROCOMPASS_PYTHON"] ?? "python3"
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        // The library of this build, so the workers fuse exactly as this fusion-node does.
        let library = executable.appendingPathComponent("libgyrocompass.so").path
        if getenv("GYROCOMPASS_LIBRARY") == nil, FileManager.default.fileExists(atPath: library) {
            setenv("GYROCOMPASS_LIBRARY", library, 1)
        }
        // In a checkout (.build/TRIPLE/CONFIG/fusion-node), the package beside the sources.
        var directory = executable
        for _ in 0..<4 {
            directory = directory.deletingLastPathComponent()
            let package = directory.appendingPathComponent("python")
            let command = package.appendingPathComponent("gyrocompass/fleet/cli.py")
            guard FileManager.default.fileExists(atPath: command.path) else { continue }
            let current = ProcessInfo.processInfo.environment["PYTHONPATH"].map { ":" + $0 } ?? ""
            setenv("PYTHONPATH", package.path + current, 1)
            break
        }
        setenv("GYROCOMPASS_FLEET_PROG", "fusion-node fleet", 1)
        let argv = [python, "-c", bootstrap] + args
        var cArgs = argv.map { strdup($0) } + [nil]
        fflush(nil)
        execvp(python, &cArgs)
        let reason = String(cString: strerror(errno))
        writeStandardError(
            "fusion-node fleet: cannot start \(python) (\(reason)): the command runs the Python package gyrocompass "
                + "with Dask; set GYROCOMPASS_PYTHON to a Python that has them\n")
        return .usage
    }
}
