import BuildInfo
import Foundation
import CompassCore
import WireFormat

/// The HTML of a `ReportSink`: the summary table and the plots, all inline. Every plot has a legend
/// naming its series, round ticks, and draws inside its axes; headings wrap at 0/360 without
/// vertical strokes; scatter plots of the field use equal scales.
struct ReportPage {
    let sink: ReportSink
    let relative: [Double]
    let span: Double
    typealias Scored = (
        total: Double, heading: Double, inclination: Double, coverage: Double, boundCoverage: Double,
        errorTimes: [Double], headingErrors: [Double], signedHeadingErrors: [Double], inclinationErrors: [Double]
    )

    /// The comparison with the reference, when there is one.
    static func score(_ sink: ReportSink) -> Scored? {
        guard let r = sink.reference else { return nil }
        let boundTimes = sink.t.map { $0 - 1_700_000_000 }
        return r.errors(
            estimateTimes: sink.fusedT, estimates: sink.fused, boundTimes: boundTimes, bounds: sink.accuracy)
    }

    /// Every flag the filter can raise, as the flags chart draws it: bit, label, colour, element id.
    static let flagRows: [(UInt32, String, String, String)] = FusionFlags.names.map { flag, name in
        let label = flagLabels[name] ?? name.replacingOccurrences(of: "_", with: " ")
        return (flag.rawValue, label, flagColors[name] ?? "#888", "flag-" + name)
    }
    static let flagLabels = [
        "magnetometer_rejected": "disturbance (magnetometer rejected)",
        "magnetic_reference_changed": "new field reference", "compass_gnss_disagree": "compass disagrees with GNSS",
    ].merging(MagnetometerVerdictReason.allCases.map { (name(of: $0.flag), $0.label) }) { a, _ in a }
    static let flagColors = [
        "initialising": "#999", "at_rest": "#4a9", "acceleration_rejected": "#e80", "magnetometer_rejected": "#d33",
        "gyro_only": "#a3c", "magnetic_reference_changed": "#37a", "filter_reset": "#000",
        "magnetometer_uncalibrated": "#777", "gnss_aided": "#2a9d3a", "compass_gnss_disagree": "#c0c",
    ].merging(MagnetometerVerdictReason.allCases.map { (name(of: $0.flag), Self.reasonColor) }) { a, _ in a }
    /// Every reason a reading was refused is drawn in the same colour, a lighter red than the refusal.
    static let reasonColor = "#e77"

    /// A flag's name, as `FusionFlags.names` spells it.
    static func name(of flag: FusionFlags) -> String {
        FusionFlags.names.first { $0.0 == flag }?.1 ?? "\(flag.rawValue)"
    }
    /// The shade of the uncalibrated period on every time plot.
    static let uncalibratedShade = "#ececec"

    /// Series colours: the estimate blue, the truth orange, bounds light blue, errors red, the compared
    /// run green.
    static let estimateColor = "#1f5fbf", truthColor = "#e07000", boundColor = "#39f", errorColor = "#c00"
    static let comparedColor = "#2a9d3a"

