#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import CompassCore
import IMUSimulator
import WireFormat
import MessageBus

/// The seeded IMU and magnetometer simulator as a source: imu/data_raw and imu/mag, paced to the
/// wall clock or as fast as the pipeline takes them.
final class SimulatorSource: StageLogic, SourceLogic, @unchecked Sendable {
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

    static let type = StageType(
        name: "simulator", role: .source,
        summary: "the seeded IMU and magnetometer simulator (a product feature and the test bed)",
        settings: Settings.table,
        outputTopics: [
            PipelineTopics.imuRaw, PipelineTopics.magnetometer, PipelineTopics.motorCurrent, PipelineTopics.tfStatic,
            PipelineTopics.gnssVelocity, PipelineTopics.truth,
        ],
        check: { settings, _ in
            if case .failure(let problem) = parseExtras(settings) { return problem }
            return nil
        }
    ) { settings, _ in try SimulatorSource(settings) }

    /// The mounting as a robot's static transforms: base_link to imu_link and to mag_link, each the
    /// rotation taking the sensor's axes into the body's.
    func staticTransforms(at stamp: RosTime) -> WireFrame {
        func transform(_ child: String, _ r: MountingRotation) -> TFMessage.Transform {
            TFMessage.Transform(
                header: RosHeader(stamp: stamp, frameId: "base_link"), childFrameId: child, translation: .zero,
                rotation: Quaternion(rotationMatrix: r.matrix))
        }
        return cdrFrame(
            TFMessage(transforms: [
                transform("imu_link", settings.imuRotation), transform("mag_link", settings.magnetometerRotation),
            ]), topic: PipelineTopics.tfStatic)
    }

    /// A magnet brought near: seconds to fade in and out.
    static let magnetRampSeconds = 5.0

    /// One extra magnetometer: its name, mounting and hard iron (microtesla, its own axes).
    struct ExtraMagnetometer {
        var name: String
        var rotation: MountingRotation
        var hardIronMicrotesla: Vector3
    }

    /// The extra magnetometers the settings describe, or what is wrong with them.
    static func parseExtras(_ settings: Settings) -> Result<[ExtraMagnetometer], SettingProblem> {
        let named: [NamedEntry]
        switch NamedEntry.parse(
            settings.extraMagnetometers, setting: "extra_magnetometers", form: "NAME or NAME=ROTATION")
        {
        case .failure(let problem): return .failure(problem)
        case .success(let n): named = n
        }
        var out: [ExtraMagnetometer] = []
        for (i, entry) in named.enumerated() {
            var rotation = settings.extraMagnetometerRotation
            if let text = entry.value {
                guard let r = MountingRotation.parse(text) else {
                    return .failure(
                        SettingProblem(
                            "extra_magnetometers", "'\(entry.text)': '\(text)' is not a rotation (yaw_90, or 0,0,-90)"))
                }
                rotation = r
            }
            let turn = Quaternion(rotationVector: Vector3(0, 0, Double(i) * 2 * .pi / 3))
            let hardIron = turn.rotate(settings.extraHardIronMicrotesla)
            out.append(ExtraMagnetometer(name: entry.name, rotation: rotation, hardIronMicrotesla: hardIron))
        }
        return .success(out)
    }

    let settings: Settings
    let extras: [ExtraMagnetometer]
    init(_ settings: Settings) throws {
        switch Self.parseExtras(settings) {
        case .success(let e): extras = e
        case .failure(let problem): throw StageFailure("extra_magnetometers: \(problem.message)")
        }
        self.settings = settings
    }
    var pausesWithoutSubscribers: Bool { settings.pauseWithoutSubscribers }

