import Bags
import CompassCore
import Foundation
import Pipeline
import WireFormat
import YAML

/// `fusion-node calibrate -o calibration.json` with a live source: the guided calibration
/// (`GuidedCalibration`). `fusion-node calibrate BAG -o calibration.json`: the hard- and soft-iron
/// calibration refitted from a whole recording, judged by the limits the online calibrator accepts a fit
/// by, and saved only when it passes; else the best fit the online calibrator accepts over the recording.
/// It says what the refit changes: the field's residual before and after, and how far the headings of a
/// replay with the file from the start lie from the online replay's.
enum CalibrateCommand {
    static let help = CommandHelp(
        path: "calibrate",
        summary: "Calibrate the magnetometer: guided, live (--config, --lines, --ros2), or refitted from a recording "
            + "(BAG); -o FILE.",
        positionals: "[BAG]",
        options: [
            OptionHelp(
                "-o", "FILE",
                "the calibration file to write (JSON, as the calibration stage's file; one that exists only with "
                    + "--overwrite)"
            ),
            OptionHelp("--overwrite", nil, "replace FILE when it exists"),
            OptionHelp("--mag-topic", "TOPIC", "bag topic with sensor_msgs/msg/MagneticField", default: "/imu/mag"),
            OptionHelp(
                "--imu-topic", "TOPIC", "bag topic with sensor_msgs/msg/Imu (for the comparison replays)",
                default: "/imu/data_raw"),
            OptionHelp(
                "--mag-rotation", "ROTATION",
                "the magnetometer's mounting: fit in body axes (as --mag-rotation of replay)"),
            OptionHelp("--salvage", nil, "read past damage in the bag"),
        ] + GuidedCalibration.options,
        details: """
            Live (no BAG): turn the device slowly through every direction while the screen shows the
            directions of the field covered so far (two discs, the device's top and bottom, that fill), a
            completion percentage, the sides of the device still to point along the field, then the fit: its
            rms residual against the --fit limit, the field strength against the World Magnetic Model's at
            --latitude/--longitude (within 15 %; otherwise 20 to 70 uT), hard and soft iron, and the mounting
            when the motion shows it. The file is written only when 90 % of the directions are covered and
            the fit passes; q or Ctrl-C quits without writing. --plain prints a progress line a second.
            From a recording (BAG): every magnetometer reading of the recording (at most 20,000, spread evenly)
            goes into an ellipsoid fit (hard and soft iron) and a sphere fit (hard iron only); the ellipsoid is
            kept only when it cuts the residual by more than a fifth, since fitted to noise it skews the
            heading. Readings far off the fitted surface (over 3 times the rms residual and 2 uT: a magnet
            passing, a steel desk) are left out and the fit repeated, twice at most. The fit is saved only
            within the online calibrator's limits: directions covered at least 60 % (80 % for soft iron), rms
            residual at most 2 uT, field radius 20 to 70 uT. A recording that does not turn the sensor through
            enough of the sphere for that is run through the online calibrator instead (its gyro-aided fit
            needs no coverage), and its best accepted fit, the lowest residual, is saved, as a pipeline's
            calibration file would keep it. Then both replays run, online calibration and the file from the
            start, and the heading difference between them is printed.
            Use the file: fusion-node replay BAG --calibration FILE, or `file:` of a calibration stage.
            Exit codes: 0 saved, 1 the fit failed its limits or the calibration was not completed (nothing
            written), 2 usage, 130 interrupted.
            """,
        examples: [
            "fusion-node calibrate --lines /dev/ttyUSB0 -o calibration.json --latitude 52.5 --longitude 13.4",
            "fusion-node calibrate --config Pipelines/robot.yaml -o calibration.json --plain",
            "fusion-node calibrate run.mcap -o calibration.json",
            "fusion-node replay run.mcap --calibration calibration.json --csv out.csv",
        ])

    static let maximumReadings = 20_000

