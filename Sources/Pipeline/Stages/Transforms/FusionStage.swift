import Foundation
import CompassCore
import WireFormat
import MessageBus

/// The fusion filter as a stage: imu/data_raw + imu/mag in, heading (gyrocompass_msgs/Heading, with
/// true north when a position is known) and imu/data (sensor_msgs/Imu with the orientation) out.
///
/// It owns the one verdict on each magnetometer reading (its filter's `MagneticDisturbanceGate`,
/// published on interference/status), the magnetic reference that verdict compares with (the World
/// Magnetic Model at the site, else the accepted calibration's radius and the dip seen since, else
/// learned), the gyro bias (a state of the filter) and the site. The calibration it reads from
/// calibration/status: a new calibration renews the reference and widens the heading uncertainty.
final class FusionStage: StageLogic, InPlaceTransform, @unchecked Sendable {
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
                    "sensor_latency", \.sensorLatencySeconds, unit: "s", range: 0...1,
                    "IMU output latency to predict over"),
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
                    "status_seconds", \.statusSeconds, unit: "s", range: 0.001...86_400,
                    "publish interference/status this often (and on every change)"),
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
                "accelerometer_low_pass_s", \.kalmanModel.accelerometerLowPassSeconds, unit: "s", range: 0.05...60,
                "kalman: time constant of the earth-frame specific force low-pass"),
            .number(
                "inclination_noise_density", \.kalmanModel.inclinationNoiseDensity, unit: "rad*sqrt(s)",
                range: 1e-6...1, "kalman: noise density of the low-passed gravity direction"),
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

    let settings: Settings
    var filter: any OrientationFilter
    /// Declination source: the fixed position, or the latest fix message.
    var position: MagneticModelLookup.Position?
    var model = MagneticModelLookup()
    var aligner = SampleAligner()
    /// Header of every IMU sample not fused yet (exact stamps, frame id), in order.
    var pendingHeaders: [RosHeader] = []
    var head = 0
    /// With `smooth`: the forward pass, and what each accepted sample's outputs need besides the estimate.
    var smoother: KalmanSmoother?
    var held: [HeldSample] = []
    var frameIds: [String] = []
    /// The verdicts told on interference/status.
    var tally: InterferenceTally
    /// The site the magnetic reference was taken at; nil = none yet.
    var referenceSite: MagneticModelLookup.Position?
    /// The calibration last read from calibration/status.
    var calibration: CalibrationStatusMessage?
    /// The calibration the magnetic reference was last renewed for (nil while uncalibrated).
    var renewedFor: CalibrationStatusMessage?
    var lastHeader = RosHeader(stamp: RosTime(sec: 0, nanosec: 0), frameId: "")

    let log: @Sendable (String) -> Void

    init(_ settings: Settings, log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.settings = settings
        self.log = log
        switch settings.filter {
        case .kalman:
            filter = KalmanFilter(settings: settings.kalman)
        case .complementary:
            var c = ComplementaryFilterSettings(
                CommonFilterOptions(
                    sensorLatencySeconds: settings.sensorLatencySeconds,
                    referenceOffsetDegrees: settings.referenceOffsetDegrees))
            c.magneticGate = settings.gate
            filter = ComplementaryFilter(settings: c)
        }
        position = settings.position
        if settings.smooth { smoother = KalmanSmoother(settings: settings.kalman) }
        tally = InterferenceTally(statusSeconds: settings.statusSeconds)
    }

    /// The gate whose reference interference/status reports; while the smoother hands out its
    /// estimates, the forward filter's gate as the recording left it (the smoother is busy then).
    var gate: MagneticDisturbanceGate { finalGate ?? smoother?.filter.magneticGate ?? filter.magneticGate }
    var finalGate: MagneticDisturbanceGate?

    /// The World Magnetic Model's strength and dip at the site become the reference, once per site
    /// (a fix that moves by more than 0.1 degrees is a new site); an expected field given in the
    /// settings wins.
    func takeReference(at time: Double) {
        guard settings.expectedStrengthMicrotesla <= 0, let p = position,
            referenceSite.map({
                abs($0.latitudeDegrees - p.latitudeDegrees) > 0.1 || abs($0.longitudeDegrees - p.longitudeDegrees) > 0.1
            }) ?? true,
            let year = settings.decimalYear ?? decimalYear(unixSeconds: time),
            case .success(let e) = model.elements(at: p, decimalYear: year)
        else { return }
        referenceSite = p
        let strength = e.totalNanotesla / 1000
        if smoother != nil {
            smoother!.setMagneticReference(strengthMicrotesla: strength, dipDegrees: e.inclinationDegrees)
        } else {
            filter.setMagneticReference(strengthMicrotesla: strength, dipDegrees: e.inclinationDegrees)
        }
    }

    /// A calibration/status that changes the calibration becomes a notice to the filter: how far the
    /// change can have turned the compass is the change of the calibrated field (offset, and the
    /// soft-iron change times the radius) over the horizontal field at the reference dip.
    func noteCalibration(_ c: CalibrationStatusMessage) {
        calibrationCheck = nil  // a calibration stage speaks for the readings
        let applied = CalibrationShift.applied
        let calibrated = applied(c)
        let previous = calibration
        calibration = c
        let wasCalibrated = previous.map(applied) ?? false
        // A first status that is already calibrated (a file, fixed values) changed nothing. Later ones are
        // measured from the calibration the reference was last renewed for, so refinements that each
        // turn the compass a little renew it once their sum matters, and not at every refit.
        var shift = 0.0
        if let p = previous {
            let radius = c.fieldStrength.isFinite ? c.fieldStrength : TypicalEarthField.strengthMicrotesla
            func moved(from a: CalibrationStatusMessage) -> Double { CalibrationShift.moved(from: a, to: c) }
            let sameStrength = p.fieldStrength == c.fieldStrength || (p.fieldStrength.isNaN && c.fieldStrength.isNaN)
            if calibrated == wasCalibrated && !(moved(from: p) > 1e-9) && sameStrength { return }
            let distance = moved(from: renewedFor ?? p)
            let dip = (gate.referenceDipDegrees ?? TypicalEarthField.dipDegrees) * radiansPerDegree
            let horizontal = max(radius * cos(dip), 1e-3)
            shift = distance.isFinite ? min(Double.pi, distance / horizontal) : .pi
        }
        if calibrated != wasCalibrated || shift >= gate.settings.consistencyGateDegrees * radiansPerDegree {
            renewedFor = calibrated ? c : nil
        }
        let notice = MagnetometerCalibrationNotice(
            calibrated: calibrated, fieldStrengthMicrotesla: c.fieldStrength.isFinite ? c.fieldStrength : nil,
            headingShiftRadians: shift)
        if smoother != nil { smoother!.noteCalibration(notice) } else { filter.noteCalibration(notice) }
    }

    /// Declination (degrees east) and true-north flags for a time.
    func trueNorth(at time: Double) -> (declination: Double, flags: UInt16) {
        guard let p = position else { return (.nan, HeadingMessage.flagNoPosition) }
        guard let year = settings.decimalYear ?? decimalYear(unixSeconds: time) else {
            return (.nan, HeadingMessage.flagModelOutOfRange)
        }
        switch model.elements(at: p, decimalYear: year) {
        case .success(let e): return (e.declinationDegrees, e.isInCautionZone ? HeadingMessage.flagModelCautionZone : 0)
        case .failure: return (.nan, HeadingMessage.flagModelOutOfRange)
        }
    }

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        switch frame.topic {
        case PipelineTopics.imuRaw:
            let m = try imuSample(frame)
            try fuseImu(m.header, m.angularVelocity, m.linearAcceleration, into: &output)
        case PipelineTopics.magnetometer:
            let m = try magneticSample(frame)
            try fuseMagnetometer(m.header, m.field, into: &output)
        case PipelineTopics.fix:
            let f = try decoded(frame, as: NavSatFixMessage.self)
            if f.status >= 0 && !f.isPlausiblePosition { implausibleFixes += 1 }
            if settings.position == nil, f.status >= 0, f.isPlausiblePosition {
                position = .init(
                    latitudeDegrees: f.latitude, longitudeDegrees: f.longitude,
                    heightKilometres: f.altitude.isFinite ? f.altitude / 1000 : 0)
                takeReference(at: f.header.stamp.seconds)
            }
            output.append(frame)  // the direction stage uses the fixes too
        case PipelineTopics.calibrationStatus:
            if let c = try? CalibrationStatusMessage(cdrBytes: frame.payload) { noteCalibration(c) }
            output.append(frame)  // status travels on to the sinks
        case PipelineTopics.truth:
            break  // the simulator's truth, for a summary that reads the source: nothing to fuse
        case PipelineTopics.motorCurrent, PipelineTopics.motorCompensation:
            output.append(frame)  // the calibration stage used it; a record sink and the report keep it
        case PipelineTopics.gnssVelocity:
            let m = try decoded(frame, as: TwistWithCovarianceStampedMessage.self)
            aid(
                velocity: GnssVelocitySample(
                    timestamp: m.header.stamp.seconds, velocityENU: m.linear, horizontalVariance: m.horizontalVariance))
            output.append(frame)
        case PipelineTopics.gnssHeading:
            let m = try decoded(frame, as: ImuMessage.self)
            aid(heading: m)
            output.append(frame)
        default:
            if let name = PipelineTopics.otherMagnetometerName(frame.topic) {
                let m = try magneticSample(frame)
                fuseOther(name, MagnetometerSample(timestamp: m.header.stamp.seconds, fieldMicrotesla: m.field * 1e6))
            } else if let name = PipelineTopics.otherCalibrationName(frame.topic) {
                if let c = try? CalibrationStatusMessage(cdrBytes: frame.payload) { noteCalibration(c, of: name) }
                output.append(frame)
            } else if PipelineTopics.perMagnetometerBase(of: frame.topic) == PipelineTopics.motorCompensation {
                output.append(frame)
            } else {
                throw UnexpectedFrame(
                    reason: "fusion reads \(PipelineTopics.imuRaw) and \(PipelineTopics.magnetometer) only")
            }
        }
    }

    /// Magnetometers besides the primary (imu/mag/NAME), by name.
    var others: [String: OtherMagnetometerState] = [:]
    /// Their names in the order they first appeared.
    var otherNames: [String] = []

    /// The filter's index for magnetometer `name`, registering it on its first reading; nil when the
    /// filter (the complementary filter, the smoother) fuses one magnetometer only.
    func otherIndex(_ name: String) -> Int? {
        if let o = others[name] { return o.index }
        let index = smoother == nil ? filter.addMagnetometer(named: name, primaryName: Self.primaryName) : nil
        others[name] = OtherMagnetometerState(
            index: index, tally: InterferenceTally(statusSeconds: settings.statusSeconds))
        otherNames.append(name)
        return index
    }

    func fuseOther(_ name: String, _ sample: MagnetometerSample) {
        guard let index = otherIndex(name) else {
            others[name]!.passedOver += 1
            return
        }
        filter.add(sample, toMagnetometer: index)
    }

    /// A calibration of magnetometer `name` (calibration/status/NAME): as `noteCalibration` for the primary.
    func noteCalibration(_ c: CalibrationStatusMessage, of name: String) {
        guard let index = otherIndex(name) else { return }
        let previous = others[name]!.calibration
        others[name]!.calibration = c
        let calibrated = CalibrationShift.applied(c)
        guard let p = previous else {
            filter.noteCalibration(
                MagnetometerCalibrationNotice(
                    calibrated: calibrated, fieldStrengthMicrotesla: c.fieldStrength.isFinite ? c.fieldStrength : nil,
                    headingShiftRadians: 0),
                magnetometer: index)
            return
        }
        guard
            let shift = CalibrationShift.radians(
                from: p, to: c, dipDegrees: gate.referenceDipDegrees ?? TypicalEarthField.dipDegrees)
        else {
            return
        }
        filter.noteCalibration(
            MagnetometerCalibrationNotice(
                calibrated: calibrated, fieldStrengthMicrotesla: c.fieldStrength.isFinite ? c.fieldStrength : nil,
                headingShiftRadians: shift),
            magnetometer: index)
    }

    /// The primary magnetometer's name in the health of several (imu/mag).
    static let primaryName = PipelineTopics.primaryMagnetometerName

    /// After a filter update: each other magnetometer's new verdicts counted, and its
    /// interference/status/NAME when due.
    func tellOthers(_ header: RosHeader, into output: inout [WireFrame]) {
        let health = filter.magnetometerHealth
        guard health.count > 1 else { return }
        for (i, h) in health.enumerated().dropFirst() {
            let name = h.name
            guard var o = others[name], h.readings > o.seen.readings else { continue }
            let used = h.used > o.seen.used
            let flags: FusionFlags =
                used
                ? []
                : h.outvoted > o.seen.outvoted
                    ? [.magnetometerRejected, .magneticGyroInconsistent]
                    : [.magnetometerRejected]
            if h.isOutvoted != o.seen.isOutvoted { logVote(h, at: header.stamp.seconds) }
            o.seen = h
            o.tally.count(flags, at: header.stamp.seconds)
            var h2 = header
            h2.frameId = name
            if let gate = filter.magnetometerGate(i), let status = o.tally.status(h2, gate: gate) {
                output.append(cdrFrame(status, topic: PipelineTopics.interferenceStatus(named: name)))
            }
            others[name] = o
        }
        if let primary = health.first, primary.isOutvoted != primaryOutvoted {
            primaryOutvoted = primary.isOutvoted
            logVote(primary, at: header.stamp.seconds)
        }
    }
    var primaryOutvoted = false

    /// The log line of a magnetometer outvoted or taken back.
    func logVote(_ h: MagnetometerHealth, at seconds: Double) {
        let why: String
        switch (h.isOutvoted, h.disagreement) {
        case (false, _): why = "agrees with the others again"
        case (true, .dip?):
            why = "outvoted: its field dips \(format(h.averagedDipDegrees, 1)) deg, unlike the others'"
        case (true, .strength?):
            why =
                "outvoted: its field is \(format(100 * h.averagedStrengthShare, 0)) % of its calibrated strength, "
                + "unlike the others'"
        case (true, _):
            why =
                "outvoted: its heading is \(format(h.averagedInnovationDegrees, 1)) deg from the filter's, the "
                + "others agree"
        }
        log("fusion: at \(format(seconds, 2)) s magnetometer \(h.name) \(why)")
    }

    /// One line per magnetometer for the summary: "mast: 11890 readings, used 99.1 %, 0.9 % rejected by
    /// its gate, 0.0 % outvoted, 0 uncalibrated".
    static func describe(_ h: MagnetometerHealth) -> String {
        func share(_ n: Int) -> String { format(100 * Double(n) / Double(max(h.readings, 1)), 1) + " %" }
        return "\(h.name): \(h.readings) reading(s), used \(share(h.used)), rejected by its gate "
            + "\(share(h.rejectedByGate)), outvoted \(share(h.outvoted)) (\(h.changes) change(s)), "
            + "\(h.uncalibrated) while uncalibrated"
    }

    /// GNSS messages the filter could not take (the complementary filter, the smoother).
    var gnssPassedOver = 0

    func aid(velocity: GnssVelocitySample) {
        let declination = trueNorth(at: velocity.timestamp).declination
        if smoother != nil || !filter.aid(velocity: velocity, declinationDegrees: declination) { gnssPassedOver += 1 }
    }

    /// A dual-antenna heading: the orientation's yaw (ENU, counter-clockwise from east) as a compass
    /// heading, less the baseline's offset; its variance from orientation_covariance[8] (rad^2). One
    /// without an orientation (covariance[0] = -1) or a yaw (x axis vertical) goes to the filter as NaN,
    /// which counts it unusable.
    func aid(heading m: ImuMessage) {
        let provided = m.orientationCovariance.m0 != -1
        // Only a rotation has a heading: an all-zero or far from unit quaternion is a fault (unusable).
        let q = m.orientation
        let unit = abs(q.w * q.w + q.x * q.x + q.y * q.y + q.z * q.z - 1) <= 0.1
        let heading = provided && unit ? m.orientation.headingDegrees : nil
        let sample = GnssHeadingSample(
            timestamp: m.header.stamp.seconds, headingDegrees: (heading ?? .nan) - settings.antennaYawOffsetDegrees,
            varianceDegrees2: m.orientationCovariance.m8 * degreesPerRadian * degreesPerRadian)
        let declination = trueNorth(at: sample.timestamp).declination
        if smoother != nil || !filter.aid(gnssHeading: sample, declinationDegrees: declination) { gnssPassedOver += 1 }
    }

    func fuseImu(
        _ header: RosHeader, _ angularVelocity: Vector3, _ linearAcceleration: Vector3, into output: inout [WireFrame]
    ) throws {
        pendingHeaders.append(header)
        let sample = ImuSample(
            timestamp: header.stamp.seconds, angularVelocity: angularVelocity, specificForce: linearAcceleration)
        try fuse(aligner.imu(sample), into: &output)
    }

    /// `field` in tesla.
    func fuseMagnetometer(_ header: RosHeader, _ field: Vector3, into output: inout [WireFrame]) throws {
        try fuse(
            aligner.magnetometer(MagnetometerSample(timestamp: header.stamp.seconds, fieldMicrotesla: field * 1e6)),
            into: &output)
    }

    /// Reads samples in place and publishes only its own outputs; fixes and status take the general path.
    var inputHandling: InputHandling { .inPlace(.ownFramesOnly) }

    func inPlaceSample(_ frame: WireFrame.View) -> InPlaceSample? { decodeInPlace(frame) }

    func apply(_ sample: InPlaceSample, to frame: WireFrame.View, extra: inout [WireFrame]) throws {
        switch sample {
        case .imu(let h, let w, let a, _): try fuseImu(h, w, a, into: &extra)
        case .magnetometer(let h, let field, _): try fuseMagnetometer(h, field, into: &extra)
        case .current, .unchanged: break
        }
    }

    /// Fixes whose position is off the earth, passed over (never a declination from them).
    var implausibleFixes = 0

    /// Judges the readings while no calibration stage speaks for them (no calibration/status came):
    /// readings that carry iron nobody removes make the heading unusable, and the filter is told so.
    var calibrationCheck: CalibrationCheck? = CalibrationCheck()
    var calibrationFinding: CalibrationCheck.Finding?

    func check(_ pair: (imu: ImuSample, magnetometer: MagnetometerSample?)) {
        guard calibrationCheck != nil else { return }
        let i = pair.imu
        calibrationCheck!.addMotion(rate: i.angularVelocity, specificForce: i.specificForce, time: i.timestamp)
        guard let m = pair.magnetometer, let found = calibrationCheck!.add(m.fieldMicrotesla, time: m.timestamp)
        else { return }
        calibrationFinding = found
        // The smoother's headings come at the end: judged wrong at once. The filter's are compared with
        // the corrected readings first: its gate may have kept the iron out all along.
        if smoother != nil { declareUnusable(found, at: m.timestamp, off: nil) }
    }

    /// After a finding: the filter's heading against the readings corrected by the correction found (the
    /// corrected field turned into the earth frame by the filter's orientation points north when the
    /// heading is right). A disagreement beyond `CalibrationCheckSettings.maximumDisagreementDegrees`
    /// over 10 s makes the heading unusable; agreement means the gate keeps the iron out.
    func compareWithCorrected(_ o: FusionOutput, field: Vector3?) {
        // A check that ended (the heading declared unusable, or a calibration stage spoke) compares no more.
        guard let found = calibrationFinding, let field, let check = calibrationCheck,
            let correction = check.latestCorrection
        else { return }
        let w = o.orientation.rotate(correction.apply(field))
        guard (w.x * w.x + w.y * w.y).squareRoot() > 1 else { return }
        let off = atan2(w.x, w.y)
        // About 10 s at 100 Hz: a strong field close to the sensor (a magnet at 2 cm) scatters the corrected
        // headings by 10 degrees from one reading to the next.
        let alpha = 0.001
        correctedDisagreement.sin += (sin(off) - correctedDisagreement.sin) * alpha
        correctedDisagreement.cos += (cos(off) - correctedDisagreement.cos) * alpha
        correctedDisagreement.count += 1
        let mean = atan2(correctedDisagreement.sin, correctedDisagreement.cos) * degreesPerRadian
        if correctedDisagreement.count >= 500 && abs(mean) > check.settings.maximumDisagreementDegrees {
            declareUnusable(found, at: o.timestamp, off: mean)
        }
    }

    var correctedDisagreement = (sin: 0.0, cos: 1.0, count: 0)
    var headingDeclaredUnusable = false

    func declareUnusable(_ found: CalibrationCheck.Finding, at time: Double, off: Double?) {
        headingDeclaredUnusable = true
        calibrationCheck = nil
        knownWrong += 1
        let o = found.fit.calibration.hardIronOffsetMicrotesla
        let how =
            off.map { "the heading is \(format(abs($0), 0)) degrees off the corrected readings" }
            ?? "its heading is off by up to \(format(found.headingShiftDegrees, 0)) degrees"
        log(
            "fusion: at \(format(time, 2)) s: the magnetometer's readings, which nothing calibrates, show "
                + "\(Self.describe(found)); \(how), so it is reported unusable (bound 180). Calibrate it: drop "
                + "--no-calibration (or add a calibration stage), or fusion-node calibrate; hard iron "
                + "\(format(o.x, 1)), \(format(o.y, 1)), \(format(o.z, 1)) uT")
        let notice = MagnetometerCalibrationNotice(
            calibrated: false, fieldStrengthMicrotesla: nil, headingShiftRadians: 0)
        if smoother != nil { smoother!.noteCalibration(notice) } else { filter.noteCalibration(notice) }
    }

    static func describe(_ f: CalibrationCheck.Finding) -> String {
        let o = f.fit.calibration.hardIronOffsetMicrotesla
        let iron = f.fit.calibration.softIronCorrection == .identity ? "hard iron" : "hard and soft iron"
        return "\(format(o.norm, 1)) uT of \(iron) (a \(f.fit.model.rawValue) fit, rms "
            + "\(format(f.fit.rmsResidualMicrotesla, 2)) uT)"
    }

    func fuse(_ pair: (imu: ImuSample, magnetometer: MagnetometerSample?)?, into output: inout [WireFrame]) throws {
        guard let pair else { return }
        check(pair)
        var header =
            head < pendingHeaders.count
            ? pendingHeaders[head] : RosHeader(stamp: RosTime(seconds: pair.imu.timestamp), frameId: "imu_link")
        head += 1
        if head > 1024 {
            pendingHeaders.removeFirst(head)
            head = 0
        }
        if !settings.frameId.isEmpty { header.frameId = settings.frameId }
        if referenceSite == nil, position != nil { takeReference(at: header.stamp.seconds) }
        let north = trueNorth(at: header.stamp.seconds)
        if smoother != nil {
            smoother!.add(imu: pair.imu, magnetometer: pair.magnetometer)
            if frameIds.last != header.frameId { frameIds.append(header.frameId) }
            held.append(
                HeldSample(
                    stamp: header.stamp, frameIndex: Int32(frameIds.count - 1), declination: north.declination,
                    northFlags: north.flags))
            return
        }
        guard let o = filter.update(imu: pair.imu, magnetometer: pair.magnetometer) else { return }
        if calibrationFinding != nil { compareWithCorrected(o, field: pair.magnetometer?.fieldMicrotesla) }
        publish(o, header: header, imu: pair.imu, field: pair.magnetometer?.fieldMicrotesla, north: north, &output)
        if !others.isEmpty { tellOthers(header, into: &output) }
    }

    func publish(
        _ o: FusionOutput, header: RosHeader, imu: ImuSample, field: Vector3?,
        north: (declination: Double, flags: UInt16), _ output: inout [WireFrame]
    ) {
        var h = FusionMessages.heading(o, header: header, field: field)
        h.declination = north.declination
        h.trueHeading =
            h.magneticHeading.isFinite && north.declination.isFinite
            ? normalizedDegrees(h.magneticHeading + north.declination) : .nan
        h.flags |= north.flags
        output.append(cdrFrame(h, topic: PipelineTopics.heading))
        output.append(cdrFrame(FusionMessages.imu(o, header: header, sample: imu), topic: PipelineTopics.imuFused))
        lastHeader = header
        if field != nil {
            // The primary's own verdict: with several magnetometers the output's flags are the heading's.
            let primary = settings.smooth ? nil : filter.primaryMagnetometerFlags.map { o.flags.union($0) }
            tally.count(primary ?? o.flags, at: header.stamp.seconds)
            if let status = tally.status(header, gate: gate) {
                output.append(cdrFrame(status, topic: PipelineTopics.interferenceStatus))
            }
        }
    }

    /// The parts of a bound in one line: "+-7.4 (95 %): filter 1.0, disturbance seen 0.4, unknown 3.5 of
    /// 3.6 (1-sigma degrees; 47.5 rad turned, fit 5.2 x its noise)".
    static func describe(_ p: HeadingAccuracyParts) -> String {
        "+-\(format(p.boundDegrees, 1)) (95 %): filter \(format(p.filterSigmaDegrees, 1)), disturbance seen "
            + "\(format(p.disturbanceSeenDegrees, 1)), unknown \(format(p.disturbanceUnknownSigmaDegrees, 1)) of "
            + "\(format(p.disturbancePriorSigmaDegrees, 1)) (1-sigma degrees; \(format(p.turnedRadians, 1)) rad "
            + "turned, fit \(format(p.fitInconsistency, 1)) x its noise)"
    }

    func finish() throws -> [WireFrame] {
        var out: [WireFrame] = []
        try finish { out += $0 }
        return out
    }

    func finish(emit: ([WireFrame]) throws -> Void) throws {
        var out: [WireFrame] = []
        try fuse(aligner.finish(), into: &out)
        if smoother != nil {
            // The backward pass, then every sample's outputs in order, a batch at a time.
            let samples = held
            held = []
            finalGate = smoother!.filter.magneticGate
            try smoother!.finish { i, o, imu, magnetometer in
                let h = samples[i]
                let header = RosHeader(stamp: h.stamp, frameId: frameIds[Int(h.frameIndex)])
                publish(
                    o, header: header, imu: imu, field: magnetometer?.fieldMicrotesla,
                    north: (h.declination, h.northFlags), &out)
                if out.count >= Publisher.maximumBatchFrames {
                    try emit(out)
                    out.removeAll(keepingCapacity: true)
                }
            }
        }
        // The closing status, when there was a reading to judge (an IMU-only stream has none).
        if tally.assessed > 0, let status = tally.status(lastHeader, gate: gate, force: true) {
            out.append(cdrFrame(status, topic: PipelineTopics.interferenceStatus))
        }
        notes.append(tally.summary)
        if implausibleFixes > 0 {
            notes.append(
                "\(implausibleFixes) fix(es) with a position off the earth passed over (no declination from them)")
        }
        if let f = calibrationFinding {
            notes.append(
                "uncalibrated readings: from \(format(f.time, 2)) s the readings, which nothing calibrates, showed "
                    + "\(Self.describe(f)), turning their heading by \(format(f.headingShiftDegrees, 0)) degrees: "
                    + (headingDeclaredUnusable
                        ? "the heading followed them and is reported unusable from then on; calibrate the magnetometer"
                        : "the gate kept them out (the heading agreed with the corrected readings); calibrate the "
                            + "magnetometer all the same"))
        }
        let health = filter.magnetometerHealth
        if !health.isEmpty { notes.append("magnetometers: " + health.map(Self.describe).joined(separator: "; ")) }
        for name in otherNames {
            let o = others[name]!
            if o.passedOver > 0 {
                notes.append(
                    "\(o.passedOver) reading(s) of magnetometer \(name) not used: "
                        + (smoother != nil
                            ? "the smoother fuses one magnetometer" : "only the kalman filter fuses several"))
                losses += o.passedOver
            }
        }
        if let counts = filter.gnssCounts,
            counts.velocities + counts.coursesUsed + counts.headingsUsed + counts.unusable > 0
        {
            notes.append("gnss: " + counts.summary)
            losses += counts.unusable
        }
        if gnssPassedOver > 0 {
            notes.append(
                "\(gnssPassedOver) GNSS message(s) not used: "
                    + (smoother != nil ? "the smoother does not take GNSS" : "only the kalman filter takes GNSS"))
            losses += gnssPassedOver
        }
        notes.append(
            "heading accuracy at the end "
                + Self.describe(smoother?.headingAccuracyParts ?? filter.headingAccuracyParts))
        let k = smoother?.skipped ?? filter.skipped
        if k.total > 0 || k.stateResets > 0 || k.timelineRestarts > 0 {
            notes.append("filter skipped \(k.total) sample(s): \(k.reasons)")
        }
        if !k.holes.isEmpty {
            notes.append("holes of more than \(format(SampleValidator.holeSeconds, 0)) s in the streams: \(k.holes)")
        }
        // Samples the filter could not use (time not increasing, beyond what a sensor reports,
        // non-finite) change the output: the run says so in its exit code, not only in this note.
        losses += k.total
        try emit(out)
    }
}

