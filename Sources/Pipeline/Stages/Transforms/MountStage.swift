import Foundation
import CompassCore
import MessageBus
import WireFormat

/// How a sensor's mounting is known: given (a name or angles), or from the static transforms.
enum SensorMounting: Equatable, CustomStringConvertible {
    case given(MountingRotation)
    case fromTF

    var description: String {
        switch self {
        case .given(let r): return r.description
        case .fromTF: return "tf"
        }
    }
    /// The rotation when given; identity otherwise.
    var rotation: MountingRotation {
        if case .given(let r) = self { return r }
        return .none
    }
    var isFromTF: Bool { self == .fromTF }
    /// Whether the sensor's messages are turned at all.
    var turns: Bool { isFromTF || !rotation.isIdentity }
    /// What turned them, for the summary.
    var source: String { isFromTF ? "tf_static" : rotation.description }
}

/// Brings the IMU and the magnetometer from their own axes into the body frame (REP-103: x forward,
/// y left, z up) by their mounting rotations, so everything downstream (calibration, fusion, sinks)
/// works in body axes and the heading is the body's x axis. Vectors turn as R v, covariances as
/// R C R^T, a reported orientation as q R^-1; a rotated message's frame_id becomes `base_frame`.
/// A rotation given as `tf` comes from the static transforms on `tf_static` (a bag's /tf_static, the
/// simulator's `publish_tf`): the chain from the message's frame_id up to `base_frame`.
final class MountStage: StageLogic, TransformLogic, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// The IMU's axes to the body's.
        var imuMounting = SensorMounting.given(.none)
        /// The magnetometer's axes to the body's.
        var magnetometerMounting = SensorMounting.given(.none)
        /// Each extra magnetometer's mounting (imu/mag/NAME), as NAME=ROTATION.
        var extraMagnetometerRotations: [String] = []
        /// frame_id of the rotated messages.
        var baseFrame = "base_link"
        /// Turn the other way, body axes into the sensors' (R^T): makes a recording of sensors mounted
        /// so from one of sensors mounted straight (test data; tools/rotate_bag.sh).
        var invert = false

        static let table = SettingTable<Settings>([
            .mounting(
                "imu_rotation", \.imuMounting,
                "the IMU's mounting: an ArduPilot rotation name (yaw_90: x points right) or [roll, pitch, yaw] in "
                    + "degrees as URDF writes it (counter-clockwise about x, y, z: [0, 0, -90] is yaw_90), or tf: "
                    + "from the static transforms (/tf_static) between the message's frame_id and base_frame"),
            .mounting(
                "mag_rotation", \.magnetometerMounting,
                "the magnetometer's mounting, named, [roll, pitch, yaw] in degrees or tf, as imu_rotation"),
            .strings(
                "extra_mag_rotations", \.extraMagnetometerRotations,
                "each extra magnetometer's mounting as NAME=ROTATION (mast=yaw_90, mast=0,0,-90, mast=tf): its "
                    + "imu/mag/NAME turned as mag_rotation turns imu/mag"),
            .string("base_frame", \.baseFrame, "frame_id of the messages turned into the body frame"),
            .bool(
                "invert", \.invert,
                "turn the other way, body into sensor axes: what sensors mounted so would have recorded (test data)"),
        ])
    }

    static let type = StageType(
        name: "mount", role: .transform,
        summary: "the IMU and magnetometer turned from their mounting into the body frame (x forward, y left, z up)",
        settings: Settings.table,
        check: { settings, _ in
            parseExtraMountings(settings.extraMagnetometerRotations).problem
        }
    ) { settings, _ in try MountStage(settings) }

    let settings: Settings
    var rotated = (imu: 0, magnetometer: 0)
    /// Static transforms seen on tf_static: each child frame's parent and the rotation taking vectors
    /// from the child's axes into the parent's.
    var parents: [String: (parent: String, rotation: Matrix3)] = [:]
    /// Rotations resolved from tf_static per sensor frame, and how (for the summary).
    var resolved: [String: MountingRotation] = [:]
    /// Messages held back because no transform named their frame yet, per frame.
    var unresolved: [String: Int] = [:]

    init(_ settings: Settings) throws {
        var s = settings
        let parsed = Self.parseExtraMountings(s.extraMagnetometerRotations)
        if let problem = parsed.problem { throw StageFailure("extra_mag_rotations: \(problem.message)") }
        extraMountings = parsed.mountings
        if s.invert {
            if case .given(let r) = s.imuMounting { s.imuMounting = .given(r.inverse) }
            if case .given(let r) = s.magnetometerMounting { s.magnetometerMounting = .given(r.inverse) }
            for (name, m) in extraMountings { if case .given(let r) = m { extraMountings[name] = .given(r.inverse) } }
        }
        self.settings = s
    }

    /// The extra magnetometers' mountings, by name, from NAME=ROTATION entries.
    static func parseExtraMountings(_ entries: [String]) -> (
        mountings: [String: SensorMounting], problem: SettingProblem?
    ) {
        let form = "NAME=ROTATION (mast=yaw_90, mast=0,0,-90 or mast=tf)"
        let named: [NamedEntry]
        switch NamedEntry.parse(entries, setting: "extra_mag_rotations", form: form) {
        case .failure(let problem): return ([:], problem)
        case .success(let n): named = n
        }
        var out: [String: SensorMounting] = [:]
        for entry in named {
            let mounting: SensorMounting? =
                entry.value == "tf" ? .fromTF : entry.value.flatMap(MountingRotation.parse).map { .given($0) }
            guard let mounting else {
                return ([:], SettingProblem("extra_mag_rotations", "'\(entry.text)' is not \(form)"))
            }
            out[entry.name] = mounting
        }
        return (out, nil)
    }

    /// The extra magnetometers' mountings, by name.
    var extraMountings: [String: SensorMounting] = [:]
    /// Readings of the extra magnetometers turned, by name.
    var extraRotated: [String: Int] = [:]

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

    /// The rotation from `frame`'s axes to `base_frame`'s along the static transforms, or nil while
    /// they do not reach it. A frame that is already the base needs none.
    func rotationFromTF(_ frame: String) -> MountingRotation? {
        if let known = resolved[frame] { return known }
        var matrix = Matrix3.identity, at = frame, chain = [frame]
        while at != settings.baseFrame {
            guard let up = parents[at], chain.count <= 64, !chain.contains(up.parent) else { return nil }
            matrix = up.rotation * matrix
            at = up.parent
            chain.append(at)
        }
        let found = MountingRotation(tf: matrix, chain: chain)
        let rotation = settings.invert ? found.inverse : found
        resolved[frame] = rotation
        return rotation
    }

    /// The static transforms of one tf_static message; a transform that cannot be read is counted.
    func noteTransforms(_ frame: borrowing WireFrame) {
        guard let m = try? frame.payload.withUnsafeBytes({ try TFMessage(cdr: $0) }) else {
            losses += 1
            notes.append("tf_static: a message that is not tf2_msgs/msg/TFMessage was passed over")
            return
        }
        for t in m.transforms where t.rotation.isFinite && t.rotation.norm > 0.5 {
            parents[t.childFrameId] = (t.header.frameId, t.rotation.normalized.rotationMatrix)
        }
    }

    /// The rotation for a sensor's message: given, or from tf_static (nil while unknown).
    func rotation(_ mounting: SensorMounting, frameId: String) -> MountingRotation? {
        guard mounting.isFromTF else { return mounting.rotation }
        guard let r = rotationFromTF(frameId) else {
            unresolved[frameId, default: 0] += 1
            return nil
        }
        return r
    }

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        switch frame.topic {
        case PipelineTopics.tfStatic:
            // Used here, not passed on: what the transforms say is in the turned messages.
            noteTransforms(frame)
        case PipelineTopics.imuRaw where settings.imuMounting.turns:
            var m = try decoded(frame, as: ImuMessage.self)
            guard let r = rotation(settings.imuMounting, frameId: m.header.frameId) else { return }
            m.angularVelocity = r.apply(m.angularVelocity)
            m.linearAcceleration = r.apply(m.linearAcceleration)
            m.angularVelocityCovariance = Self.turned(m.angularVelocityCovariance, by: r)
            m.linearAccelerationCovariance = Self.turned(m.linearAccelerationCovariance, by: r)
            // A sensor-to-world orientation becomes body-to-world: q_body = q_sensor * R^-1.
            if m.orientationCovariance.m0 >= 0, m.orientation.w.isFinite, m.orientation.norm > 0.5 {
                m.orientation = (m.orientation * Quaternion(rotationMatrix: r.matrix).conjugate).normalized
                m.orientationCovariance = Self.turned(m.orientationCovariance, by: r)
            }
            // Turned into the body: its frame is the base's (inverted, test data stays in the sensor's frame).
            if !settings.invert { m.header.frameId = settings.baseFrame }
            rotated.imu += 1
            output.append(cdrFrame(m, topic: frame.topic))
        case PipelineTopics.magnetometer where settings.magnetometerMounting.turns:
            if try turnMagnetometer(frame, settings.magnetometerMounting, into: &output) { rotated.magnetometer += 1 }
        default:
            if let name = PipelineTopics.otherMagnetometerName(frame.topic), let mounting = extraMountings[name],
                mounting.turns
            {
                if try turnMagnetometer(frame, mounting, into: &output) { extraRotated[name, default: 0] += 1 }
            } else {
                output.append(frame)
            }
        }
    }

    /// A magnetometer reading turned into the body by `mounting`; false when it was held back (its
    /// frame's transform is not known yet).
    func turnMagnetometer(_ frame: borrowing WireFrame, _ mounting: SensorMounting, into output: inout [WireFrame])
        throws -> Bool
    {
        var m = try decoded(frame, as: MagneticFieldMessage.self)
        guard let r = rotation(mounting, frameId: m.header.frameId) else { return false }
        m.magneticField = r.apply(m.magneticField)
        m.magneticFieldCovariance = Self.turned(m.magneticFieldCovariance, by: r)
        if !settings.invert { m.header.frameId = settings.baseFrame }
        output.append(cdrFrame(m, topic: frame.topic))
        return true
    }

    func finish() throws -> [WireFrame] {
        notes.append(
            "turned into \(settings.baseFrame): \(rotated.imu) IMU sample(s) by \(settings.imuMounting.source), "
                + "\(rotated.magnetometer) magnetometer sample(s) by \(settings.magnetometerMounting.source)")
        for (name, mounting) in extraMountings.sorted(by: { $0.key < $1.key }) {
            notes.append("magnetometer \(name): \(extraRotated[name] ?? 0) sample(s) turned by \(mounting.source)")
        }
        for (frame, rotation) in resolved.sorted(by: { $0.key < $1.key }) {
            notes.append("tf_static: \(frame) to \(settings.baseFrame) is \(rotation)")
        }
        // Messages whose mounting never became known were not passed on: the output lacks them.
        for (frame, count) in unresolved.sorted(by: { $0.key < $1.key }) {
            notes.append(
                "tf_static: no transform from \(frame) to \(settings.baseFrame) "
                    + (resolved[frame] == nil ? "arrived" : "had arrived yet")
                    + "; \(count) message(s) in \(frame) held back (known frames: "
                    + "\(parents.keys.sorted().joined(separator: ", ")))")
            losses += count
        }
        return []
    }
}
