import CompassCore

/// The Kalman filter's model parameters as fusion-stage settings, for tuning a filter to a sensor
/// from a pipeline file (or `--set fusion.NAME=VALUE` on a replay). Each default is read from
/// `KalmanFilterSettings`, where every parameter is documented with its unit; the ranges keep the
/// model well posed. They apply to `filter: kalman` and its smoother.
enum KalmanParameters {
    struct Parameter {
        let name: String
        let keyPath: WritableKeyPath<KalmanFilterSettings, Double>
        let help: String
        let range: ClosedRange<Double>
    }

    static var all: [Parameter] {
        [
            Parameter(
                name: "gyro_noise_density", keyPath: \.gyroNoiseDensity,
                help: "kalman: gyro angle random walk, rad/s/sqrt(Hz)", range: 1e-6...1),
            Parameter(
                name: "gyro_rate_noise", keyPath: \.gyroRateNoise,
                help: "kalman: attitude noise per unit of angular rate (scale factor, misalignment), sqrt(s)",
                range: 0...0.1),
            Parameter(
                name: "gyro_bias_random_walk", keyPath: \.gyroBiasRandomWalk,
                help: "kalman: gyro bias instability, rad/s/sqrt(s)", range: 0...0.01),
            Parameter(
                name: "accelerometer_low_pass_s", keyPath: \.accelerometerLowPassSeconds,
                help: "kalman: time constant of the earth-frame specific force low-pass, seconds", range: 0.05...60),
            Parameter(
                name: "inclination_noise_density", keyPath: \.inclinationNoiseDensity,
                help: "kalman: noise density of the low-passed gravity direction, rad*sqrt(s)", range: 1e-6...1),
            Parameter(
                name: "acceleration_rejection_tolerance", keyPath: \.accelerationRejectionTolerance,
                help: "kalman: accelerometer ignored while the low-passed force differs from g by more (fraction)",
                range: 0.001...1),
            Parameter(
                name: "lever_arm_s", keyPath: \.leverArmSeconds,
                help: "kalman: memory of the lever-arm fit (rotation's share of the force), seconds; 0 = off",
                range: 0...3600),
            Parameter(
                name: "lever_arm_prior_m", keyPath: \.leverArmPriorMeters,
                help: "kalman: prior 1-sigma length of the lever arm from the pivot to the sensor, metres",
                range: 1e-3...10),
            Parameter(
                name: "pivot_acceleration_noise_density", keyPath: \.pivotAccelerationNoiseDensity,
                help: "kalman: density of the force the rotation does not explain, m/s^2*sqrt(s)", range: 1e-3...100),
            Parameter(
                name: "heading_noise_density", keyPath: \.headingNoiseDensity,
                help: "kalman: noise density of the horizontal field direction, rad*sqrt(s)", range: 1e-5...10),
            Parameter(
                name: "unseen_disturbance_fraction", keyPath: \.unseenDisturbanceFraction,
                help: "kalman: 1-sigma field disturbance no check sees, fraction of the field (heading accuracy)",
                range: 0...0.5),
        ]
    }

    static var specs: [SettingSpec] {
        let defaults = KalmanFilterSettings()
        return all.map { p in
            SettingSpec(p.name, .number, SettingSpec.text(defaults[keyPath: p.keyPath]), p.help, range: p.range)
        }
    }

    /// `base` with the stage's values.
    static func apply(_ s: StageSettings, to base: KalmanFilterSettings) -> KalmanFilterSettings {
        var settings = base
        for p in all { settings[keyPath: p.keyPath] = s.number(p.name) }
        return settings
    }

    /// A parameter given for a filter that does not have it.
    static func check(_ s: StageSettings) -> SettingProblem? {
        guard s.string("filter") != FilterKind.kalman.rawValue,
            let given = all.first(where: { s.marks[$0.name] != nil })
        else { return nil }
        return SettingProblem(given.name, "a Kalman filter parameter: needs filter kalman")
    }
}