    func scenario() -> SimulationScenario {
        var s = SimulationScenario()
        s.seed = UInt64(settings.seed)
        s.startHeadingDegrees = 30
        switch settings.scenario {
        case "drive", "drive_disturbed":
            // A car's route drawn from the seed (`SimulationScenario.drivingVehicle`); its motors' current
            // follows the drive.
            s =
                settings.scenario == "drive"
                ? .drivingVehicle(seed: UInt64(settings.seed)) : .disturbedDrive(seed: UInt64(settings.seed))
            s.motorCurrentProfile = .drive
            s.gnssVelocity?.rateHz = settings.gnssRateHz
        case "figure_eight":
            s.motion = [.rest(seconds: 3), .figureEight(seconds: 12), .turn(degreesPerSecond: 30, seconds: 6)]
        case "walking":
            s.motion = [
                .rest(seconds: 2), .walking(seconds: 30, stepsPerSecond: 1.8), .turn(degreesPerSecond: 30, seconds: 6),
            ]
        case "rest":
            s.motion = [.rest(seconds: 60)]
        case "tour":
            // What the built-in pipeline shows: a short calibration motion first (turned every way for 6 s),
            // then rest, a turn, tilting, walking, and a magnet near the sensor at 24-27 s.
            s.motion = [
                .rest(seconds: 1), .figureEight(seconds: 6),
                .moveTo(headingDegrees: 30, pitchDegrees: 0, rollDegrees: 0, seconds: 1.5), .rest(seconds: 4),
                .turn(degreesPerSecond: 45, seconds: 4),
                .moveTo(headingDegrees: 120, pitchDegrees: 20, rollDegrees: -15, seconds: 2), .rest(seconds: 3),
                .walking(seconds: 8, stepsPerSecond: 1.8),
                .moveTo(headingDegrees: 30, pitchDegrees: 0, rollDegrees: 0, seconds: 2), .rest(seconds: 4),
            ]
            s.disturbances = [
                ScheduledDisturbance(startSeconds: 24, durationSeconds: 3, fieldMicrotesla: Vector3(20, 0, 0))
            ]
        case "calibration_dance":
            // What a person does for a guided calibration: the device turned right over about each axis and
            // six diagonals at 90 deg/s, so the field is seen along every direction of the sensor within 40 s.
            s.motion = [.rest(seconds: 2)]
            for axis in [
                Vector3.unitX, .unitY, .unitZ, Vector3(1, 1, 0), Vector3(1, 0, 1), Vector3(0, 1, -1), Vector3(1, -1, 0),
                Vector3(0, 1, 1), Vector3(1, 0, -1),
            ] {
                s.motion.append(.rotate(sensorAxis: axis.normalized!, degreesPerSecond: 90, seconds: 4))
            }
        case "plausible_disturbance":
            // Heading 30, pitch 10; from 20 s a field of 1.5 uT south and 8 uT east: strength and dip stay
            // within tolerance, the compass turns by 24 degrees.
            s.motion = [.rest(seconds: 40)]
            s.startPitchDegrees = 10
            s.disturbances = [
                ScheduledDisturbance(
                    startSeconds: 20, durationSeconds: 10, fieldMicrotesla: Vector3(8, -1.5, 0), rampSeconds: 0.2)
            ]
        default:
            s.motion = [
                .rest(seconds: 3), .turn(degreesPerSecond: 45, seconds: 4),
                .moveTo(headingDegrees: 120, pitchDegrees: 20, rollDegrees: -15, seconds: 2), .rest(seconds: 2),
                .walking(seconds: 6, stepsPerSecond: 1.8), .figureEight(seconds: 8),
                .moveTo(headingDegrees: 30, pitchDegrees: 0, rollDegrees: 0, seconds: 2),
            ]
            s.disturbances = [
                ScheduledDisturbance(startSeconds: 16, durationSeconds: 3, fieldMicrotesla: Vector3(20, 0, 0))
            ]
        }
        s.sampleRateHz = settings.rateHz
        if settings.gnssRateHz > 0, s.gnssVelocity == nil {
            var receiver = GnssVelocityModel()
            receiver.rateHz = settings.gnssRateHz
            s.gnssVelocity = receiver
        } else if settings.gnssRateHz == 0 {
            s.gnssVelocity = nil
        }
        s.sensors.hardIronMicrotesla = settings.hardIronMicrotesla
        s.sensors.magnetometerNoiseMicrotesla = settings.magnetometerNoiseMicrotesla
        s.sensors.softIron = settings.softIron
        s.sensors.motorFieldMicroteslaPerAmpere = settings.motorFieldMicroteslaPerAmpere
        s.motorCurrentAmperes = settings.motorCurrentAmperes
        if settings.magnetDisturbanceMicrotesla != .zero {
            s.disturbances.append(
                ScheduledDisturbance(
                    startSeconds: settings.magnetDisturbanceStartSeconds + Self.magnetRampSeconds,
                    durationSeconds: settings.magnetDisturbanceSeconds,
                    fieldMicrotesla: settings.magnetDisturbanceMicrotesla, frame: .sensor,
                    rampSeconds: Self.magnetRampSeconds))
        }
        s.loops = true
        s.startTime = 1_700_000_000
        return s
    }

