#if canImport(Glibc)
    import Glibc
#endif
import CNcurses
import CompassCore
import Foundation
import Pipeline
import YAML

/// `fusion-node calibrate -o FILE` on a live source: the person turns the device while a full-screen
/// guide (or `--plain` lines) shows which directions of the field are covered, what is missing, and
/// the fit; the file is written only when the fit passes the stated limits (`CalibrationGuide`).
enum GuidedCalibration {
    static let options = [
        OptionHelp("--config", "FILE", "live: take the samples from this pipeline file's source stage"),
        OptionHelp("--source", "NAME", "live: which source stage of --config (when it has several)"),
        OptionHelp("--lines", "DEVICE", "live: text lines from a serial device or '-' (the lines source)"),
        OptionHelp("--ros2", nil, "live: imu/data_raw and imu/mag over DDS (ros2_source with its defaults)"),
        OptionHelp(
            "--fit", "LEVEL",
            "live: strict, normal or relaxed: the largest rms residual saved, 0.8, 1.6 or 3.2 uT", default: "normal"),
        OptionHelp(
            "--latitude", "DEG", "live: the site, for the expected field strength (World Magnetic Model)"),
        OptionHelp("--longitude", "DEG", "live: with --latitude"),
        OptionHelp("--timeout", "SECONDS", "live: give up after this long (exit 1, nothing written)", default: "none"),
        OptionHelp("--plain", nil, "live: progress lines instead of the full-screen guide"),
    ]

    static func run(_ a: Arguments, output: String) throws -> ExitCode {
        let (config, source) = try sourceConfig(a)
        let settings = try guideSettings(a)
        let timeout = try a.double("--timeout", minimum: 1, maximum: 86_400)
        var guide = CalibrationGuide(settings: settings)
        var detector = MountingRotationDetector()
        var lastImuTime: Double?
        let plain = a.has("--plain")
        let screen = plain ? nil : CalibrationScreen()
        let stop = StopToken().handleSignals()
        screen?.start()
        let started = Clocks.monotonicSeconds()
        var lastShown = -Double.infinity
        var quit = false
        var samples = 0
        let log: @Sendable (String) -> Void = { line in if plain { print(line) } }
        let undecodable = try SourceTap.run(config, source: source, stop: stop, log: log) { sample in
            switch sample {
            case .imu(let time, let rate, _):
                if let last = lastImuTime, time > last { detector.addMotion(rate: rate, dt: time - last) }
                lastImuTime = time
            case .magnetometer(let time, let field):
                samples += 1
                detector.addReading(field, time: time)
                _ = guide.add(field, time: time)
            }
            let now = Clocks.monotonicSeconds()
            if let key = screen?.key(), key == Int32(UInt8(ascii: "q")) {
                quit = true
                return false
            }
            if now - lastShown >= (plain ? 1 : 0.1) || guide.isComplete {
                lastShown = now
                let view = View(guide: guide, detector: detector, samples: samples)
                if let screen { screen.draw(view) } else { print(view.plainLine) }
                fflush(nil)
            }
            if let timeout, now - started > timeout { return false }
            return !guide.isComplete
        }
        // The last screen stays up a moment so it can be read (and captured).
        if screen != nil, guide.isComplete { usleep(1_500_000) }
        screen?.stop()
        if undecodable > 0 { writeStandardError("fusion-node: \(undecodable) undecodable message(s) skipped\n") }
        let view = View(guide: guide, detector: detector, samples: samples)
        guard let fit = guide.accepted else {
            let why =
                quit
                ? "quit before the calibration was complete"
                : stop.requested
                    ? "interrupted"
                    : timeout.map { "not complete after \(format($0, 0)) s" } ?? "the source ended first"
            for line in view.summary { print(line) }
            writeStandardError("fusion-node: no calibration written: \(why)\n")
            return stop.requested ? .interrupted : .failed
        }
        // A mounting found is saved with the file, and a file with a mounting holds the calibration of the
        // turned readings (the calibration stage turns them first): the fit is turned likewise.
        var saved = fit
        if let mounting = detector.detected?.rotation {
            saved.calibration = fit.calibration.turned(by: mounting.matrix)
        }
        try CalibrationFile.save(
            saved, rotation: detector.detected?.rotation, rotationFound: detector.detected?.description, to: output)
        for line in view.summary { print(line) }
        print("saved:           \(output)")
        return .complete
    }

