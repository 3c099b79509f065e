// libFuzzer harness: the rosbag2 sqlite3 (.db3) reader on arbitrary database files.
import Bags
import Foundation

let path = FileManager.default.temporaryDirectory.appendingPathComponent("gyrocompass-fuzz-\(getpid()).db3").path

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FileManager.default.createFile(atPath: path, contents: Data(bytes: data, count: size))
    for salvage in [false, true] {
        guard let reader = try? BagReader(path: path) else { return 0 }
        _ = try? reader.topics()
        var options = BagReadOptions()
        options.salvage = salvage
        var count = 0
        _ = try? reader.forEachMessage(options) { _ in count += 1 }
    }
    return 0
}