    func run(emit: ([WireFrame]) throws -> Double) throws {
        var sim = IMUSimulator(scenario: scenario())
        // Each extra magnetometer's noise from its own stream, so adding one changes nothing else.
        var extraNoise = extras.indices.map {
            SeededGenerator(seed: UInt64(settings.seed) &* 1_000_003 &+ UInt64($0 + 1))
        }
        let rate = settings.rateHz
        let total = settings.durationSeconds > 0 ? Int((settings.durationSeconds * rate).rounded()) : Int.max
        let started = Clocks.monotonicSeconds()
        var pausedSeconds = 0.0
        var batch: [WireFrame] = []
        var k = 0
        // The ground truth, as BROAD's truth files hold it (t from the first sample, movement always 1).
        let truth = settings.truthPath.isEmpty ? nil : try BufferedFileWriter(path: settings.truthPath)
        try truth?.write("t,qw,qx,qy,qz,movement\n")
        if settings.publishTF { batch.append(staticTransforms(at: RosTime(seconds: sim.scenario.startTime))) }
        // ROS's "not given" for the rates and forces of the truth messages.
        let unknown: Covariance9 = [-1, 0, 0, 0, 0, 0, 0, 0, 0]
        while k < total, let x = sim.next() {
            if let truth {
                let q = x.trueOrientation
                try truth.write("\(x.imu.timestamp - 1_700_000_000),\(q.w),\(q.x),\(q.y),\(q.z),1\n")
            }
            let stamp = settings.stamp == .wall ? Clocks.wallNow() : RosTime(seconds: x.imu.timestamp)
            if settings.publishTruth {
                // Stamped as the sample it belongs to, so a reader pairs it with that sample's heading.
                batch.append(
                    cdrFrame(
                        ImuMessage(
                            header: RosHeader(stamp: stamp, frameId: "world"), orientation: x.trueOrientation,
                            orientationCovariance: .zero, angularVelocity: .zero,
                            angularVelocityCovariance: unknown, linearAcceleration: .zero,
                            linearAccelerationCovariance: unknown),
                        topic: PipelineTopics.truth))
            }
            let toIMU = settings.imuRotation.matrix.transposed,
                toMagnetometer = settings.magnetometerRotation.matrix.transposed
            // The current first: the magnetometer reading of the same instant is corrected with it.
            if settings.motorCurrentAmperes > 0 {
                let current = BatteryStateMessage(
                    header: RosHeader(stamp: stamp, frameId: "base_link"), drawnAmperes: x.motorCurrentAmperes)
                batch.append(cdrFrame(current, topic: PipelineTopics.motorCurrent))
            }
            if let v = x.gnssVelocity {
                // Stamped like the IMU sample it was made at (the receiver's epoch).
                let variance = sim.scenario.gnssVelocity.map { $0.noiseMetresPerSecond * $0.noiseMetresPerSecond } ?? 0
                batch.append(
                    cdrFrame(
                        TwistWithCovarianceStampedMessage(
                            header: RosHeader(stamp: stamp, frameId: "gnss_link"), velocityENU: v.velocityENU,
                            horizontalVariance: variance, verticalVariance: 4 * variance),
                        topic: PipelineTopics.gnssVelocity))
            }
            appendRawSample(
                RosHeader(stamp: stamp, frameId: "imu_link"), angularVelocity: toIMU * x.imu.angularVelocity,
                specificForce: toIMU * x.imu.specificForce,
                fieldTesla: settings.useMagnetometer ? toMagnetometer * x.magnetometer.fieldMicrotesla * 1e-6 : nil,
                magnetometerFrame: settings.publishTF ? "mag_link" : nil, to: &batch)
            if settings.useMagnetometer {
                for (i, extra) in extras.enumerated() {
                    let field =
                        extra.rotation.matrix.transposed * x.bodyFieldMicrotesla + extra.hardIronMicrotesla
                        + extraNoise[i].vector(sigma: sim.scenario.sensors.magnetometerNoiseMicrotesla)
                    let mag = MagneticFieldMessage(
                        header: RosHeader(stamp: stamp, frameId: extra.name + "_link"), magneticField: field * 1e-6,
                        magneticFieldCovariance: .zero)
                    batch.append(cdrFrame(mag, topic: PipelineTopics.magnetometer(named: extra.name)))
                }
            }
            k += 1
            if settings.realtime {
                pausedSeconds += try emit(batch)
                batch.removeAll(keepingCapacity: true)
                let ahead = Double(k) / rate - (Clocks.monotonicSeconds() - started - pausedSeconds)
                if ahead > 0 { usleep(UInt32(ahead * 1e6)) }
            } else if batch.count >= 64 {
                _ = try emit(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        _ = try emit(batch)
        try truth?.close()
    }
}

/// One raw sample as the two frames a source emits: sensor_msgs/Imu (no orientation) on
/// imu/data_raw and sensor_msgs/MagneticField on imu/mag, with the same header.
func appendRawSample(
    _ header: RosHeader, angularVelocity: Vector3, specificForce: Vector3, fieldTesla: Vector3?,
    magnetometerFrame: String? = nil, to frames: inout [WireFrame]
) {
    let imu = ImuMessage(
        header: header, orientation: Quaternion(w: 1, x: 0, y: 0, z: 0), orientationCovariance: .notProvided,
        angularVelocity: angularVelocity, angularVelocityCovariance: .zero, linearAcceleration: specificForce,
        linearAccelerationCovariance: .zero)
    frames.append(cdrFrame(imu, topic: PipelineTopics.imuRaw))
    guard let fieldTesla else { return }
    var magHeader = header
    if let magnetometerFrame { magHeader.frameId = magnetometerFrame }
    let mag = MagneticFieldMessage(header: magHeader, magneticField: fieldTesla, magneticFieldCovariance: .zero)
    frames.append(cdrFrame(mag, topic: PipelineTopics.magnetometer))
}

extension SeededGenerator {
    /// Three independent normal draws of standard deviation `sigma`.
    mutating func vector(sigma: Double) -> Vector3 { Vector3(nextNormal(), nextNormal(), nextNormal()) * sigma }
}