/// What a smoothed sample's outputs need besides its estimate and the sample the smoother keeps (the
/// frame id is an index: it rarely changes, and a string per sample would double the memory a long
/// recording needs).
struct HeldSample {
    var stamp: RosTime
    var frameIndex: Int32
    var declination: Double
    var northFlags: UInt16
}

/// The two outputs of a fusion update: gyrocompass_msgs/Heading and sensor_msgs/Imu with orientation.
public enum FusionMessages {
    public static func heading(_ o: FusionOutput, header: RosHeader, field: Vector3?) -> HeadingMessage {
        HeadingMessage(
            header: header, magneticHeading: o.headingDegrees ?? .nan, trueHeading: .nan,
            headingAccuracy: o.headingAccuracyDegrees ?? .nan, declination: .nan, orientation: o.orientation,
            magneticField: field.map { $0 * 1e-6 } ?? Vector3(.nan, .nan, .nan),
            source: HeadingMessage.Source.fusion.rawValue, flags: o.flags.rawValue)
    }

    /// Orientation covariance: only the heading (about z) is estimated; x and y stay 0 (unknown).
    public static func imu(_ o: FusionOutput, header: RosHeader, sample: ImuSample) -> ImuMessage {
        var zCovariance = Covariance9.zero
        zCovariance.m8 = o.headingVarianceDegrees2.map { $0 * radiansPerDegree * radiansPerDegree } ?? 0
        return ImuMessage(
            header: header, orientation: o.orientation, orientationCovariance: zCovariance,
            angularVelocity: sample.angularVelocity - o.gyroBias, angularVelocityCovariance: .zero,
            linearAcceleration: sample.specificForce, linearAccelerationCovariance: .zero)
    }
}

