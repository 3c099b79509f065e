import BuildInfo
import CGyroCompass
import CompassCore
import Pipeline

// The C interface (Sources/CGyroCompass/include/gyrocompass.h): each function checks its arguments,
// sets the thread's last error and returns a gc_status; nothing a caller passes can crash it short of
// a pointer to too little memory.

/// What a gc_filter* points to.
final class FilterHandle {
    let engine: FusionEngine
    var finished: [FusionEstimate]?
    init(_ engine: FusionEngine) { self.engine = engine }
}

enum Status {
    static let ok = Int32(GC_OK.rawValue)
    static let argument = Int32(GC_ERROR_ARGUMENT.rawValue)
    static let settings = Int32(GC_ERROR_SETTINGS.rawValue)
    static let sample = Int32(GC_ERROR_SAMPLE.rawValue)
    static let buffer = Int32(GC_ERROR_BUFFER.rawValue)
    static let file = Int32(GC_ERROR_FILE.rawValue)
}

/// Sets the thread's last error and returns `status`.
func fail(_ status: Int32, _ message: String) -> Int32 {
    gyrocompass_set_last_error(message)
    return status
}

func succeed() -> Int32 {
    gyrocompass_set_last_error(nil)
    return Status.ok
}

/// Runs `body`: GC_OK, or `status` with the error's message as the thread's last error.
func attempt(_ status: Int32, _ body: () throws -> Void) -> Int32 {
    do {
        try body()
        return succeed()
    } catch {
        return fail(status, error.message)
    }
}

func handle(_ filter: OpaquePointer?) -> FilterHandle? {
    filter.map { Unmanaged<FilterHandle>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

func vector(_ p: UnsafePointer<Double>, _ row: Int = 0) -> Vector3 {
    Vector3(p[3 * row], p[3 * row + 1], p[3 * row + 2])
}

/// Writes `estimate` (nil: valid = 0) to `out`.
func write(_ estimate: FusionEstimate?, time: Double, to out: UnsafeMutablePointer<gc_estimate>) {
    guard let e = estimate else {
        let nan = Double.nan
        out.pointee = gc_estimate(
            valid: 0, flags: 0, time_s: time, orientation_wxyz: (nan, nan, nan, nan), magnetic_heading_deg: nan,
            true_heading_deg: nan, heading_accuracy_deg: nan, declination_deg: nan, gyro_bias_rad_s: (nan, nan, nan))
        return
    }
    let q = e.orientation, b = e.gyroBiasRadiansPerSecond
    out.pointee = gc_estimate(
        valid: 1, flags: e.flags, time_s: e.timestampSeconds, orientation_wxyz: (q.w, q.x, q.y, q.z),
        magnetic_heading_deg: e.magneticHeadingDegrees, true_heading_deg: e.trueHeadingDegrees,
        heading_accuracy_deg: e.headingAccuracyDegrees, declination_deg: e.declinationDegrees,
        gyro_bias_rad_s: (b.x, b.y, b.z))
}

/// Copies `text` and its NUL into `buffer` when it fits; `needed` gets the size either way.
func copyText(
    _ text: String, _ buffer: UnsafeMutablePointer<CChar>?, _ capacity: Int, _ needed: UnsafeMutablePointer<Int>?
)
    -> Int32
{
    let bytes = Array(text.utf8CString)
    needed?.pointee = bytes.count
    guard let buffer, capacity >= bytes.count else {
        if buffer == nil && capacity == 0 && needed != nil { return succeed() }
        return fail(Status.buffer, "the text needs \(bytes.count) bytes, the buffer has \(capacity)")
    }
    bytes.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress!, count: bytes.count) }
    return succeed()
}

/// Made once, at the first call (a global is initialised once, thread-safely), and never written again.
nonisolated(unsafe) let versionText: UnsafeMutablePointer<CChar> = strdupText(
    "\(BuildInfo.version) (\(BuildInfo.commit))")

func strdupText(_ s: String) -> UnsafeMutablePointer<CChar> {
    let bytes = Array(s.utf8CString)
    let p = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
    bytes.withUnsafeBufferPointer { p.update(from: $0.baseAddress!, count: bytes.count) }
    return p
}

@_cdecl("gc_version")
public func cVersion() -> UnsafePointer<CChar> { UnsafePointer(versionText) }

@_cdecl("gc_settings_reference")
public func cSettingsReference(
    _ text: UnsafeMutablePointer<CChar>?, _ capacity: Int, _ needed: UnsafeMutablePointer<Int>?
) -> Int32 {
    copyText(FusionEngine.settingsReference, text, capacity, needed)
}

@_cdecl("gc_filter_create")
public func cFilterCreate(_ settings: UnsafePointer<CChar>?, _ filter: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    guard let filter else { return fail(Status.argument, "gc_filter_create: filter is NULL") }
    filter.pointee = nil
    return attempt(Status.settings) {
        let engine = try FusionEngine(settingsYAML: settings.map { String(cString: $0) } ?? "")
        filter.pointee = OpaquePointer(Unmanaged.passRetained(FilterHandle(engine)).toOpaque())
    }
}

@_cdecl("gc_filter_destroy")
public func cFilterDestroy(_ filter: OpaquePointer?) {
    guard let filter else { return }
    Unmanaged<FilterHandle>.fromOpaque(UnsafeRawPointer(filter)).release()
}