    static func run(_ args: [String]) async throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(0...1)
        guard let output = a.string("-o") else {
            throw UsageError(
                message: "'fusion-node calibrate' needs -o FILE (the calibration to write)", command: help.path)
        }
        if let bag = a.positionals.first {
            try OutputPaths.refuseClashes(outputs: [("-o", output)], inputs: [("recording", bag)], command: help.path)
        }
        if FileManager.default.fileExists(atPath: output) && !a.has("--overwrite") {
            throw UsageError(
                message: "\(output) exists: give --overwrite to replace it, or choose another name", command: help.path)
        }
        guard let bag = a.positionals.first else { return try GuidedCalibration.run(a, output: output) }
        if let live = GuidedCalibration.options.first(where: { a.has($0.name) || a.string($0.name) != nil }) {
            throw UsageError(
                message: "\(live.name) is for a live calibration, not a recording (BAG)", command: help.path)
        }
        let magTopic = a.string("--mag-topic") ?? "/imu/mag"
        var rotation = MountingRotation.none
        if let text = a.string("--mag-rotation") {
            guard let parsed = MountingRotation.parse(text) else {
                throw UsageError(
                    message: "--mag-rotation \(text): not a rotation name or ROLL,PITCH,YAW in degrees"
                        + didYouMean(text, in: MountingRotation.names), command: help.path)
            }
            rotation = parsed
        }
        var options = BagReadOptions()
        options.salvage = a.has("--salvage")
        options.topics = [magTopic]
        var all: [Vector3] = [], stamps: [Double] = []
        try BagReader(path: bag).forEachMessage(options) { m in
            guard m.type == MagneticFieldMessage.typeName, let message = try? MagneticFieldMessage(cdrBytes: m.data),
                message.magneticField.isFinite
            else { return }
            all.append(rotation.apply(message.magneticField * 1e6))
            stamps.append(message.header.stamp.seconds)
        }
        guard all.count >= CalibrationFitter.minimumEllipsoidReadings else {
            writeStandardError(
                "fusion-node: \(bag): \(all.count) magnetometer readings on \(magTopic): too few to fit\n")
            return .failed
        }
        let stride = max(1, (all.count + maximumReadings - 1) / maximumReadings)
        let readings = Swift.stride(from: 0, to: all.count, by: stride).map { all[$0] }
        // Judged by the online calibrator's limits.
        let refit = RobustCalibrationFit.fit(readings, limits: RobustCalibrationFit.Limits(OnlineCalibrationSettings()))
        guard let fit = refit.fit else {
            let why = refit.refusal.map { "\($0)" } ?? "no fit"
            return try await learnedOnline(bag, a, readings: readings, output: output, wholeSetRefusal: why)
        }
        print(
            "readings:        \(all.count) on \(magTopic) (\(readings.count) fitted, \(refit.leftOut) left out as off "
                + "the surface)"
        )
        print("fit:             \(fit.model), coverage \(format(100 * fit.directionCoverage, 0)) %")
        printCalibration(fit.calibration, readings: readings)
        guard explainsBetter(fit.calibration, readings: readings) else { return .failed }
        try CalibrationFile.save(fit, to: output)
        print("saved:           \(output)")
        // What using it changes: the same recording replayed with online calibration and with the file.
        let online = try await orientations(bag, a, calibration: nil).map { $0.q.headingDegrees ?? .nan }
        try await printHeadingChange(bag, a, online: online, output: output)
        return .complete
    }

    /// The heading of the recording replayed with `output` from the start, against the online replay.
    static func printHeadingChange(_ bag: String, _ a: Arguments, online: [Double], output: String) async throws {
        let fixed = try await orientations(bag, a, calibration: output).map { $0.q.headingDegrees ?? .nan }
        let differences = zip(online, fixed).map { signedDegrees($0 - $1) }.filter(\.isFinite)
        guard !differences.isEmpty else { return }
        let rms = (differences.map { $0 * $0 }.reduce(0, +) / Double(differences.count)).squareRoot()
        let secondHalf = differences.suffix(differences.count / 2)
        let rmsLate = (secondHalf.map { $0 * $0 }.reduce(0, +) / Double(max(1, secondHalf.count))).squareRoot()
        print(
            "heading change:  rms \(format(rms, 2)) deg against the online replay (\(format(rmsLate, 2)) deg "
                + "over the second half, once the online calibration has settled)")
    }

    /// When the readings alone do not fit (a recording that turns the sensor through too little of the
    /// sphere, or with stretches of disturbance), the calibration the online calibrator would have kept
    /// from this recording: the whole recording through the calibration stage, with the gyro carrying
    /// the orientation for its gyro-aided fits, saving its best accepted fit (the lowest residual) as a
    /// pipeline's calibration file would. Refused only when it accepted none either.
    static func learnedOnline(
        _ bag: String, _ a: Arguments, readings: [Vector3], output: String, wholeSetRefusal: String
    ) async throws -> ExitCode {
        print(
            "whole-set fit:   refused: \(wholeSetRefusal)\nlearning:        the recording through the online calibrator"
        )
        let learned = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gyrocompass-calibrate-\(getpid())-learned.json"
        ).path
        defer {
            try? FileManager.default.removeItem(atPath: learned)
        }
        let run = try await replayed(bag, a, calibration: learned, learning: true)
        let online = run.orientations.map { $0.q.headingDegrees ?? .nan }
        guard case .success(let contents) = CalibrationFile.load(learned) else {
            let why = run.noFitReason.map { ": \($0)" }
            writeStandardError(
                "fusion-node: no calibration written: the whole-set fit was refused (\(wholeSetRefusal)), and the "
                    + "online calibrator accepted no fit over the recording either\(why ?? "")\n")
            return .failed
        }
        print("fit:             the online calibrator's best over the recording (gyro-aided or sphere/ellipsoid)")
        printCalibration(contents.calibration, readings: readings)
        guard explainsBetter(contents.calibration, readings: readings) else { return .failed }
        let text = try String(contentsOfFile: learned, encoding: .utf8)
        try text.write(toFile: output, atomically: true, encoding: .utf8)
        print("saved:           \(output)")
        try await printHeadingChange(bag, a, online: online, output: output)
        return .complete
    }

    /// The calibration's hard iron, soft iron and field, and the readings' residual before and after it.
    static func printCalibration(_ c: MagnetometerCalibration, readings: [Vector3]) {
        let before = radialResidual(
            readings, MagnetometerCalibration(hardIronOffsetMicrotesla: .zero, fieldRadiusMicrotesla: 0))
        let after = radialResidual(readings, c)
        let s = c.softIronCorrection
        let rows = [s.row0, s.row1, s.row2].map { "\(format($0.x, 4)) \(format($0.y, 4)) \(format($0.z, 4))" }
        print(
            "hard iron:       \(format(c.hardIronOffsetMicrotesla.x, 2)), \(format(c.hardIronOffsetMicrotesla.y, 2)), "
                + "\(format(c.hardIronOffsetMicrotesla.z, 2)) uT")
        print("soft iron:       \(rows.joined(separator: " / "))")
        print("field:           \(format(c.fieldRadiusMicrotesla, 2)) uT")
        print(
            "field residual:  rms \(format(before, 2)) uT raw -> \(format(after, 2)) uT calibrated (about the fitted "
                + "strength)"
        )
    }

    /// True when the calibration explains the readings clearly better than none does (RMS of the
    /// strength about its own median, the online calibrator's `requiredResidualRatio` of the raw
    /// readings' or less, relative to the strength); else says why nothing is written. A calibration
    /// no better than none would only move the heading by its own error.
    static func explainsBetter(_ c: MagnetometerCalibration, readings: [Vector3]) -> Bool {
        func relative(_ cal: MagnetometerCalibration) -> Double {
            let strengths = readings.map { cal.apply($0).norm }.sorted()
            let median = strengths[strengths.count / 2]
            let squares = strengths.reduce(0.0) { $0 + ($1 - median) * ($1 - median) }
            return (squares / Double(strengths.count)).squareRoot() / median
        }
        let raw = relative(MagnetometerCalibration(hardIronOffsetMicrotesla: .zero, fieldRadiusMicrotesla: 0))
        let fitted = relative(c)
        let ratio = OnlineCalibrationSettings().requiredResidualRatio
        guard fitted.isFinite, !(fitted > ratio * raw) else {
            writeStandardError(
                "fusion-node: no calibration written: the readings as they come explain the field "
                    + (fitted > raw ? "better than" : "as well as") + " the fit (strength spread "
                    + "\(format(100 * raw, 2)) % raw, \(format(100 * fitted, 2)) % fitted; a fit must reach "
                    + "\(format(100 * ratio, 0)) % of the raw spread): the magnetometer is calibrated already, as far "
                    + "as this recording shows. Replay it without a calibration file\n")
            return false
        }
        return true
    }

    /// RMS of |calibrated field| - the fit's radius (the raw field: its spread about its own mean strength).
    static func radialResidual(_ readings: [Vector3], _ c: MagnetometerCalibration) -> Double {
        let strengths = readings.map { c.apply($0).norm }
        let centre =
            c.fieldRadiusMicrotesla > 0 ? c.fieldRadiusMicrotesla : strengths.reduce(0, +) / Double(strengths.count)
        return (strengths.map { ($0 - centre) * ($0 - centre) }.reduce(0, +) / Double(strengths.count)).squareRoot()
    }

    /// The fused orientation, one per sample, of the recording through the default graph (online
    /// calibration) or with the calibration file from the start; `learning`: online from scratch, saving
    /// the best fit into `file`.
    static func orientations(_ bag: String, _ a: Arguments, calibration file: String?, learning: Bool = false)
        async throws -> [(t: Double, q: Quaternion)]
    {
        try await replayed(bag, a, calibration: file, learning: learning).orientations
    }

    /// `orientations`, with the reason the calibration stage gave at the end for accepting no fit.
    static func replayed(_ bag: String, _ a: Arguments, calibration file: String?, learning: Bool = false)
        async throws -> (orientations: [(t: Double, q: Quaternion)], noFitReason: String?)
    {
        let csv = FileManager.default.temporaryDirectory.appendingPathComponent(
            "gyrocompass-calibrate-\(getpid())-\(file == nil ? "online" : "file").csv"
        ).path
        defer { try? FileManager.default.removeItem(atPath: csv) }
        var bagStage: [(String, YAMLValue)] = [
            ("type", .string("bag")), ("path", .string(bag)), ("progress", .string("false")),
        ]
        if let t = a.string("--imu-topic") { bagStage.append(("imu_topic", .string(t))) }
        if let t = a.string("--mag-topic") { bagStage.append(("mag_topic", .string(t))) }
        if a.has("--salvage") { bagStage.append(("salvage", .string("true"))) }
        var stages: [(String, YAMLValue)] = [("bag", .mapping(bagStage))]
        stages += ProcessingGraph.stages(
            after: "bag", calibrate: true, a, calibrationFile: file, learnIntoFile: learning)
        stages.append(
            (
                "csv",
                .mapping([("type", .string("csv")), ("inputs", .sequence([.string("fusion")])), ("path", .string(csv))])
            ))
        let text = try YAMLEmitter.emit(.mapping([("name", .string("calibrate")), ("stages", .mapping(stages))]))
        let config = try PipelineConfig.parse(text, file: "<calibrate command line>", environment: [:])
        let reports = try await PipelineRunner.runAll(config, log: { _ in })
        let noFitReason = reports.first { $0.stage == "calibration" }?.noCalibrationFitReason
        guard let rows = YAMLParser.readFile(csv, maximumBytes: Int.max - 1) else { return ([], noFitReason) }
        let orientations = rows.split(separator: "\n").dropFirst().compactMap { line -> (t: Double, q: Quaternion)? in
            let v = line.split(separator: ",").compactMap { Double($0) }
            guard v.count == 5 else { return nil }
            return (v[0], Quaternion(w: v[1], x: v[2], y: v[3], z: v[4]))
        }
        return (orientations, noFitReason)
    }

}

/// Why a whole-set fit was refused, in words (`calibrate BAG` and the guided calibration).
extension RobustCalibrationFit.Refusal: CustomStringConvertible {
    public var description: String {
        switch self {
        case .noFit(let error): error.map { "the sphere fit failed: \($0)" } ?? "no fit"
        case .coverage(let coverage, let required):
            "the readings cover \(format(100 * coverage, 0)) % of the directions; \(format(100 * required, 0)) % "
                + "is needed (turn the device through all of them)"
        case .residual(let rms, let limit):
            "rms residual \(format(rms, 2)) uT exceeds \(format(limit, 1)) uT: the field was disturbed for much of "
                + "the time"
        case .radius(let radius, let plausible):
            "the fitted field, \(format(radius, 1)) uT, is outside \(format(plausible.lowerBound, 0)) to "
                + "\(format(plausible.upperBound, 0)) uT"
        }
    }
}
