// Shared by the bag harnesses: the input as a file of the format's extension, read every way a
// replay reads one (topic listing, then every message with and without salvage).
import Bags
import Foundation

func readBagEveryWay(_ data: UnsafePointer<UInt8>, _ size: Int, asFileEndingIn ext: String) {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("gyrocompass-fuzz-\(getpid()).\(ext)").path
    FileManager.default.createFile(atPath: path, contents: Data(bytes: data, count: size))
    for salvage in [false, true] {
        guard let reader = try? BagReader(path: path) else { return }
        _ = try? reader.topics()
        var options = BagReadOptions()
        options.salvage = salvage
        var count = 0
        _ = try? reader.forEachMessage(options) { _ in count += 1 }
    }
}
