import Foundation
import CompassCore
import WireFormat
import MessageBus

/// The fusion stage's settings, each declared once with its unit, range and help, and its registry entry.
extension FusionStage {
    struct Settings: DeclaredSettings {
        /// Which filter fuses.
        var filter = FilterKind.kalman
        /// The IMU's output latency to predict over, seconds.
        var sensorLatencySeconds = 0.0
        /// Subtracted from the heading ("this direction is zero"), degrees.
        var referenceOffsetDegrees = 0.0
        /// frame_id of the outputs; "" = that of the IMU messages.
        var frameId = ""
        /// Smooth offline (Kalman only): outputs come at the end of the stream, each estimate using
        /// the whole recording (`KalmanSmoother`).
        var smooth = false
        /// Expected field strength, microtesla; 0 = from the site's World Magnetic Model, else the
        /// accepted calibration's radius, else learned.
        var expectedStrengthMicrotesla = 0.0
        /// Expected dip, degrees; used with `expectedStrengthMicrotesla`.
        var expectedDipDegrees = 0.0
        /// The gate's tolerances: a fraction of the strength, and degrees of dip.
        var strengthTolerance = MagneticGateSettings().strengthTolerance
        var dipToleranceDegrees = MagneticGateSettings().dipToleranceDegrees
        /// Publish interference/status this often (stream seconds), and on every change.
        var statusSeconds = 1.0
        /// The site: WGS-84 latitude and longitude, degrees, and height above the ellipsoid, km;
        /// nil = from fix messages, if any.
        var latitudeDegrees: Double?
        var longitudeDegrees: Double?
        var heightKilometres = 0.0
        /// Model date; nil = the date of each sample.
        var decimalYear: Double?
        /// The Kalman filter's model parameters the stage exposes (the rest keep their defaults).
        var kalmanModel = KalmanFilterSettings()
        /// The dual-antenna baseline's yaw against the vehicle's x axis, degrees clockwise: subtracted
        /// from gnss/heading.
        var antennaYawOffsetDegrees = 0.0

        static let table = SettingTable<Settings>(
            [
                .choice("filter", \.filter, "the fusion filter"),
                .number(
                    "sensor_latency_s", \.sensorLatencySeconds, unit: "s", range: 0...1,
                    "IMU output latency to predict over"
                ).formerly("sensor_latency"),
                .number(
                    "reference_offset_deg", \.referenceOffsetDegrees, unit: "deg", range: -360...360,
                    "subtracted from the heading ('this direction is zero')"),
                .string("frame_id", \.frameId, "frame_id of the outputs; '' = that of the IMU messages"),
                .bool(
                    "smooth", \.smooth,
                    "smooth offline (kalman only): every estimate uses the whole recording, past and future; "
                        + "outputs come when the source has ended (for bag replays)"),
                .number(
                    "expected_strength_ut", \.expectedStrengthMicrotesla, unit: "uT", range: 0...1000,
                    "expected field strength; 0 = the World Magnetic Model's at the site, else the accepted "
                        + "calibration's radius, else learned"),
                .number(
                    "expected_dip_deg", \.expectedDipDegrees, unit: "deg", range: -90...90,
                    "expected dip; used with expected_strength_ut"),
                .number(
                    "strength_tolerance", \.strengthTolerance, unit: "fraction", range: 0.001...10,
                    "a reading whose strength differs from the expected by more is disturbed"),
                .number(
                    "dip_tolerance_deg", \.dipToleranceDegrees, unit: "deg", range: 0.01...180,
                    "a reading whose dip differs from the expected by more is disturbed"),
                .number(
                    "status_period_s", \.statusSeconds, unit: "s", range: 0.001...86_400,
                    "publish interference/status this often (and on every change)"
                ).formerly("status_seconds"),
                .optionalNumber(
                    "latitude", \.latitudeDegrees, unit: "deg", range: SettingSpec.latitudeRange,
                    "the site: WGS-84 latitude for the declination (true heading) and the expected field; "
                        + "'' = from fix messages if any"),
                .optionalNumber(
                    "longitude", \.longitudeDegrees, unit: "deg", range: SettingSpec.longitudeRange,
                    "longitude (with latitude)"),
                .number(
                    "height_km", \.heightKilometres, unit: "km", range: SettingSpec.heightRange,
                    "height above the ellipsoid"),
                .optionalNumber(
                    "date", \.decimalYear, unit: "year", range: SettingSpec.yearRange,
                    "decimal year for the model; '' = the date of each sample; outside 2025 to 2030 the heading is "
                        + "flagged model_out_of_range"),
                .number(
                    "antenna_yaw_offset_deg", \.antennaYawOffsetDegrees, unit: "deg", range: -360...360,
                    "the dual-antenna baseline's yaw against the vehicle's x axis, clockwise; subtracted from "
                        + "gnss/heading"),
            ] + kalmanParameters)

