import Bags
import CGyroCompass
import Foundation
import Pipeline

@_cdecl("gc_bag_to_json_lines")
public func cBagToJSONLines(
    _ bagPath: UnsafePointer<CChar>?, _ topicList: UnsafePointer<CChar>?, _ outputPath: UnsafePointer<CChar>?
) -> Int32 {
    guard let bagPath, let outputPath else {
        return fail(Status.argument, "gc_bag_to_json_lines: bag_path or output_path is NULL")
    }
    let path = String(cString: bagPath), output = String(cString: outputPath)
    do {
        let bag = try BagReader(path: path)
        var options = BagReadOptions()
        if let topicList {
            let topics = try bag.topics()
            var wanted: Set<String> = []
            for t in String(cString: topicList).split(separator: "\n").map(String.init) {
                guard let found = BagTopicLookup.find(t, in: topics) else {
                    return fail(Status.settings, BagTopicLookup.missing(t, bag: path, topics: topics))
                }
                wanted.insert(found)
            }
            options.topics = wanted
        }
        let writer = try BufferedFileWriter(path: output)
        var lines = BagJSONLines(bag: bag)
        var undecodable: [String] = []
        try bag.forEachMessage(options) { m in
            let line: String
            do { line = try lines.line(m) } catch {
                undecodable.append("\(m.topic) at log time \(m.logTime): \(error)")
                return
            }
            try writer.write(line + "\n")
        }
        try writer.close()
        if let first = undecodable.first {
            return fail(
                Status.file,
                "\(path): \(undecodable.count) message(s) could not be decoded and are not in the "
                    + "output; the first: \(first)")
        }
        return succeed()
    } catch {
        return fail(Status.file, "\(path): \(error)")
    }
}

@_cdecl("gc_bag_topics")
public func cBagTopics(
    _ bagPath: UnsafePointer<CChar>?, _ text: UnsafeMutablePointer<CChar>?, _ capacity: Int,
    _ needed: UnsafeMutablePointer<Int>?
) -> Int32 {
    guard let bagPath else { return fail(Status.argument, "gc_bag_topics: bag_path is NULL") }
    let path = String(cString: bagPath)
    do {
        let topics = try BagReader(path: path).topics()
        let lines = topics.map { "\($0.name)\t\($0.type)\t\($0.messageCount)" }
        return copyText(lines.joined(separator: "\n"), text, capacity, needed)
    } catch {
        return fail(Status.file, "\(error)")  // names the bag
    }
}
