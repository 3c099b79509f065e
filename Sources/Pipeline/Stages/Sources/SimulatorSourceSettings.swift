import Foundation
import CompassCore
import IMUSimulator
import WireFormat
import MessageBus

extension SimulatorSource {
    struct Settings: DeclaredSettings {
        /// Motion script (`scenarioNames`).
        var scenario = "default"
        /// Simulator seed; the same seed gives the same samples.
        var seed = 1
        /// Samples per second, Hz.
        var rateHz = 100.0
        /// Seconds to run; 0 = until stopped.
        var durationSeconds = 0.0
        /// Pace samples to the wall clock; false = as fast as possible.
        var realtime = true
        /// Where header stamps come from.
        var stamp = Stamp.simulated
        /// Hard-iron offset the simulated magnetometer adds, microtesla.
        var hardIronMicrotesla = Vector3.zero
        /// Soft-iron matrix the simulated magnetometer applies to the field before the offset.
        var softIron = Matrix3.identity
        /// How the simulated IMU and magnetometer are mounted: their readings come in their own axes,
        /// R^T times the body's (a `mount` stage with the same rotations turns them back).
        var imuRotation = MountingRotation.none
        var magnetometerRotation = MountingRotation.none
        /// Peak current the simulated motors draw, amperes (0 = no motors, no motor/current topic).
        var motorCurrentAmperes = 0.0
        /// The field the motors add per ampere drawn, microtesla per ampere, body axes.
        var motorFieldMicroteslaPerAmpere = Vector3.zero
        /// GNSS velocity solutions per second published on gnss/velocity, Hz (0 = none).
        var gnssRateHz = 0.0
        /// Publish imu/mag; false = an IMU with no magnetometer.
        var useMagnetometer = true
        /// Magnetometers besides the primary, NAME or NAME=ROTATION, each on imu/mag/NAME: the same body
        /// field as the primary (earth and world-fixed disturbances), their own noise and hard iron, and
        /// none of the primary's soft iron, motors or sensor-fixed disturbance.
        var extraMagnetometers: [String] = []
        /// The first extra magnetometer's hard iron; the i-th (from 0) has it turned i x 120 degrees
        /// about z, so each has its own.
        var extraHardIronMicrotesla = Vector3.zero
        /// How an extra magnetometer without its own =ROTATION is mounted (readings in its own axes).
        var extraMagnetometerRotation = MountingRotation.none
        /// White noise of every simulated magnetometer, microtesla per axis, 1 sigma.
        var magnetometerNoiseMicrotesla = SensorErrorModel().magnetometerNoiseMicrotesla
        /// A magnet fixed near the primary magnetometer (it turns with the vehicle), microtesla in body
        /// axes: fades in over 5 s from `magnetDisturbanceStartSeconds`, stays `magnetDisturbanceSeconds`.
        var magnetDisturbanceMicrotesla = Vector3.zero
        var magnetDisturbanceStartSeconds = 20.0
        var magnetDisturbanceSeconds = 20.0
        /// Also write the true orientation, t,qw,qx,qy,qz,movement per sample (BROAD's truth format), here.
        var truthPath = ""
        /// Publish the true orientation on truth/orientation.
        var publishTruth = false
        /// Describe the mounting as a robot does: static transforms base_link -> imu_link and
        /// base_link -> mag_link on tf_static first, the magnetometer's readings in mag_link.
        var publishTF = false
        var pauseWithoutSubscribers = true

        enum Stamp: String, CaseIterable {
            /// Simulation time.
            case simulated
            /// The wall clock at sending (latency measurements).
            case wall
        }

