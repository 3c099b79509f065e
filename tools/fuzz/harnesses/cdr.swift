// libFuzzer harness: every CDR decoder of WireFormat (the typed messages, the schema-driven decoder
// behind JSON output) on arbitrary bytes. Any trap (out of range, overflow, runaway allocation) is a bug.
import WireFormat

let types = [
    ImuMessage.typeName, MagneticFieldMessage.typeName, NavSatFixMessage.typeName, HeadingMessage.typeName,
    CalibrationStatusMessage.typeName, InterferenceStatusMessage.typeName, QuaternionStampedMessage.typeName,
    TFMessage.typeName, "sensor_msgs/msg/PointCloud2", "diagnostic_msgs/msg/DiagnosticArray",
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? ImuMessage(cdrBytes: bytes)
    _ = try? MagneticFieldMessage(cdrBytes: bytes)
    _ = try? NavSatFixMessage(cdrBytes: bytes)
    _ = try? HeadingMessage(cdrBytes: bytes)
    _ = try? CalibrationStatusMessage(cdrBytes: bytes)
    _ = try? InterferenceStatusMessage(cdrBytes: bytes)
    _ = try? QuaternionStampedMessage(cdrBytes: bytes)
    _ = try? TFMessage(cdrBytes: bytes)
    // The schema-driven path, as `bag echo` and `ros2 echo` use it for any known type.
    let type = types[size % types.count]
    _ = try? jsonFromCDR(type: type, bytes)
    _ = CDRHeaderStamp.read(bytes[...])
    return 0
}