    /// The guide's settings from the command line: the fit level, and the expected field strength at
    /// the site when `--latitude` and `--longitude` give it (the World Magnetic Model's, this year).
    static func guideSettings(_ a: Arguments) throws -> CalibrationGuideSettings {
        var settings = CalibrationGuideSettings()
        if let level = a.string("--fit") {
            guard let parsed = CalibrationFitLevel(rawValue: level) else {
                throw UsageError(
                    message:
                        "--fit \(level): not a fit level"
                        + didYouMean(level, in: CalibrationFitLevel.allCases.map(\.rawValue)),
                    command: CalibrateCommand.help.path)
            }
            settings.fitLevel = parsed
        }
        let latitude = try a.double("--latitude", minimum: -90, maximum: 90)
        let longitude = try a.double("--longitude", minimum: -180, maximum: 180)
        if (latitude == nil) != (longitude == nil) {
            throw UsageError(message: "--latitude and --longitude go together", command: CalibrateCommand.help.path)
        }
        if let latitude, let longitude {
            let year = decimalYear(unixSeconds: Date().timeIntervalSince1970) ?? .nan
            switch Result(catching: {
                try WorldMagneticModel.wmm2025.elements(
                    latitudeDegrees: latitude, longitudeDegrees: longitude, heightKilometres: 0, decimalYear: year)
            }) {
            case .success(let e): settings.expectedStrengthMicrotesla = e.totalNanotesla / 1000
            case .failure(let error):
                // Said, not skipped: the strength is then only checked against 20 to 70 uT.
                writeStandardError(
                    "fusion-node: no expected field strength at the site (\(error)): 20 to 70 uT accepted\n")
            }
        }
        return settings
    }

    /// The pipeline to tap and the name of its source stage.
    static func sourceConfig(_ a: Arguments) throws -> (PipelineConfig, String) {
        let path = CalibrateCommand.help.path
        let chosen = ["--config", "--lines", "--ros2"].filter { a.has($0) || a.string($0) != nil }
        guard chosen.count == 1 else {
            throw UsageError(
                message: chosen.isEmpty
                    ? "calibrate needs a recording (BAG) or a live source: --config FILE, --lines DEVICE or --ros2"
                    : "\(chosen.joined(separator: " and ")) contradict each other: one source", command: path)
        }
        if let file = a.string("--config") {
            let config = try PipelineConfig.load(
                path: file, environment: ProcessInfo.processInfo.environment, requireSink: false)
            warnOfFormerNames(config)
            let sources = SourceTap.sourceNames(config)
            if let name = a.string("--source") {
                guard sources.contains(name) else {
                    throw UsageError(
                        message: "--source \(name): \(file) has no source stage of that name (sources: "
                            + "\(sources.joined(separator: ", ")))\(didYouMean(name, in: sources))", command: path)
                }
                return (config, name)
            }
            guard sources.count == 1 else {
                throw UsageError(
                    message: "\(file) has \(sources.count) source stages (\(sources.joined(separator: ", "))): "
                        + "name one with --source", command: path)
            }
            return (config, sources[0])
        }
        let stage: YAMLValue =
            if let device = a.string("--lines") {
                .mapping([("type", .string("lines")), ("device", .string(device))])
            } else {
                .mapping([("type", .string("ros2_source"))])
            }
        let text = try YAMLEmitter.emit(
            .mapping([("name", .string("calibrate")), ("stages", .mapping([("sensor", stage)]))]))
        return (try PipelineConfig.parse(text, file: "<calibrate command line>", environment: [:]), "sensor")
    }

    /// What the guide shows, in words; the same for the screen and the plain lines.
    struct View {
        let guide: CalibrationGuide
        let detector: MountingRotationDetector
        let samples: Int

        /// "59 %" while collecting; "complete" once the fit passed (the directions then say how many
        /// were covered: the fit needs `neededCount`, not all 32).
        var progress: String { guide.isComplete ? "complete" : "\(format(guide.progressPercent, 0)) %" }
        var directions: String {
            "\(guide.coveredCount) of \(guide.directionCounts.count) directions covered, \(guide.neededCount) needed"
        }

        var missing: String {
            let axes = guide.missingAxes
            guard !axes.isEmpty else { return "every direction covered" }
            return "still to point along the field (north, tilted down): the device's "
                + axes.prefix(3).joined(separator: ", ") + (axes.count > 3 ? " ..." : "") + " side"
                + (axes.count > 1 ? "s" : "")
        }