/// How far a change of calibration can have turned a compass.
enum CalibrationShift {
    /// Whether a status says a calibration is applied (degraded: the accepted one still is, though new
    /// readings miss it).
    static func applied(_ m: CalibrationStatusMessage) -> Bool {
        m.state == OnlineCalibrator.State.calibrated.rawValue || m.state == OnlineCalibrator.State.degraded.rawValue
    }

    /// How far the calibrated field can have moved, microtesla: the offset change plus the soft-iron
    /// change (Frobenius) times the radius.
    static func moved(from a: CalibrationStatusMessage, to c: CalibrationStatusMessage) -> Double {
        let radius = c.fieldStrength.isFinite ? c.fieldStrength : TypicalEarthField.strengthMicrotesla
        let softIronChange = zip(a.softIron.array, c.softIron.array).reduce(0.0) { $0 + ($1.0 - $1.1) * ($1.0 - $1.1) }
        return (a.hardIron - c.hardIron).norm + softIronChange.squareRoot() * radius
    }

    /// The heading change, radians, of a new calibration `c` after `p` (nil when nothing changed): the
    /// field's movement over the horizontal field at `dipDegrees`, at most pi.
    static func radians(from p: CalibrationStatusMessage, to c: CalibrationStatusMessage, dipDegrees: Double) -> Double?
    {
        let sameStrength = p.fieldStrength == c.fieldStrength || (p.fieldStrength.isNaN && c.fieldStrength.isNaN)
        let distance = moved(from: p, to: c)
        if applied(p) == applied(c) && !(distance > 1e-9) && sameStrength { return nil }
        let radius = c.fieldStrength.isFinite ? c.fieldStrength : TypicalEarthField.strengthMicrotesla
        let horizontal = max(radius * cos(dipDegrees * radiansPerDegree), 1e-3)
        return distance.isFinite ? min(Double.pi, distance / horizontal) : .pi
    }
}

/// A magnetometer besides the primary, as the fusion stage follows it.
struct OtherMagnetometerState {
    /// The filter's index; nil when the filter fuses one magnetometer only.
    var index: Int?
    var tally: InterferenceTally
    /// Its health at the previous update, to tell what changed.
    var seen = MagnetometerHealth(name: "")
    /// Its latest calibration status.
    var calibration: CalibrationStatusMessage?
    /// Readings the filter could not take.
    var passedOver = 0
}
