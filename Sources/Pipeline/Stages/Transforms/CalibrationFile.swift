import Foundation
import CompassCore

/// A calibration file: JSON, written to a temporary name, synced and renamed, so a crash never leaves
/// a broken file.
///
/// One file holds every magnetometer's calibration, keyed by name: the top-level fields are the
/// primary's (`imu/mag`), and each other magnetometer's sit under `magnetometers` by its name
/// (`imu/mag/NAME`), with the same fields. Saving one magnetometer's keeps the others' as they are;
/// calibration stages in one process or several save into one file in turn (a lock on its directory).
public enum CalibrationFile {
    struct Stored: Codable {
        var version: Int
        var hard_iron_ut: [Double]
        var soft_iron: [Double]
        var field_ut: Double
        var rms_ut: Double
        /// Share of directions the fit saw (0...1); absent for a fit made from turning (gyro-aided).
        var coverage: Double?
        /// The motors' field per ampere drawn, microtesla per ampere (absent when none was learned or given).
        var motor_ut_per_a: [Double]?
        /// The magnetometer's mounting found from motion (a rotation name): the calibration is for
        /// readings turned by it into the IMU's axes. Absent when the readings were used as they came.
        var mag_rotation: String?
        /// How clearly the mounting was found, for people ("yaw_90, 54.5 x better than ...").
        var mag_rotation_found: String?
    }
    public struct Refusal: Error {
        public let exists: Bool
        public let reason: String
    }

    /// What a calibration file holds.
    public struct Contents: Sendable {
        public var calibration: MagnetometerCalibration
        /// The motors' field per ampere drawn, microtesla per ampere; nil when the file holds none (or
        /// values that are not finite or beyond 100 uT/A, which are ignored).
        public var motorMicroteslaPerAmpere: Vector3?
        /// The magnetometer's mounting the calibration was learned with (readings are turned by it
        /// first); nil when the file names none.
        public var magnetometerRotation: MountingRotation?
        /// How it was found ("yaw_90, 54.5 x better than ...").
        public var magnetometerRotationFound: String?
    }

    /// Largest calibration file read, bytes.
    static let maximumBytes = 1 << 20

    /// The key of the other magnetometers' calibrations.
    static let magnetometersKey = "magnetometers"