    func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }

    /// The comparison with the reference, computed once per page.
    let scoredOnce: Scored?
    /// When no calibration was applied (the filter's `magnetometer_uncalibrated`), seconds from the
    /// first heading: shaded on every time plot and scored apart.
    let uncalibrated: [(Double, Double)]

    init(sink: ReportSink, relative: [Double], span: Double) {
        self.sink = sink
        self.relative = relative
        self.span = span
        scoredOnce = Self.score(sink)
        uncalibrated = sink.spans(FusionFlags.magnetometerUncalibrated.rawValue)
    }

    /// A plot on the report's shared time axis, the uncalibrated period shaded.
    func timePlot(height: Double, y: ClosedRange<Double>, id: String) -> SVGPlot {
        var p = SVGPlot.timeSeries(height: height, span: span, y: y)
        p.shade(uncalibrated, color: Self.uncalibratedShade, label: "uncalibrated", id: "uncalibrated-" + id)
        return p
    }

    func isUncalibrated(at time: Double) -> Bool { uncalibrated.contains { time >= $0.0 && time <= $0.1 } }

    /// The heading errors (signed, degrees) at `times` (seconds from the first heading), split into
    /// those while uncalibrated and the rest.
    func splitByCalibration(times: [Double], _ values: [Double]) -> (uncalibrated: [Double], calibrated: [Double]) {
        var before: [Double] = [], after: [Double] = []
        for (t, v) in zip(times, values) {
            if isUncalibrated(at: t) { before.append(v) } else { after.append(v) }
        }
        return (before, after)
    }

    /// The comparison's times as seconds from the first heading.
    func errorTimesFromStart(_ e: Scored) -> [Double] {
        guard let t0 = sink.t.first else { return [] }
        return e.errorTimes.map { $0 - (t0 - 1_700_000_000) }
    }

    static func rms(_ v: [Double]) -> Double {
        v.isEmpty ? .nan : (v.reduce(0) { $0 + $1 * $1 } / Double(v.count)).squareRoot()
    }

    /// The value below which `fraction` of `sorted` lies (nearest rank).
    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, max(0, Int((fraction * Double(sorted.count)).rounded(.up)) - 1))]
    }

    /// Why the truth looks like another recording's, or nil: it overlaps less than half of the run, or
    /// the median heading error is over three times the median reported bound (and over 10 degrees).
    var truthMismatch: String? {
        guard let e = scoredOnce else { return nil }
        if e.coverage < 0.5 {
            return "the estimate covers only \(format(100 * e.coverage, 1)) % of the truth's samples: "
                + "is the truth from this recording?"
        }
        let errors = e.headingErrors.sorted()
        let bounds = sink.accuracy.filter { $0.isFinite && $0 < 180 }.sorted()
        let medianError = Self.percentile(errors, 0.5), medianBound = Self.percentile(bounds, 0.5)
        if medianError > 10, !medianBound.isNaN, medianError > 3 * medianBound {
            return "the median heading error, \(format(medianError, 1)) deg, is over three times the median "
                + "reported bound (\(format(medianBound, 1)) deg): is the truth from this recording?"
        }
        return nil
    }

    func summary() -> String {
        let s = sink
        let valid = s.heading.filter(\.isFinite).count
        var rows: [(String, String)] = [
            ("recording", escape(s.settings.title)),
            ("produced by", "fusion-node \(escape(BuildInfo.version)) (commit \(escape(BuildInfo.commit)))"),
            ("duration", "\(format(span, 1)) s"),
            ("headings", "\(s.t.count) (\(valid) with a value)"),
        ]
        if let h = s.heading.last(where: \.isFinite) {
            rows.append(
                ("final heading", "\(format(h, 1)) deg (\(CardinalDirection.name(forHeadingDegrees: h) ?? "-"))"))
        }
        let accuracies = s.accuracy.filter(\.isFinite).sorted()
        if !accuracies.isEmpty {
            rows.append(("95 % accuracy, median", "\(format(Self.percentile(accuracies, 0.5), 2)) deg"))
        }
        for (flag, name, _, _) in Self.flagRows {
            let share = Double(s.flags.filter { $0 & flag != 0 }.count) / Double(max(1, s.flags.count))
            rows.append(("time " + name, "\(format(100 * share, 1)) %"))
        }
        rows.append(("calibrations accepted", "\(s.fits.count)"))
        // With several magnetometers, each one's share of readings left out (its gate, or outvoted).
        if s.magnetometerStatuses.count > 1 {
            let shares = s.magnetometerStatuses.sorted { $0.key < $1.key }.map { name, i in
                "\(escape(name)): \(format(i.flaggedPercent, 1)) % "
                    + "of \(i.samplesAssessed) in \(i.disturbedPeriods) period(s)"
            }
            rows.append(("magnetometer readings left out", shares.joined(separator: "; ")))
        }
        if let e = scoredOnce {
            if !uncalibrated.isEmpty {
                let split = splitByCalibration(times: errorTimesFromStart(e), e.signedHeadingErrors)
                let seconds = uncalibrated.reduce(0) { $0 + $1.1 - $1.0 }
                rows.append(
                    (
                        "heading RMSE, calibrated / uncalibrated",
                        "<b>\(format(Self.rms(split.calibrated), 3)) deg</b> calibrated (\(split.calibrated.count) "
                            + "samples) / \(format(Self.rms(split.uncalibrated), 3)) deg while uncalibrated "
                            + "(\(format(seconds, 1)) s, shaded on the plots)"
                    ))
            }
            rows.append(
                (
                    "RMSE against the truth over the whole run (BROAD's definition)",
                    "total \(format(e.total, 3)), heading \(format(e.heading, 3)), inclination "
                        + "\(format(e.inclination, 3)) deg"
                ))
            let sorted = e.headingErrors.sorted()
            let parts = [(0.5, "median"), (0.9, "90 %"), (0.95, "95 %"), (0.99, "99 %")].map {
                "\($0.1) \(format(Self.percentile(sorted, $0.0), 2))"
            }
            rows.append(
                (
                    "heading error percentiles",
                    parts.joined(separator: ", ") + ", max \(format(sorted.last ?? .nan, 2)) deg"
                ))
            let signed = e.signedHeadingErrors
            let mean = signed.isEmpty ? Double.nan : signed.reduce(0, +) / Double(signed.count)
            rows.append(("mean signed heading error (estimate - truth)", "\(format(mean, 2)) deg"))
            rows.append(("truth samples covered by the estimate", "\(format(100 * e.coverage, 1)) %"))
            rows.append(
                ("heading error within the reported 95 % bound", "\(format(100 * e.boundCoverage, 1)) % of samples"))
            if let problem = truthMismatch {
                rows.append(("<b>warning</b>", "<b>\(escape(problem))</b>"))
            }
        }
        rows.append(("skipped samples", "<!--SKIPPED-->"))
        return "<table>" + rows.map { "<tr><th>\($0.0)</th><td>\($0.1)</td></tr>" }.joined() + "</table>\n"
    }

    /// This run and the compared one side by side: both scored against the truth when there is one,
    /// and their difference from each other (the compared run taken as the reference).
    func comparison() -> String {
        guard let c = sink.compared else { return "" }
        let label = escape(sink.comparedLabel)
        func scores(_ e: Scored) -> [String] {
            let sorted = e.headingErrors.sorted()
            return [
                format(e.heading, 3), format(e.total, 3), format(e.inclination, 3),
                format(Self.percentile(sorted, 0.95), 2), "\(format(100 * e.coverage, 1)) %",
            ]
        }
        var rows: [(String, [String])] = []
        if let r = sink.reference, let mine = scoredOnce {
            let theirs = r.errors(estimateTimes: c.t, estimates: c.q, boundTimes: [], bounds: [])
            let names = [
                "heading RMSE against the truth, deg", "total RMSE, deg", "inclination RMSE, deg",
                "95 % of heading errors below, deg", "truth samples covered",
            ]
            rows = zip(names, zip(scores(mine), scores(theirs))).map { ($0.0, [$0.1.0, $0.1.1]) }
        }
        let apart = c.errors(estimateTimes: sink.fusedT, estimates: sink.fused, boundTimes: [], bounds: [])
        let sorted = apart.headingErrors.sorted()
        let table =
            "<table><tr><th></th><th>this run</th><th>\(label)</th></tr>"
            + rows.map { "<tr><th>\($0.0)</th><td>\($0.1[0])</td><td>\($0.1[1])</td></tr>" }.joined()
            + "<tr><th>heading difference between the two, RMS / 95 % / max</th><td colspan=\"2\">"
            + "\(format(apart.heading, 3)) / \(format(Self.percentile(sorted, 0.95), 2)) / "
            + "\(format(sorted.last ?? .nan, 2)) deg over \(format(100 * apart.coverage, 1)) % of its samples</td></tr>"
            + "</table>\n"
        return "<h2>Compared with \(label)</h2>\n" + table
    }

    /// The calibration in force at the end, and every fit accepted, as tables.
    func calibrationTables() -> String {
        let t0 = sink.t.first ?? 0
        var out = ""
        if let c = sink.calibration, c.fieldStrength.isFinite {
            let s = c.softIron
            let rows = [[s.m0, s.m1, s.m2], [s.m3, s.m4, s.m5], [s.m6, s.m7, s.m8]]
            out +=
                "<table id=\"calibration-values\"><tr><th>hard iron (uT)</th><td>"
                + "\(format(c.hardIron.x, 2)), \(format(c.hardIron.y, 2)), \(format(c.hardIron.z, 2))</td></tr>"
                + "<tr><th>soft iron (applied after the offset)</th><td>"
                + rows.map { $0.map { format($0, 4) }.joined(separator: " ") }.joined(separator: "<br>")
                + "</td></tr><tr><th>field strength of the fit</th><td>\(format(c.fieldStrength, 2)) uT</td></tr>"
                + "<tr><th>rms residual</th><td>\(format(c.rmsResidual, 2)) uT</td></tr>"
                + "<tr><th>coverage of directions</th><td>\(format(100 * c.coverage, 0)) %</td></tr></table>\n"
        } else {
            out += "<p>No calibration was in force at the end.</p>\n"
        }
        // The field the motors' share is taken of: the fit's radius, else the gate's expected strength,
        // else the median strength the headings carried.
        let measured = sink.strength.filter(\.isFinite).sorted()
        let field =
            [
                sink.calibration?.fieldStrength, sink.expected?.strength,
                measured.isEmpty ? nil : measured[measured.count / 2],
            ].compactMap { $0 }.first(where: \.isFinite) ?? .nan
        out += motorTable(fieldMicrotesla: field)
        guard !sink.fits.isEmpty else { return out + "<p>Fits accepted: none.</p>\n" }
        // The online calibration refits often; the list is there for whoever wants it, folded.
        out +=
            "<details id=\"fits\"><summary>Fits accepted: \(sink.fits.count)</summary>"
            + "<table><tr><th>accepted at (s)</th><th>hard iron (uT)</th><th>field (uT)</th>"
            + "<th>rms (uT)</th><th>coverage (%)</th></tr>"
        for f in sink.fits {
            out +=
                "<tr><td>\(format(f.header.stamp.seconds - t0, 1))</td><td>\(format(f.hardIron.x, 1)), "
                + "\(format(f.hardIron.y, 1)), \(format(f.hardIron.z, 1))</td><td>\(format(f.fieldStrength, 1))</td>"
                + "<td>\(format(f.rmsResidual, 2))</td><td>\(format(100 * f.coverage, 0))</td></tr>"
        }
        return out + "</table></details>\n"
    }

    /// The motor-current compensation in force at the end, and the share of the field it explains:
    /// |k I| against the calibrated field's strength, at the largest current and as an RMS over every
    /// current drawn while it was in force.
    func motorTable(fieldMicrotesla field: Double) -> String {
        guard let k = sink.motorCoefficients else { return "" }
        let currents = Array(sink.motorCurrents.values)
        var rows = [
            (
                "motor field per ampere (uT/A, magnetometer axes)",
                "\(format(k.x, 3)), \(format(k.y, 3)), \(format(k.z, 3))"
            )
        ]
        if let largest = currents.map(abs).max() {
            let peak = k.norm * largest
            let rms = (currents.reduce(0) { $0 + $1 * $1 } / Double(currents.count)).squareRoot() * k.norm
            rows.append(("currents drawn", "\(currents.count), up to \(format(largest, 1)) A"))
            rows.append(
                (
                    "motors' field at the largest current",
                    "\(format(peak, 2)) uT"
                        + (field.isFinite ? " (\(format(100 * peak / field, 1)) % of the field)" : "")
                ))
            rows.append(
                (
                    "motors' field, rms over the run",
                    "\(format(rms, 2)) uT" + (field.isFinite ? " (\(format(100 * rms / field, 1)) % of the field)" : "")
                ))
        } else {
            rows.append(("currents drawn", "none"))
        }
        return "<table id=\"motor-compensation\"><tr><th colspan=\"2\">Motor-current compensation</th></tr>"
            + rows.map { "<tr><th>\($0.0)</th><td>\($0.1)</td></tr>" }.joined() + "</table>\n"
    }

    func html() -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><title>\(escape(sink.settings.title))</title>
        <style>body{font-family:sans-serif;margin:24px;max-width:1000px}table{border-collapse:collapse;margin:8px 0}
        th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}
        svg{display:block;margin:14px 0;max-width:100%;height:auto}
        .incomplete{background:#fdd;border:2px solid #c00;padding:8px;font-weight:bold}
        </style>
        </head><body>
        <!--STATUS-->
        <h1>\(escape(sink.settings.title))</h1>
        \(summary())<!--PIPELINE-->\(comparison())\(headingPlot())\(errorPlots())\(flagPlot())\(fieldPlots())
        <h2>Calibration</h2>
        \(calibrationTables())\(projections())\(biasPlot())
        <p style="font-size:11px;color:#777">fusion-node report; every plot draws at most one minimum and one
        maximum per pixel column.</p>
        </body></html>

        """
    }
}