        /// The Kalman model's parameters, for tuning a filter to a sensor from a pipeline file (or
        /// `--set fusion.NAME=VALUE`). Each is documented with its unit in `KalmanFilterSettings`;
        /// the ranges keep the model well posed.
        static let kalmanParameters: [SettingEntry<Settings>] = [
            .bool(
                "use_mag", \.kalmanModel.useMagnetometer,
                "kalman: steer the heading with the magnetometer; false: GNSS alone gives it (course, dual-antenna "
                    + "heading, or velocity changes against the accelerometer), unknown until it does"),
            .bool(
                "course_is_heading", \.kalmanModel.courseIsHeading,
                "kalman: the vehicle moves along its x axis (car, wheeled robot): the GNSS course over ground is "
                    + "its heading above min_course_speed"),
            .number(
                "min_course_speed", \.kalmanModel.minimumCourseSpeedMetresPerSecond, unit: "m/s", range: 0.1...100,
                "kalman: slowest speed at which the course is taken for the heading"),
            .number(
                "course_slip_deg", \.kalmanModel.courseSlipDegrees, unit: "deg", range: 0...45,
                "kalman: 1-sigma angle between course and heading (side slip, wheel alignment)"),
            .number(
                "compass_disagreement_deg", \.kalmanModel.compassDisagreementDegrees, unit: "deg", range: 1...180,
                "kalman: a compass off a GNSS-held heading by more, on average, is flagged and not used"),
            .number(
                "vertical_turn_deg_s", \.kalmanModel.verticalTurnDegreesPerSecond, unit: "deg/s", range: 0...360,
                "kalman: a turn about the vertical alone faster than this keeps the accelerometer out of the tilt "
                    + "until the low-passed force has forgotten it (a vehicle's centripetal acceleration; 0 = off)"),
            .number(
                "vertical_turn_tolerance_deg", \.kalmanModel.verticalTurnToleranceDegrees, unit: "deg", range: 0...90,
                "kalman: during such a turn the accelerometer is still used while its low-passed force is within "
                    + "this of the carried vertical beyond 3 sigma (a device turned in place; 0 = never)"),
            .number(
                "gnss_yaw_align_deg", \.kalmanModel.gnssYawAlignmentDegrees, unit: "deg", range: 0...90,
                "kalman: without a known heading, take the GNSS yaw hypotheses' heading once its 1-sigma error is "
                    + "at most this (0 = only the closed-form alignment from one clear acceleration)"),
            .number(
                "gnss_yaw_check_deg", \.kalmanModel.gnssYawCheckDegrees, unit: "deg", range: 0...90,
                "kalman: flag the compass when the GNSS yaw hypotheses, within this 1-sigma error, disagree with "
                    + "the heading by more than compass_disagreement_deg on average (0 = no such check)"),
            .number(
                "gyro_noise_density", \.kalmanModel.gyroNoiseDensity, unit: "rad/s/sqrt(Hz)", range: 1e-6...1,
                "kalman: gyro angle random walk"),
            .number(
                "gyro_rate_noise", \.kalmanModel.gyroRateNoise, unit: "sqrt(s)", range: 0...0.1,
                "kalman: attitude noise per unit of angular rate (scale factor, misalignment)"),
            .number(
                "gyro_bias_random_walk", \.kalmanModel.gyroBiasRandomWalk, unit: "rad/s/sqrt(s)", range: 0...0.01,
                "kalman: gyro bias instability"),
            .number(
                "gyro_bias_random_walk_before_rest", \.kalmanModel.gyroBiasRandomWalkBeforeRest,
                unit: "rad/s/sqrt(s)", range: 0...0.01,
                "kalman: gyro bias random walk until the bias has been measured at rest"),
            .number(
                "initial_gyro_bias_sigma", \.kalmanModel.initialGyroBiasSigma, unit: "rad/s", range: 1e-5...0.5,
                "kalman: 1-sigma gyro bias uncertainty at start (a phone's uncalibrated gyro: up to 0.09)"),
            .number(
                "accelerometer_low_pass_s", \.kalmanModel.accelerometerLowPassSeconds, unit: "s", range: 0.05...60,
                "kalman: time constant of the earth-frame specific force low-pass"),
            .number(
                "inclination_noise_density", \.kalmanModel.inclinationNoiseDensity, unit: "rad*sqrt(s)",
                range: 1e-6...1, "kalman: noise density of the low-passed gravity direction"),
            .number(
                "linear_acceleration_correlation_s", \.kalmanModel.linearAccelerationCorrelationSeconds, unit: "s",
                range: 0...10,
                "kalman: correlation time of linear acceleration while the bias is not known at rest; "
                    + "RMS a adds a sqrt(this) / g to the inclination noise"),
            .number(
                "acceleration_rejection_tolerance", \.kalmanModel.accelerationRejectionTolerance, unit: "fraction",
                range: 0.001...1,
                "kalman: accelerometer ignored while the low-passed force differs from g by more"),
            .number(
                "inclination_gate_deg", \.kalmanModel.inclinationGateDegrees, unit: "deg", range: 0...90,
                "kalman: a low-passed force further from the gyro-carried vertical (beyond 3 sigma) is not tilt; "
                    + "0 = off"),
            .number(
                "rest_confirmation_s", \.kalmanModel.restConfirmationSeconds, unit: "s", range: 0...10,
                "kalman: the bias is learned from gyro readings this old, once rest has lasted this much longer"),
            .number(
                "lever_arm_s", \.kalmanModel.leverArmSeconds, unit: "s", range: 0...3600,
                "kalman: memory of the lever-arm fit (rotation's share of the force); 0 = off"),
            .number(
                "lever_arm_prior_m", \.kalmanModel.leverArmPriorMeters, unit: "m", range: 1e-3...10,
                "kalman: prior 1-sigma length of the lever arm from the pivot to the sensor"),
            .number(
                "pivot_acceleration_noise_density", \.kalmanModel.pivotAccelerationNoiseDensity,
                unit: "m/s^2*sqrt(s)", range: 1e-3...100, "kalman: density of the force the rotation does not explain"),
            .number(
                "heading_noise_density", \.kalmanModel.headingNoiseDensity, unit: "rad*sqrt(s)", range: 1e-5...10,
                "kalman: noise density of the horizontal field direction"),
            .number(
                "unseen_disturbance_fraction", \.kalmanModel.unseenDisturbanceFraction, unit: "fraction",
                range: 0...0.5,
                "kalman: 1-sigma field disturbance no check sees, a fraction of the field (heading accuracy)"),
        ]