    /// The calibration of `magnetometer` ("" = the primary) in the file at `path`. A file without an
    /// entry for it is refused with `exists` false, as a missing file is: that magnetometer starts
    /// uncalibrated and its first accepted fit is added.
    public static func load(_ path: String, magnetometer: String = "") -> Result<Contents, Refusal> {
        guard FileManager.default.fileExists(atPath: path) else {
            return .failure(Refusal(exists: false, reason: "no such file"))
        }
        // A calibration is a few hundred bytes (a file with several magnetometers a few kB): a larger one
        // is not one, and is not read into memory.
        var size = stat()
        if stat(path, &size) == 0, (size.st_mode & S_IFMT) == S_IFREG, size.st_size > maximumBytes {
            return .failure(
                Refusal(exists: true, reason: "not a calibration file: \(size.st_size) bytes (at most \(maximumBytes))")
            )
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(Refusal(exists: true, reason: "unreadable"))
        }
        guard let root = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            return .failure(Refusal(exists: true, reason: "not a calibration file: not a JSON object"))
        }
        var entry = root
        if magnetometer.isEmpty {
            if root["hard_iron_ut"] == nil, root[magnetometersKey] != nil {
                return .failure(Refusal(exists: false, reason: "no calibration for the primary magnetometer"))
            }
        } else {
            guard let value = (root[magnetometersKey] as? [String: Any])?[magnetometer] else {
                return .failure(Refusal(exists: false, reason: "no calibration for magnetometer '\(magnetometer)'"))
            }
            guard let named = value as? [String: Any] else {
                return .failure(
                    Refusal(exists: true, reason: "the calibration of magnetometer '\(magnetometer)' is not an object"))
            }
            entry = named
            entry["version"] = root["version"]
        }
        entry[magnetometersKey] = nil
        let stored: Stored
        do {
            let one = try JSONSerialization.data(withJSONObject: entry)
            stored = try JSONDecoder().decode(Stored.self, from: one)
        } catch {
            let which = magnetometer.isEmpty ? "" : " (magnetometer '\(magnetometer)')"
            return .failure(Refusal(exists: true, reason: "not a calibration file\(which): \(error)"))
        }
        guard stored.version == 1 else {
            return .failure(Refusal(exists: true, reason: "version \(stored.version) is unknown"))
        }
        guard stored.hard_iron_ut.count == 3, stored.soft_iron.count == 9,
            (stored.hard_iron_ut + stored.soft_iron + [stored.field_ut]).allSatisfy(\.isFinite)
        else {
            return .failure(Refusal(exists: true, reason: "fields missing or not finite"))
        }
        let m = stored.soft_iron
        let matrix = Matrix3(m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8])
        guard matrix.inverse != nil, (15...80).contains(stored.field_ut) else {
            return .failure(
                Refusal(exists: true, reason: "implausible values (singular matrix or field \(stored.field_ut) uT)"))
        }
        if let why = implausibleSoftIron(matrix) {
            return .failure(Refusal(exists: true, reason: "implausible soft iron: \(why)"))
        }
        var rotation: MountingRotation?
        if let name = stored.mag_rotation {
            guard let named = MountingRotation.named(name) else {
                return .failure(Refusal(exists: true, reason: "mag_rotation '\(name)' is not a rotation name"))
            }
            rotation = named
        }
        let h = stored.hard_iron_ut
        var motor: Vector3?
        if let k = stored.motor_ut_per_a, k.count == 3, k.allSatisfy({ $0.isFinite && abs($0) <= 100 }) {
            motor = Vector3(k[0], k[1], k[2])
        }
        return .success(
            Contents(
                calibration: MagnetometerCalibration(
                    hardIronOffsetMicrotesla: Vector3(h[0], h[1], h[2]), softIronCorrection: matrix,
                    fieldRadiusMicrotesla: stored.field_ut),
                motorMicroteslaPerAmpere: motor, magnetometerRotation: rotation,
                magnetometerRotationFound: stored.mag_rotation_found))
    }

    /// Why a soft-iron correction cannot be a sensor's, or nil: it must be symmetric (to 1 % of its
    /// largest entry: a fit gives a symmetric one), positive definite (a reflection or an axis swap
    /// turns the compass round) and stretch no axis more than 3 times another (a fit refuses 1.6).
    static func implausibleSoftIron(_ w: Matrix3) -> String? {
        let largest = [w.m00, w.m01, w.m02, w.m10, w.m11, w.m12, w.m20, w.m21, w.m22].map(abs).max() ?? 0
        let asymmetry = max(abs(w.m01 - w.m10), abs(w.m02 - w.m20), abs(w.m12 - w.m21))
        guard asymmetry <= 0.01 * largest else {
            return "not symmetric (\(format(asymmetry, 3)) between mirrored entries)"
        }
        guard let eigen = SymmetricEigen3(w), eigen.values.x > 0 else {
            return "not positive definite (a reflection or an axis swap, determinant \(format(w.determinant, 3)))"
        }
        guard eigen.values.z <= 3 * eigen.values.x else {
            return "stretches one axis \(format(eigen.values.z / eigen.values.x, 1)) times another (at most 3)"
        }
        return nil
    }

    /// Saves `fit` as the calibration of `magnetometer` ("" = the primary), keeping every other
    /// magnetometer's in the file.
    public static func save(
        _ fit: CalibrationFit, motor: Vector3? = nil, rotation: MountingRotation? = nil, rotationFound: String? = nil,
        magnetometer: String = "", to path: String
    ) throws {
        let c = fit.calibration, w = c.softIronCorrection
        let stored = Stored(
            version: 1,
            hard_iron_ut: [c.hardIronOffsetMicrotesla.x, c.hardIronOffsetMicrotesla.y, c.hardIronOffsetMicrotesla.z],
            soft_iron: [w.m00, w.m01, w.m02, w.m10, w.m11, w.m12, w.m20, w.m21, w.m22],
            field_ut: c.fieldRadiusMicrotesla, rms_ut: fit.rmsResidualMicrotesla,
            coverage: fit.directionCoverage.isFinite ? fit.directionCoverage : nil,
            motor_ut_per_a: motor.map { [$0.x, $0.y, $0.z] }, mag_rotation: rotation?.description,
            mag_rotation_found: rotationFound)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var data = try encoder.encode(stored)
        // Read, change and write under one lock, so two stages saving at once both land.
        let parent = (path as NSString).deletingLastPathComponent
        let directory = open(parent.isEmpty ? "." : parent, O_RDONLY | O_CLOEXEC)
        if directory >= 0 { flock(directory, LOCK_EX) }
        defer { if directory >= 0 { close(directory) } }  // closing releases the lock
        // The file is rewritten again and again by the program itself: never through a symbolic link
        // (one planted in a shared directory would aim the writes anywhere), never over a file the
        // program did not write.
        var link = stat()
        let exists = lstat(path, &link) == 0
        let kind = link.st_mode & S_IFMT
        if exists && kind == S_IFLNK {
            throw StageFailure("\(path) is a symbolic link: a calibration file is written only as itself")
        }
        if exists && kind == S_IFREG && link.st_uid != getuid() {
            throw StageFailure("\(path) belongs to another user (uid \(link.st_uid)): not overwritten")
        }
        let existing = FileManager.default.contents(atPath: path).flatMap {
            (try? JSONSerialization.jsonObject(with: $0)) as? [String: Any]
        }
        let ours = existing.map { $0["version"] != nil && ($0["hard_iron_ut"] != nil || $0[magnetometersKey] != nil) }
        if ours == false || (existing == nil && exists && kind == S_IFREG && link.st_size > 0) {
            throw StageFailure("\(path) holds something other than a calibration: not overwritten")
        }
        let others = existing?[magnetometersKey] as? [String: Any]
        if !magnetometer.isEmpty || others != nil {
            var root: [String: Any]
            let entry = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
            if magnetometer.isEmpty {
                root = entry
                root[magnetometersKey] = others
            } else {
                root = existing ?? ["version": stored.version]
                var named = others ?? [:]
                var own = entry
                own["version"] = nil
                named[magnetometer] = own
                root[magnetometersKey] = named
            }
            data = try JSONSerialization.data(withJSONObject: root, options: [.prettyPrinted, .sortedKeys])
        }
        try write(data, to: path, replacingRegularFile: !exists || kind == S_IFREG)
    }

    /// Writes `data` to `path`: a device, FIFO or socket in place; a regular file (or none)
    /// replaced atomically, through a temporary file created afresh (O_EXCL | O_NOFOLLOW: never one
    /// planted).
    static func write(_ data: Data, to path: String, replacingRegularFile: Bool) throws {
        if !replacingRegularFile {
            let w = try BufferedFileWriter(path: path)
            try w.write(String(decoding: data, as: UTF8.self))
            try w.close()
            return
        }
        let temporary = path + ".tmp-\(getpid())"
        unlink(temporary)  // a stale one of this process's own number (a crash before the rename)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw StageFailure("cannot create \(temporary): \(String(cString: strerror(errno)))")
        }
        let h = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        do {
            try h.write(contentsOf: data)
            try h.synchronize()
            try h.close()
        } catch {
            unlink(temporary)
            throw StageFailure("cannot write \(temporary): \(error)")
        }
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw StageFailure("cannot rename to \(path): \(String(cString: strerror(errno)))")
        }
    }
}
