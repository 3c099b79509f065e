import CompassCore
import MessageBus
import WireFormat

/// Brings the IMU and the magnetometer from their own axes into the body frame (REP-103: x forward,
/// y left, z up) by their mounting rotations, so everything downstream (calibration, fusion, sinks)
/// works in body axes and the heading is the body's x axis. Vectors turn as R v, covariances as
/// R C R^T, a reported orientation as q R^-1; a rotated message's frame_id becomes `base_frame`.
final class MountStage: StageLogic, TransformLogic, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// The IMU's axes to the body's.
        var imuRotation = MountingRotation.none
        /// The magnetometer's axes to the body's.
        var magnetometerRotation = MountingRotation.none
        /// frame_id of the rotated messages.
        var baseFrame = "base_link"
        /// Turn the other way, body axes into the sensors' (R^T): makes a recording of sensors mounted
        /// so from one of sensors mounted straight (test data; tools/rotate_bag.sh).
        var invert = false

        static let table = SettingTable<Settings>([
            .rotation(
                "imu_rotation", \.imuRotation,
                "the IMU's mounting: an ArduPilot rotation name (yaw_90: x points right) or [roll, pitch, yaw] in "
                    + "degrees as URDF writes it (counter-clockwise about x, y, z: [0, 0, -90] is yaw_90)"),
            .rotation(
                "mag_rotation", \.magnetometerRotation,
                "the magnetometer's mounting, named or [roll, pitch, yaw] in degrees as imu_rotation"),
            .string("base_frame", \.baseFrame, "frame_id of the messages turned into the body frame"),
            .bool(
                "invert", \.invert,
                "turn the other way, body into sensor axes: what sensors mounted so would have recorded (test data)"),
        ])
    }

    static let type = StageType(
        name: "mount", role: .transform,
        summary: "the IMU and magnetometer turned from their mounting into the body frame (x forward, y left, z up)",
        settings: Settings.table
    ) { settings, _ in MountStage(settings) }

    let settings: Settings
    var rotated = (imu: 0, magnetometer: 0)

    init(_ settings: Settings) {
        var s = settings
        if s.invert {
            s.imuRotation = s.imuRotation.inverse
            s.magnetometerRotation = s.magnetometerRotation.inverse
        }
        self.settings = s
    }

    var inputHandling: InputHandling { .decoded }

    static func matrix(_ c: Covariance9) -> Matrix3 { Matrix3(c.m0, c.m1, c.m2, c.m3, c.m4, c.m5, c.m6, c.m7, c.m8) }

    /// A covariance turned into body axes; ROS's "not provided" (-1 first) and "unknown" (all zero) stay.
    static func turned(_ c: Covariance9, by rotation: MountingRotation) -> Covariance9 {
        guard c.m0 >= 0, c != .zero else { return c }
        let m = rotation.apply(covariance: matrix(c))
        var out = Covariance9()
        (out.m0, out.m1, out.m2, out.m3, out.m4) = (m.m00, m.m01, m.m02, m.m10, m.m11)
        (out.m5, out.m6, out.m7, out.m8) = (m.m12, m.m20, m.m21, m.m22)
        return out
    }

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        switch frame.topic {
        case PipelineTopics.imuRaw where !settings.imuRotation.isIdentity:
            var m = try decoded(frame, as: ImuMessage.self)
            let r = settings.imuRotation
            m.angularVelocity = r.apply(m.angularVelocity)
            m.linearAcceleration = r.apply(m.linearAcceleration)
            m.angularVelocityCovariance = Self.turned(m.angularVelocityCovariance, by: r)
            m.linearAccelerationCovariance = Self.turned(m.linearAccelerationCovariance, by: r)
            // A sensor-to-world orientation becomes body-to-world: q_body = q_sensor * R^-1.
            if m.orientationCovariance.m0 >= 0, m.orientation.w.isFinite, m.orientation.norm > 0.5 {
                m.orientation = (m.orientation * Quaternion(rotationMatrix: r.matrix).conjugate).normalized
                m.orientationCovariance = Self.turned(m.orientationCovariance, by: r)
            }
            m.header.frameId = settings.baseFrame
            rotated.imu += 1
            output.append(cdrFrame(m, topic: frame.topic))
        case PipelineTopics.magnetometer where !settings.magnetometerRotation.isIdentity:
            var m = try decoded(frame, as: MagneticFieldMessage.self)
            let r = settings.magnetometerRotation
            m.magneticField = r.apply(m.magneticField)
            m.magneticFieldCovariance = Self.turned(m.magneticFieldCovariance, by: r)
            m.header.frameId = settings.baseFrame
            rotated.magnetometer += 1
            output.append(cdrFrame(m, topic: frame.topic))
        default:
            output.append(frame)
        }
    }

    func finish() throws -> [WireFrame] {
        notes.append(
            "turned into \(settings.baseFrame): \(rotated.imu) IMU sample(s) by \(settings.imuRotation), "
                + "\(rotated.magnetometer) magnetometer sample(s) by \(settings.magnetometerRotation)")
        return []
    }
}
