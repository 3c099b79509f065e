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

    /// The scenario the settings ask for: the named motion with the settings' sensors, rates,
    /// receiver and magnet.
    func scenario() -> SimulationScenario {
        var s = Self.motion(named: settings.scenario, seed: settings.seed, gnssRateHz: settings.gnssRateHz)
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

    /// The motion and disturbances of scenario `name` (an unknown name: the default tour of turns,
    /// tilts, walking and a magnet).
    static func motion(named name: String, seed: Int, gnssRateHz: Double) -> SimulationScenario {
        var s = SimulationScenario()
        s.seed = UInt64(seed)
        s.startHeadingDegrees = 30
        switch name {
        case "drive", "drive_disturbed":
            // A car's route drawn from the seed (`SimulationScenario.drivingVehicle`); its motors' current
            // follows the drive.
            s = name == "drive" ? .drivingVehicle(seed: UInt64(seed)) : .disturbedDrive(seed: UInt64(seed))
            s.motorCurrentProfile = .drive
            s.gnssVelocity?.rateHz = gnssRateHz
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
                appendExtraMagnetometers(
                    bodyFieldMicrotesla: x.bodyFieldMicrotesla, stamp: stamp, noise: &extraNoise,
                    sigma: sim.scenario.sensors.magnetometerNoiseMicrotesla, to: &batch)
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

    /// Each extra magnetometer's reading of the body-frame field: turned by its mounting, with its
    /// hard iron and its own noise (`sigma` microtesla, from `noise[i]`), on imu/mag/NAME.
    func appendExtraMagnetometers(
        bodyFieldMicrotesla: Vector3, stamp: RosTime, noise: inout [SeededGenerator], sigma: Double,
        to batch: inout [WireFrame]
    ) {
        for (i, extra) in extras.enumerated() {
            let field =
                extra.rotation.matrix.transposed * bodyFieldMicrotesla + extra.hardIronMicrotesla
                + noise[i].vector(sigma: sigma)
            let mag = MagneticFieldMessage(
                header: RosHeader(stamp: stamp, frameId: extra.name + "_link"), magneticField: field * 1e-6,
                magneticFieldCovariance: .zero)
            batch.append(cdrFrame(mag, topic: PipelineTopics.magnetometer(named: extra.name)))
        }
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
