import CompassCore
import MessageBus
import WireFormat
import YAML

/// One estimate of `FusionEngine`: what the fusion stage publishes on `heading` and `imu/data` for an
/// IMU sample, as numbers.
public struct FusionEstimate: Sendable, Equatable {
    /// Time of the IMU sample, seconds.
    public var timestampSeconds: Double
    /// Sensor frame relative to ENU with y = magnetic north (the reference offset applied).
    public var orientation: Quaternion
    /// Degrees clockwise from magnetic north, [0, 360); NaN when the x axis is vertical.
    public var magneticHeadingDegrees: Double
    /// Degrees clockwise from true north; NaN without a site (`latitude`, `longitude`).
    public var trueHeadingDegrees: Double
    /// 95 % bound of the heading error, degrees; NaN when not valid.
    public var headingAccuracyDegrees: Double
    /// Declination used, degrees east; NaN without a site.
    public var declinationDegrees: Double
    /// `FusionFlags` raw value with the heading message's true-north bits (10-12) set as it sets them.
    public var flags: UInt32
    /// The filter's gyro bias estimate, rad/s, sensor axes.
    public var gyroBiasRadiansPerSecond: Vector3
}

/// A setting the engine refuses, or a sample it cannot take: the message names the setting (with its
/// line and column in the settings text) or the sample.
public struct FusionEngineError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// The fusion stage as a library filter: the same settings (names, units, ranges, defaults: the stage's
/// one declaration) and the same per-sample code as `fusion-node replay`'s fusion stage, without the
/// bus. Feed samples in time order; each IMU sample gives at most one estimate at once (the
/// smoother's come from `finish()`). Not thread-safe: one engine per thread, or a lock around it.
public final class FusionEngine {
    let stage: FusionStage
    var aligner = SampleAligner()
    /// The estimate of the sample being fused; with `collecting`, every estimate (the smoother's).
    var latest: FusionEstimate?
    var collected: [FusionEstimate]?
    var lastImuTime = -Double.infinity
    /// Applied to every magnetometer reading (`useCalibration(file:)`).
    var calibration: MagnetometerCalibration?
    /// The calibration stage learning online (`learnCalibration()`), and its status messages, which the
    /// fusion stage reads once the next IMU sample is fused.
    var calibrator: CalibrationStage?
    var statusFrames: [WireFrame] = []
    static let frameId = "imu_link"

    /// The settings the engine takes: the fusion stage's, as `fusion-node stages fusion` lists them.
    public static var settingSpecs: [SettingSpec] { FusionStage.type.settings }

    /// `settingsYAML`: a YAML mapping of fusion-stage settings, as under a fusion stage in a pipeline
    /// file ("" = every default).
    public init(settingsYAML: String) throws(FusionEngineError) {
        let settings = try Self.stageSettings(FusionStage.type, stage: "fusion", yaml: settingsYAML, named: "settings")
        if let problem = FusionStage.type.check(settings) {
            throw FusionEngineError(message: "settings: '\(problem.setting)': \(problem.message)")
        }
        stage = FusionStage(FusionStage.Settings.table.read(settings))
        stage.estimateSink = { [unowned self] heading, output in
            // The filter's flags (reasons beyond the message's 16 bits included) with the true-north bits.
            let estimate = FusionEstimate(
                timestampSeconds: output.timestamp, orientation: heading.orientation,
                magneticHeadingDegrees: heading.magneticHeading, trueHeadingDegrees: heading.trueHeading,
                headingAccuracyDegrees: heading.headingAccuracy, declinationDegrees: heading.declination,
                flags: output.flags.rawValue | UInt32(heading.flags & HeadingMessage.northFlags),
                gyroBiasRadiansPerSecond: output.gyroBias)
            if self.collected != nil { self.collected!.append(estimate) } else { self.latest = estimate }
        }
    }

    /// A magnetometer reading, microtesla, sensor axes: paired with the first IMU sample at or after
    /// its time (as the fusion stage pairs a bag's messages), if that comes within 0.1 s.
    public func magnetometer(timestampSeconds t: Double, fieldMicrotesla: Vector3) throws(FusionEngineError) {
        guard t.isFinite, fieldMicrotesla.isFinite else {
            throw FusionEngineError(message: "magnetometer sample at t = \(t): not finite")
        }
        let stamp = RosTime(seconds: t)
        // Through tesla and back, as the calibration stage hands the fusion stage a calibrated reading: the
        // same rounding, so the estimates are those of a replay with the same file, bit for bit.
        var field = calibration.map { ($0.apply(fieldMicrotesla) * 1e-6) * 1e6 } ?? fieldMicrotesla
        if let calibrator {
            field = learn(fieldMicrotesla, header: RosHeader(stamp: stamp, frameId: Self.frameId), with: calibrator)
        }
        _ = aligner.magnetometer(MagnetometerSample(timestamp: stamp.seconds, fieldMicrotesla: field))
    }