@_cdecl("gc_filter_declare_calibrated")
public func cFilterDeclareCalibrated(_ filter: OpaquePointer?) -> Int32 {
    guard let h = handle(filter) else { return fail(Status.argument, "gc_filter_declare_calibrated: filter is NULL") }
    return attempt(Status.file) { try h.engine.declareCalibrated() }
}

@_cdecl("gc_filter_learn_calibration")
public func cFilterLearnCalibration(_ filter: OpaquePointer?) -> Int32 {
    guard let h = handle(filter) else { return fail(Status.argument, "gc_filter_learn_calibration: filter is NULL") }
    return attempt(Status.file) { try h.engine.learnCalibration() }
}

@_cdecl("gc_filter_use_calibration_file")
public func cFilterUseCalibrationFile(_ filter: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> Int32 {
    guard let h = handle(filter), let path else {
        return fail(Status.argument, "gc_filter_use_calibration_file: filter or path is NULL")
    }
    return attempt(Status.file) { try h.engine.useCalibration(file: String(cString: path)) }
}

@_cdecl("gc_filter_add_magnetometer")
public func cFilterAddMagnetometer(_ filter: OpaquePointer?, _ time: Double, _ field: UnsafePointer<Double>?) -> Int32 {
    guard let h = handle(filter), let field else {
        return fail(Status.argument, "gc_filter_add_magnetometer: filter or field_ut is NULL")
    }
    return attempt(Status.sample) { try h.engine.magnetometer(timestampSeconds: time, fieldMicrotesla: vector(field)) }
}

@_cdecl("gc_filter_update")
public func cFilterUpdate(
    _ filter: OpaquePointer?, _ time: Double, _ gyro: UnsafePointer<Double>?, _ accel: UnsafePointer<Double>?,
    _ field: UnsafePointer<Double>?, _ out: UnsafeMutablePointer<gc_estimate>?
) -> Int32 {
    guard let h = handle(filter), let gyro, let accel, let out else {
        return fail(Status.argument, "gc_filter_update: filter, gyro_rad_s, accel_m_s2 or out is NULL")
    }
    do {
        let e = try h.engine.imu(
            timestampSeconds: time, angularVelocity: vector(gyro), specificForce: vector(accel),
            fieldMicrotesla: field.map { vector($0) })
        write(e, time: time, to: out)
        return succeed()
    } catch {
        write(nil, time: time, to: out)
        return fail(Status.sample, error.message)
    }
}

@_cdecl("gc_filter_update_batch")
public func cFilterUpdateBatch(
    _ filter: OpaquePointer?, _ count: Int, _ times: UnsafePointer<Double>?, _ gyro: UnsafePointer<Double>?,
    _ accel: UnsafePointer<Double>?, _ field: UnsafePointer<Double>?, _ out: UnsafeMutablePointer<gc_estimate>?,
    _ processed: UnsafeMutablePointer<Int>?
) -> Int32 {
    processed?.pointee = 0
    guard count >= 0 else { return fail(Status.argument, "gc_filter_update_batch: count \(count) is negative") }
    guard count > 0 else { return succeed() }
    guard let h = handle(filter), let times, let gyro, let accel, let out else {
        return fail(Status.argument, "gc_filter_update_batch: filter, time_s, gyro_rad_s, accel_m_s2 or out is NULL")
    }
    for i in 0..<count {
        // A row with any NaN is no reading (a magnetometer slower than the IMU).
        let m = field.map { vector($0, i) }
        let reading = m.flatMap { $0.x.isNaN || $0.y.isNaN || $0.z.isNaN ? nil : $0 }
        do {
            let e = try h.engine.imu(
                timestampSeconds: times[i], angularVelocity: vector(gyro, i), specificForce: vector(accel, i),
                fieldMicrotesla: reading)
            write(e, time: times[i], to: out + i)
        } catch {
            write(nil, time: times[i], to: out + i)
            return fail(Status.sample, "sample \(i): \(error.message)")
        }
        processed?.pointee = i + 1
    }
    return succeed()
}

@_cdecl("gc_filter_finish")
public func cFilterFinish(
    _ filter: OpaquePointer?, _ out: UnsafeMutablePointer<gc_estimate>?, _ capacity: Int,
    _ count: UnsafeMutablePointer<Int>?
) -> Int32 {
    guard let h = handle(filter), let count else {
        return fail(Status.argument, "gc_filter_finish: filter or count is NULL")
    }
    let estimates = h.finished ?? h.engine.finish()
    h.finished = estimates
    count.pointee = estimates.count
    guard estimates.count <= capacity, estimates.isEmpty || out != nil else {
        return fail(Status.buffer, "gc_filter_finish: \(estimates.count) estimates, room for \(capacity)")
    }
    for (i, e) in estimates.enumerated() { write(e, time: e.timestampSeconds, to: out! + i) }
    return succeed()
}

@_cdecl("gc_filter_summary")
public func cFilterSummary(
    _ filter: OpaquePointer?, _ text: UnsafeMutablePointer<CChar>?, _ capacity: Int,
    _ needed: UnsafeMutablePointer<Int>?
) -> Int32 {
    guard let h = handle(filter) else { return fail(Status.argument, "gc_filter_summary: filter is NULL") }
    return copyText(h.engine.summary.joined(separator: "\n"), text, capacity, needed)
}

extension Error {
    var message: String { (self as? FusionEngineError)?.message ?? "\(self)" }
}