        var fitLines: [String] {
            guard let outcome = guide.latest, let fit = outcome.candidate else {
                return ["fit: after \(format(100 * guide.settings.requiredCoverage, 0)) % of the directions"]
            }
            let c = fit.calibration
            let h = c.hardIronOffsetMicrotesla
            let s = c.softIronCorrection
            var lines = [
                "fit: \(fit.model), rms residual \(format(fit.rmsResidualMicrotesla, 2)) uT (limit "
                    + "\(format(guide.settings.fitLevel.maximumResidualMicrotesla, 1)))",
                "field: \(format(c.fieldRadiusMicrotesla, 1)) uT"
                    + (guide.settings.expectedStrengthMicrotesla.map { ", expected \(format($0, 1)) uT (WMM)" } ?? ""),
                "hard iron: \(format(h.x, 2)), \(format(h.y, 2)), \(format(h.z, 2)) uT",
                "soft iron: "
                    + [s.row0, s.row1, s.row2].map { "\(format($0.x, 3)) \(format($0.y, 3)) \(format($0.z, 3))" }
                    .joined(separator: " / "),
            ]
            if let refusal = outcome.refusal { lines.append("not yet: \(refusal)") }
            return lines
        }

        var mounting: String {
            detector.detected.map { "mounting: \($0)" } ?? "mounting: not determined yet (needs turning)"
        }

        var state: String {
            guide.isComplete ? "COMPLETE: the fit passed" : "turn the device slowly through every direction"
        }

        var plainLine: String {
            "calibrate: \(progress) (\(directions), \(samples) readings)\(guide.isComplete ? "" : "; " + missing)"
                + (guide.latest.map { _ in "; " + fitLines[0] } ?? "")
        }

        var summary: [String] {
            [
                "directions:      \(progress), \(directions), from \(samples) readings"
            ]
                + fitLines.map { "                 " + $0 } + ["                 " + mounting]
        }
    }
}

/// The full-screen guide: the covered directions as two discs (the field seen from the device's top
/// and from its bottom) that fill while the device turns, with the numbers beside them.
final class CalibrationScreen {
    /// The terminal handling the live compass uses (ncurses set-up, keys, clipped text).
    private let terminal = TerminalCompass()

    func start() {
        terminal.start()
        wtimeout(gc_screen(), 0)  // keys are polled between samples: never wait
    }

    func stop() { terminal.stop() }
    func key() -> Int32? { terminal.key() }
    private func put(_ y: Int32, _ x: Int32, _ text: String) { terminal.put(y, x, text) }

    /// One disc of radius `r` rows centred at (cy, cx): each cell shows whether the test direction
    /// nearest to it is covered ('#') or not ('.'); `up` picks the hemisphere (+z or -z).
    private func disc(_ guide: CalibrationGuide, cy: Int32, cx: Int32, r: Int32, up: Bool) {
        let covered = guide.covered
        for dy in -r...r {
            for dx in -2 * r...2 * r {
                let x = Double(dx) / Double(2 * r), y = -Double(dy) / Double(r)
                let rr = x * x + y * y
                guard rr <= 1 else { continue }
                let d = Vector3(x, y, (up ? 1 : -1) * (1 - rr).squareRoot())
                put(cy + dy, cx + dx, covered[CalibrationFitter.nearestDirection(to: d)] ? "#" : ".")
            }
        }
    }

    func draw(_ v: GuidedCalibration.View) {
        werase(gc_screen())
        let rows = getmaxy(gc_screen()), cols = getmaxx(gc_screen())
        put(0, 0, "GyroCompass calibration   \(v.progress)   (q quits without saving)")
        // Two discs side by side when there is room: 2r+1 rows, 4r+1 columns each.
        let r = max(2, min((rows - 8) / 2, (cols - 8) / 10))
        let top: Int32 = 2
        if rows >= 12 && cols >= 40 {
            disc(v.guide, cy: top + 1 + r, cx: 2 * r + 1, r: r, up: true)
            disc(v.guide, cy: top + 1 + r, cx: 6 * r + 5, r: r, up: false)
            put(top, 0, "field along +z (top)")
            put(top, 4 * r + 4, "along -z (bottom)")
            put(top + 2 * r + 2, 0, "+x to the right, +y up in both")
        }
        var y = rows >= 12 && cols >= 40 ? top + 2 * r + 4 : top
        for line in [v.state, v.missing] + v.fitLines + [v.mounting] {
            for part in TerminalCompass.wrap(line, width: Int(max(10, cols - 1))) where y < rows {
                put(y, 0, part)
                y += 1
            }
        }
        wrefresh(gc_screen())
    }
}