    /// An IMU sample (rad/s, m/s^2 specific force, sensor axes), with the magnetometer reading taken at
    /// the same time if there is one. Returns its estimate, or nil when the filter skipped the sample
    /// (a gap, a repeated time; counted in the summary) or holds it (the smoother).
    public func imu(
        timestampSeconds t: Double, angularVelocity: Vector3, specificForce: Vector3, fieldMicrotesla: Vector3? = nil
    ) throws(FusionEngineError) -> FusionEstimate? {
        guard t.isFinite, angularVelocity.isFinite, specificForce.isFinite else {
            throw FusionEngineError(message: "IMU sample at t = \(t): not finite")
        }
        guard t > lastImuTime else {
            throw FusionEngineError(message: "IMU sample at t = \(t): time not after the previous one (\(lastImuTime))")
        }
        let header = RosHeader(stamp: RosTime(seconds: t), frameId: Self.frameId)
        // The calibration stage sees the IMU sample before the reading that comes with it, and the fusion
        // stage reads its status after fusing them (the order of a replay).
        if let calibrator, calibrator.learning {
            calibrator.observeMotion(header, angularVelocity, specificForce)
        }
        defer { deliverStatus() }
        if let field = fieldMicrotesla { try magnetometer(timestampSeconds: t, fieldMicrotesla: field) }
        lastImuTime = t
        let sample = ImuSample(
            timestamp: header.stamp.seconds, angularVelocity: angularVelocity, specificForce: specificForce)
        latest = nil
        do { try stage.fuse(header, paired: aligner.pairNow(sample)) } catch {
            throw FusionEngineError(message: "IMU sample at t = \(t): \(error)")
        }
        return latest
    }

    /// The end of the stream: the smoother's estimates (every sample's, in order); nothing for a filter.
    public func finish() -> [FusionEstimate] {
        collected = []
        defer { collected = nil }
        _ = try? stage.finish()
        return collected ?? []
    }

    /// What the fusion stage's summary says: samples fused and skipped, the gate's counts, the
    /// calibration check's finding.
    public var summary: [String] {
        let learned = calibrator.map { c in
            ["calibration: \(c.online?.state ?? .uncalibrated), \(c.refitsAccepted) fit(s) accepted"]
        }
        return (learned ?? []) + stage.summaryNotes().lines
    }
}

extension FusionEngine {
    /// Every setting, one per line: name, kind, unit, range ("" = none; choices for a string), default
    /// and help, tab-separated: the fusion stage's declaration, as `fusion-node stages fusion` prints it.
    public static var settingsReference: String {
        settingSpecs.map { spec in
            let range =
                spec.range.map { "\(format($0.lowerBound))...\(format($0.upperBound))" }
                ?? spec.choices.joined(separator: "|")
            return [spec.name, spec.kind.referenceName, spec.unit, range, spec.defaultValue ?? "", spec.help]
                .joined(separator: "\t")
        }.joined(separator: "\n")
    }

    static func format(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : "\(v)"
    }
}

extension FusionEngine {
    /// A YAML mapping the library is given as text (settings, options), named `what` in its errors: its
    /// entries and where it starts. An empty text is an empty mapping.
    static func mapping(_ text: String, named what: String) throws(FusionEngineError) -> (
        entries: [(key: YAMLNode, value: YAMLNode)], mark: YAMLMark
    ) {
        let node: YAMLNode?
        do { node = try YAMLParser.parse(text, file: what) } catch {
            throw FusionEngineError(message: "\(what), \(error.mark): \(error.message)")
        }
        guard let node, !node.isNull else { return ([], YAMLMark(line: 1, column: 1)) }
        guard let entries = node.mapping else {
            throw FusionEngineError(message: "\(what): expected a mapping of name: value, found \(node.kind)")
        }
        return (entries, node.mark)
    }

    /// A stage's settings from YAML text, checked as a pipeline file's stage is.
    static func stageSettings(_ type: StageType, stage: String, yaml: String, named what: String)
        throws(FusionEngineError) -> StageSettings
    {
        let (entries, mark) = try mapping(yaml, named: what)
        do {
            return try StageSettings(
                type: type, stage: stage, at: mark, nodes: entries, file: what, environment: [:])
        } catch {
            throw FusionEngineError(message: "\(what), \(error.mark): \(error.message)")
        }
    }
}
