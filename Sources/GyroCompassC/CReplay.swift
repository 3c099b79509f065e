import CGyroCompass
import Foundation
import Pipeline

/// What a gc_replay_result* points to.
final class ReplayResultHandle {
    let columns: ReplayColumns
    let reports: [StageReport]
    let log: [String]
    init(_ columns: ReplayColumns, reports: [StageReport], log: [String]) {
        self.columns = columns
        self.reports = reports
        self.log = log
    }
}

/// The lines a replay logs, gathered from the stages' tasks.
final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

func replayHandle(_ p: OpaquePointer?) -> ReplayResultHandle? {
    p.map { Unmanaged<ReplayResultHandle>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

@_cdecl("gc_replay")
public func cReplay(
    _ bag: UnsafePointer<CChar>?, _ options: UnsafePointer<CChar>?, _ quaternionCSV: UnsafePointer<CChar>?,
    _ accuracyCSV: UnsafePointer<CChar>?, _ result: UnsafeMutablePointer<OpaquePointer?>?
) -> Int32 {
    result?.pointee = nil
    guard let bag else { return fail(Status.argument, "gc_replay: bag_path is NULL") }
    let parsed: LibraryReplay.Options
    do {
        parsed = try LibraryReplay.Options(yaml: options.map { String(cString: $0) } ?? "")
    } catch {
        return fail(Status.settings, error.message)
    }
    // Temporary files where the caller names none, removed once read.
    var temporary: String?
    if quaternionCSV == nil || accuracyCSV == nil {
        let template = NSTemporaryDirectory() + "gyrocompass-replay-XXXXXX"
        var bytes = Array(template.utf8CString)
        guard mkdtemp(&bytes) != nil else {
            return fail(Status.file, "gc_replay: no temporary directory in \(NSTemporaryDirectory())")
        }
        temporary = String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    defer { if let temporary { try? FileManager.default.removeItem(atPath: temporary) } }
    let q = quaternionCSV.map { String(cString: $0) } ?? temporary! + "/orientation.csv"
    let a = accuracyCSV.map { String(cString: $0) } ?? temporary! + "/accuracy.csv"
    let log = LogLines()
    do {
        let reports = try LibraryReplay(bagPath: String(cString: bag), options: parsed).run(
            quaternionCSV: q, accuracyCSV: a, log: log.append)
        if let result {
            let columns = try ReplayColumns(quaternionCSV: q, accuracyCSV: a)
            let handle = ReplayResultHandle(columns, reports: reports, log: log.all)
            result.pointee = OpaquePointer(Unmanaged.passRetained(handle).toOpaque())
        }
        return succeed()
    } catch let e as PipelineConfigError {
        return fail(Status.settings, e.description)
    } catch {
        return fail(Status.file, error.message)
    }
}

@_cdecl("gc_replay_check")
public func cReplayCheck(_ bag: UnsafePointer<CChar>?, _ options: UnsafePointer<CChar>?) -> Int32 {
    do {
        let parsed = try LibraryReplay.Options(yaml: options.map { String(cString: $0) } ?? "")
        try LibraryReplay(bagPath: bag.map { String(cString: $0) } ?? "bag.mcap", options: parsed).check()
        return succeed()
    } catch let e as FusionEngineError {
        return fail(Status.settings, e.message)
    } catch let e as PipelineConfigError {
        return fail(Status.settings, e.description)
    } catch {
        return fail(Status.settings, "\(error)")
    }
}

@_cdecl("gc_replay_result_count")
public func cReplayResultCount(_ result: OpaquePointer?) -> Int { replayHandle(result)?.columns.count ?? 0 }

@_cdecl("gc_replay_result_columns")
public func cReplayResultColumns(
    _ result: OpaquePointer?, _ time: UnsafeMutablePointer<Double>?, _ quaternions: UnsafeMutablePointer<Double>?,
    _ heading: UnsafeMutablePointer<Double>?, _ accuracy: UnsafeMutablePointer<Double>?,
    _ flags: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    guard let c = replayHandle(result)?.columns else {
        return fail(Status.argument, "gc_replay_result_columns: result is NULL")
    }
    func copy<T>(_ values: [T], to out: UnsafeMutablePointer<T>?) {
        guard let out else { return }
        values.withUnsafeBufferPointer { if let base = $0.baseAddress { out.update(from: base, count: $0.count) } }
    }
    copy(c.timeSeconds, to: time)
    copy(c.quaternions, to: quaternions)
    copy(c.headingDegrees, to: heading)
    copy(c.accuracyDegrees, to: accuracy)
    copy(c.flags, to: flags)
    return succeed()
}

@_cdecl("gc_replay_result_summary")
public func cReplayResultSummary(
    _ result: OpaquePointer?, _ text: UnsafeMutablePointer<CChar>?, _ capacity: Int,
    _ needed: UnsafeMutablePointer<Int>?
) -> Int32 {
    replayLines(result, "gc_replay_result_summary", text, capacity, needed) { $0.reports.map(\.description) }
}

@_cdecl("gc_replay_result_log")
public func cReplayResultLog(
    _ result: OpaquePointer?, _ text: UnsafeMutablePointer<CChar>?, _ capacity: Int,
    _ needed: UnsafeMutablePointer<Int>?
) -> Int32 {
    replayLines(result, "gc_replay_result_log", text, capacity, needed) { $0.log }
}

/// Lines of a replay's result as one text, '\n' between them (as gc_settings_reference for the buffer).
func replayLines(
    _ result: OpaquePointer?, _ function: String, _ text: UnsafeMutablePointer<CChar>?, _ capacity: Int,
    _ needed: UnsafeMutablePointer<Int>?, _ lines: (ReplayResultHandle) -> [String]
) -> Int32 {
    guard let h = replayHandle(result) else { return fail(Status.argument, "\(function): result is NULL") }
    return copyText(lines(h).joined(separator: "\n"), text, capacity, needed)
}

@_cdecl("gc_replay_result_outcome")
public func cReplayResultOutcome(
    _ result: OpaquePointer?, _ losses: UnsafeMutablePointer<Int>?, _ knownWrong: UnsafeMutablePointer<Int>?
) -> Int32 {
    guard let h = replayHandle(result) else { return fail(Status.argument, "gc_replay_result_outcome: result is NULL") }
    losses?.pointee = h.reports.reduce(0) { $0 + $1.losses }
    knownWrong?.pointee = h.reports.reduce(0) { $0 + $1.knownWrong }
    return succeed()
}

@_cdecl("gc_replay_result_destroy")
public func cReplayResultDestroy(_ result: OpaquePointer?) {
    guard let result else { return }
    Unmanaged<ReplayResultHandle>.fromOpaque(UnsafeRawPointer(result)).release()
}
