import CompassCore
import WireFormat
import MessageBus

extension CalibrationStage {
    struct Settings: DeclaredSettings {
        /// Fixed calibration: hard-iron offset subtracted, microtesla, then the soft-iron matrix applied.
        var hardIronMicrotesla = Vector3.zero
        var softIron = Matrix3.identity
        /// Learn hard and soft iron from normal motion (the fixed values are the start).
        var online = false
        /// Calibration file: loaded at start, saved (atomically) when a better calibration is accepted.
        var file = ""
        /// Allow the status to ask for the figure-eight motion.
        var prompt = true
        /// Publish calibration/status this often (stream seconds), and on every change.
        var statusSeconds = 1.0
        /// The field the motors add per ampere drawn (motor/current), microtesla per ampere: fixed, or
        /// the start when learning.
        var motorMicroteslaPerAmpere = Vector3.zero
        /// With `online`, learn those coefficients while the current varies.
        var learnMotor = true
        /// Find the magnetometer's mounting against the IMU from motion (`MountingRotationDetector`).
        var detectRotation = false
        /// Which magnetometer: "" = the primary (imu/mag), NAME = imu/mag/NAME (its status then on
        /// calibration/status/NAME).
        var magnetometer = ""

        static let table = SettingTable<Settings>([
            .vector(
                "hard_iron_ut", \.hardIronMicrotesla, unit: "uT", range: -5000...5000,
                "fixed hard-iron offset subtracted from the field"),
            .matrix("soft_iron", \.softIron, range: -100...100, "fixed row-major matrix applied after the offset"),
            .bool("online", \.online, "learn hard and soft iron from normal motion (the fixed values are the start)"),
            .string(
                "file", \.file,
                "calibration file: loaded at start, saved (atomically) when a better calibration is accepted; "
                    + "stages of several magnetometers may share one (each under its name)"),
            .bool("prompt", \.prompt, "allow the status to ask for the figure-eight motion"),
            .number(
                "status_period_s", \.statusSeconds, unit: "s", range: 0.001...86_400,
                "publish calibration/status this often (and on every change)"
            ).formerly("status_seconds"),
            .vector(
                "motor_ut_per_a", \.motorMicroteslaPerAmpere, unit: "uT/A", range: -100...100,
                "field the motors add per ampere drawn (from motor/current), removed from every reading; "
                    + "fixed, or the start when learning"),
            .bool(
                "learn_motor", \.learnMotor,
                "with online: learn motor_ut_per_a from the readings while the motor current varies"),
            .bool(
                "detect_rotation", \.detectRotation,
                "find how the magnetometer is mounted against the IMU (a rotation name) from motion; its readings "
                    + "are held back until the rotation is clear, then turned into the IMU's axes; kept in file"),
            .string(
                "magnetometer", \.magnetometer,
                "which magnetometer this stage calibrates: '' = the primary (imu/mag), NAME = imu/mag/NAME of a "
                    + "source's extra_magnetometers (status then on calibration/status/NAME); one stage per "
                    + "magnetometer (they may share one file, keyed by name)"),
        ])

        /// The fixed calibration (identity when nothing is given).
        var fixed: MagnetometerCalibration {
            MagnetometerCalibration(
                hardIronOffsetMicrotesla: hardIronMicrotesla, softIronCorrection: softIron, fieldRadiusMicrotesla: 0)
        }
    }
}