        /// The site, when latitude and longitude are given.
        var position: MagneticModelLookup.Position? {
            guard let latitudeDegrees, let longitudeDegrees else { return nil }
            return MagneticModelLookup.Position(
                latitudeDegrees: latitudeDegrees, longitudeDegrees: longitudeDegrees,
                heightKilometres: heightKilometres)
        }

        /// The disturbance gate of either filter: the tolerances, and the expected field when given.
        var gate: MagneticGateSettings {
            var gate = MagneticGateSettings()
            if expectedStrengthMicrotesla > 0 {
                gate.referenceFieldMicrotesla = expectedStrengthMicrotesla
                gate.referenceDipDegrees = expectedDipDegrees
            }
            gate.strengthTolerance = strengthTolerance
            gate.dipToleranceDegrees = dipToleranceDegrees
            return gate
        }

        /// The Kalman filter's settings: the model with the common options and the gate.
        var kalman: KalmanFilterSettings {
            var settings = kalmanModel
            settings.sensorLatencySeconds = sensorLatencySeconds
            settings.referenceOffsetDegrees = referenceOffsetDegrees
            settings.magneticGate = gate
            return settings
        }

        /// `given`: the values the file gave (a Kalman parameter given for the complementary filter
        /// is refused, while its default is not).
        static func check(_ settings: Settings, given: StageSettings) -> SettingProblem? {
            let kalman = settings.filter == .kalman
            if settings.smooth, !kalman {
                return SettingProblem(
                    "smooth", "smoothing runs the Kalman filter's model backwards: needs filter kalman")
            }
            if !kalman, let parameter = kalmanParameters.first(where: { given.marks[$0.spec.name] != nil }) {
                return SettingProblem(parameter.spec.name, "a Kalman filter parameter: needs filter kalman")
            }
            switch (settings.latitudeDegrees, settings.longitudeDegrees) {
            case (nil, .some): return SettingProblem("longitude", "a longitude needs a latitude")
            case (.some, nil): return SettingProblem("latitude", "a latitude needs a longitude")
            default: return nil
            }
        }
    }

    static let type = StageType(
        name: "fusion", role: .transform,
        summary: "the orientation filter: heading with its accuracy, true north and the fused orientation",
        settings: Settings.table,
        outputTopics: [PipelineTopics.heading, PipelineTopics.imuFused, PipelineTopics.interferenceStatus],
        passesOn: .only([
            PipelineTopics.fix, PipelineTopics.calibrationStatus, PipelineTopics.gnssVelocity,
            PipelineTopics.gnssHeading, PipelineTopics.motorCompensation, PipelineTopics.motorCurrent,
        ]),
        check: { settings, given in Settings.check(settings, given: given) }
    ) { settings, context in FusionStage(settings, log: context.log) }
}
