import CompassCore
import WireFormat
import MessageBus

// Reading and making the frames stages exchange: the type and encoding checked first, then the
// partial decoders of `CDRSamples`, so a stage never decodes more of a message than it needs.

func requireCDR(_ frame: borrowing WireFrame, _ type: String) throws {
    guard frame.type == type else { throw UnexpectedFrame(reason: "expected \(type), got \(frame.type)") }
    guard frame.encoding == "cdr" else { throw UnexpectedFrame(reason: "expected cdr encoding, got \(frame.encoding)") }
}

func decoded<M: RosMessage>(_ frame: borrowing WireFrame, as _: M.Type) throws -> M {
    try requireCDR(frame, M.typeName)
    do { return try M(cdrBytes: frame.payload) } catch {
        throw UnexpectedFrame(reason: "undecodable \(M.typeName): \(error)")
    }
}

func imuSample(_ frame: borrowing WireFrame) throws -> CDRSamples.Imu {
    try requireCDR(frame, ImuMessage.typeName)
    do {
        return try frame.payload.withUnsafeBytes { raw in Result { () throws(CDRError) in try CDRSamples.imu(raw) } }
            .get()
    } catch {
        throw UnexpectedFrame(reason: "undecodable \(ImuMessage.typeName): \(error)")
    }
}

func magneticSample(_ frame: borrowing WireFrame) throws -> CDRSamples.MagneticField {
    try requireCDR(frame, MagneticFieldMessage.typeName)
    do {
        return try frame.payload.withUnsafeBytes { raw in
            Result { () throws(CDRError) in try CDRSamples.magneticField(raw) }
        }
        .get()
    } catch {
        throw UnexpectedFrame(reason: "undecodable \(MagneticFieldMessage.typeName): \(error)")
    }
}

/// The IMU and magnetometer samples of a frame seen in place (the magnetometer on `magnetometerTopic`);
/// nil for anything else or undecodable.
func decodeInPlace(
    _ frame: WireFrame.View, magnetometerTopic: String = PipelineTopics.magnetometer
) -> InPlaceSample? {
    guard frame.encoding == "cdr" else { return nil }
    let raw = UnsafeRawBufferPointer(frame.payload)
    switch frame.topic {
    case PipelineTopics.imuRaw where frame.type == ImuMessage.typeName:
        guard let m = try? CDRSamples.imu(raw) else { return nil }
        return .imu(
            header: m.header, angularVelocity: m.angularVelocity, linearAcceleration: m.linearAcceleration,
            offset: m.angularVelocityOffset)
    case magnetometerTopic where frame.type == MagneticFieldMessage.typeName:
        guard let m = try? CDRSamples.magneticField(raw) else { return nil }
        return .magnetometer(header: m.header, field: m.field, offset: m.fieldOffset)
    default:
        return nil
    }
}

/// A message as a CDR frame on `topic`.
func cdrFrame<M: RosMessage>(_ message: M, topic: String) -> WireFrame {
    WireFrame(topic: topic, type: M.typeName, encoding: "cdr", payload: message.cdr())
}