        static let table = SettingTable<Settings>([
            .string("scenario", \.scenario, choices: scenarioNames, "motion script"),
            .integer("seed", \.seed, range: 0...Int(UInt32.max), "simulator seed"),
            .number("rate_hz", \.rateHz, unit: "Hz", range: 0.1...100_000, "samples per second"),
            .number(
                "duration_s", \.durationSeconds, unit: "s", range: SettingSpec.secondsRange,
                "how long to run; 0 = until stopped"
            ).formerly("duration"),
            .bool("realtime", \.realtime, "pace samples to the wall clock; false = as fast as possible"),
            .choice(
                "stamp", \.stamp,
                "simulated: header stamps from simulation time; wall: the wall clock at sending (for latency "
                    + "measurements)"),
            .vector(
                "hard_iron_ut", \.hardIronMicrotesla, unit: "uT", range: -5000...5000,
                "hard-iron offset the simulated magnetometer adds"),
            .matrix(
                "soft_iron", \.softIron, range: -100...100,
                "row-major soft-iron matrix the simulated magnetometer applies to the field before the offset"),
            .rotation(
                "imu_rotation", \.imuRotation,
                "the simulated IMU's mounting (readings in its own axes; a mount stage with the same rotation "
                    + "turns them back)"),
            .rotation("mag_rotation", \.magnetometerRotation, "the simulated magnetometer's mounting, as imu_rotation"),
            .number(
                "motor_current_a", \.motorCurrentAmperes, unit: "A", range: 0...1000,
                "peak current of simulated motors, wandering like a throttle and published on motor/current "
                    + "(0 = none)"),
            .vector(
                "motor_field_ut_per_a", \.motorFieldMicroteslaPerAmpere, unit: "uT/A", range: -100...100,
                "field the simulated motors add to the magnetometer per ampere drawn (body axes)"),
            .number(
                "gnss_rate_hz", \.gnssRateHz, unit: "Hz", range: 0...100,
                "GNSS velocity solutions per second on gnss/velocity (true-north ENU, 0.08 m/s noise; the drive "
                    + "scenarios pass under a bridge from 150 s to 165 s); 0 = none"),
            .bool("use_mag", \.useMagnetometer, "publish imu/mag; false = an IMU without magnetometer"),
            .strings(
                "extra_magnetometers", \.extraMagnetometers,
                "magnetometers besides the primary, NAME or NAME=ROTATION (mounted so), each published on "
                    + "imu/mag/NAME with its own noise and hard iron (none of the primary's soft iron, motor field or "
                    + "magnet)"),
            .vector(
                "extra_hard_iron_ut", \.extraHardIronMicrotesla, unit: "uT", range: -5000...5000,
                "hard-iron offset of the first extra magnetometer; the i-th (from 0) has it turned i x 120 deg "
                    + "about z"),
            .rotation(
                "extra_mag_rotation", \.extraMagnetometerRotation,
                "the mounting of each extra magnetometer without its own =ROTATION, as mag_rotation (a mount "
                    + "stage's extra_mag_rotations turns it back)"),
            .number(
                "mag_noise_ut", \.magnetometerNoiseMicrotesla, unit: "uT", range: 0...100,
                "white noise of every simulated magnetometer, per axis, 1 sigma"),
            .vector(
                "magnet_ut", \.magnetDisturbanceMicrotesla, unit: "uT", range: -5000...5000,
                "a magnet fixed near the primary magnetometer (turns with the vehicle), body axes; fades in over 5 s "
                    + "at magnet_start_s and stays magnet_duration_s; 0 = none"),
            .number(
                "magnet_start_s", \.magnetDisturbanceStartSeconds, unit: "s", range: 0...1e6,
                "when the magnet starts to fade in, seconds from the start"
            ).formerly("magnet_start"),
            .number(
                "magnet_duration_s", \.magnetDisturbanceSeconds, unit: "s", range: 0...1e6,
                "how long the magnet stays fully present"
            ).formerly("magnet_seconds"),
            .string(
                "truth_path", \.truthPath, writesFile: true,
                "also write the true orientation here: t,qw,qx,qy,qz,movement per sample"),
            .bool(
                "publish_truth", \.publishTruth,
                "publish the true orientation on truth/orientation with every sample (a summary sink reading it "
                    + "scores the headings against it)"),
            .bool(
                "publish_tf", \.publishTF,
                "publish the mounting as static transforms on tf_static (base_link to imu_link and mag_link) "
                    + "before the first sample, the magnetometer's readings then in mag_link"),
            .pauseWithoutSubscribers(\.pauseWithoutSubscribers),
        ])
        static let scenarioNames = [
            "default", "figure_eight", "walking", "rest", "plausible_disturbance", "drive", "drive_disturbed",
            "calibration_dance", "tour",
        ]
    }
}
