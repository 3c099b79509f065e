import Foundation
import CompassCore
import WireFormat

/// The HTML of a `ReportSink`: the summary table and the plots, all inline.
struct ReportPage {
    let sink: ReportSink
    let relative: [Double]
    let span: Double
    typealias Scored = (
        total: Double, heading: Double, inclination: Double, coverage: Double, boundCoverage: Double,
        errorTimes: [Double], headingErrors: [Double]
    )

    /// The comparison with the reference, when there is one.
    static func score(_ sink: ReportSink) -> Scored? {
        guard let r = sink.reference else { return nil }
        let boundTimes = sink.t.map { $0 - 1_700_000_000 }
        return r.errors(
            estimateTimes: sink.fusedT, estimates: sink.fused, boundTimes: boundTimes, bounds: sink.accuracy)
    }

    static let flagRows: [(UInt16, String, String)] = [
        (FusionFlags.initialising.rawValue, "initialising", "#999"),
        (FusionFlags.atRest.rawValue, "at rest", "#4a9"),
        (FusionFlags.accelerationRejected.rawValue, "acceleration rejected", "#e80"),
        (FusionFlags.magnetometerRejected.rawValue, "disturbance (magnetometer rejected)", "#d33"),
        (FusionFlags.gyroOnly.rawValue, "gyro only", "#a3c"),
    ]

    func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }

    /// The comparison with the reference, computed once per page.
    let scoredOnce: Scored?

    init(sink: ReportSink, relative: [Double], span: Double) {
        self.sink = sink
        self.relative = relative
        self.span = span
        scoredOnce = Self.score(sink)
    }

    func summary() -> String {
        let s = sink
        let valid = s.heading.filter(\.isFinite).count
        var rows: [(String, String)] = [
            ("recording", escape(s.settings.title)),
            ("duration", "\(format(span, 1)) s"),
            ("headings", "\(s.t.count) (\(valid) with a value)"),
        ]
        if let h = s.heading.last(where: \.isFinite) {
            rows.append(
                ("final heading", "\(format(h, 1)) deg (\(CardinalDirection.name(forHeadingDegrees: h) ?? "-"))"))
        }
        let accuracies = s.accuracy.filter(\.isFinite).sorted()
        if !accuracies.isEmpty {
            rows.append(("95 % accuracy, median", "\(format(accuracies[accuracies.count / 2], 2)) deg"))
        }
        for (flag, name, _) in Self.flagRows + [
            (FusionFlags.magneticGyroInconsistent.rawValue, "gyro-inconsistent field", "")
        ] {
            let share = Double(s.flags.filter { $0 & flag != 0 }.count) / Double(max(1, s.flags.count))
            rows.append(("time " + name, "\(format(100 * share, 1)) %"))
        }
        rows.append(("calibrations accepted", "\(s.fits.count)"))
        if let e = scoredOnce {
            rows.append(
                (
                    "RMSE against the truth (BROAD's definition)",
                    "total \(format(e.total, 3)), heading \(format(e.heading, 3)), inclination "
                        + "\(format(e.inclination, 3)) deg"
                ))
            rows.append(("truth samples covered by the estimate", "\(format(100 * e.coverage, 1)) %"))
            rows.append(
                ("heading error within the reported 95 % bound", "\(format(100 * e.boundCoverage, 1)) % of samples"))
        }
        rows.append(("skipped samples", "<!--SKIPPED-->"))
        return "<table>" + rows.map { "<tr><th>\($0.0)</th><td>\($0.1)</td></tr>" }.joined() + "</table>\n"
    }

    func errorPlot() -> String {
        guard let e = scoredOnce, let t0 = sink.t.first else { return "" }
        let offset = t0 - 1_700_000_000
        let times = e.errorTimes.map { $0 - offset }
        let top = max(5, (e.headingErrors.max() ?? 5) * 1.05)
        var p = SVGPlot(height: 220, x: 0...span, y: 0...min(top, 180))
        p.band(relative, low: sink.accuracy.map { _ in 0 }, high: sink.accuracy, color: "#39f", id: "error-bound")
        p.line(times, e.headingErrors, color: "#c00", id: "heading-error")
        return p.svg(title: "Heading error against the truth, with the reported 95 % bound", xLabel: "s", yLabel: "deg")
    }

    func headingPlot() -> String {
        var p = SVGPlot(height: 260, x: 0...span, y: 0...360)
        let low = zip(sink.heading, sink.accuracy).map { $0 - $1 },
            high = zip(sink.heading, sink.accuracy).map { $0 + $1 }
        p.band(relative, low: low, high: high, color: "#39f", id: "accuracy-band")
        p.line(relative, sink.heading, color: "#036", id: "heading", wrap: 180)
        if let r = sink.reference, let t0 = sink.t.first {
            let offset = t0 - 1_700_000_000
            p.line(
                r.t.map { $0 - offset }, r.q.map { $0.headingDegrees ?? .nan }, color: "#0a0", id: "true-heading",
                wrap: 180)
        }
        return p.svg(title: "Heading with its 95 % accuracy band", xLabel: "s", yLabel: "deg (magnetic)")
    }

    func flagPlot() -> String {
        var p = SVGPlot(height: 48 + 20 * Double(Self.flagRows.count), x: 0...span, y: 0...1)
        p.margin.left = 150
        for (row, (flag, name, color)) in Self.flagRows.enumerated() {
            p.spans(
                sink.spans(flag), color: color, label: name, row: row, rows: Self.flagRows.count,
                id: "flag-" + name.split(separator: " ").first!.lowercased())
        }
        return p.svg(title: "What the filter was doing", xLabel: "s", yLabel: "flags", yTicks: false)
    }

    func fieldPlot() -> String {
        let strengths = sink.strength.filter(\.isFinite), dips = sink.dip.filter(\.isFinite)
        let lo = min(strengths.min() ?? 0, dips.min() ?? 0, sink.expected?.dip ?? 0) - 5
        let hi = max(strengths.max() ?? 60, dips.max() ?? 60, sink.expected?.strength ?? 0) + 5
        var p = SVGPlot(height: 240, x: 0...span, y: lo...hi)
        if let e = sink.expected {
            p.horizontal(e.strength, color: "#c60")
            p.horizontal(e.dip, color: "#06c")
        }
        p.line(relative, sink.strength, color: "#c60", id: "field-strength")
        p.line(relative, sink.dip, color: "#06c", id: "field-dip")
        return p.svg(
            title: "Field strength (orange, uT) and dip (blue, deg); dashed: expected", xLabel: "s", yLabel: "uT / deg")
    }

    func projections() -> String {
        let raw = sink.raw.points, calibrated = sink.calibrated.points
        let all = raw + calibrated
        guard !all.isEmpty else { return "" }
        var out = ""
        for (a, b, name) in [(0, 1, "x-y"), (0, 2, "x-z"), (1, 2, "y-z")] {
            func c(_ v: Vector3, _ i: Int) -> Double { i == 0 ? v.x : i == 1 ? v.y : v.z }
            let values = all.flatMap { [c($0, a), c($0, b)] }.filter(\.isFinite)
            let r = max(values.map(abs).max() ?? 60, 10) * 1.1
            var p = SVGPlot(height: 300, x: -r...r, y: -r...r)
            p.scatter(raw.map { (c($0, a), c($0, b)) }, color: "#d33", id: "raw-\(name)")
            p.scatter(calibrated.map { (c($0, a), c($0, b)) }, color: "#36c", id: "calibrated-\(name)")
            if let cal = sink.calibration, cal.fieldStrength.isFinite {
                let h = cal.hardIron
                p.circle(centre: (c(h, a), c(h, b)), radius: cal.fieldStrength, color: "#d33", id: "fit-\(name)")
                p.circle(centre: (0, 0), radius: cal.fieldStrength, color: "#36c", id: "fit-calibrated-\(name)")
            }
            out += p.svg(title: "Magnetometer \(name): raw (red) and calibrated (blue), uT", xLabel: "uT", yLabel: "uT")
        }
        return out
    }

    func biasPlot() -> String {
        guard !sink.bias.isEmpty, let t0 = sink.t.first else {
            return "<p>No gyro bias was reported (no calibration stage).</p>"
        }
        let rel = sink.biasT.map { $0 - t0 }
        let values = sink.bias.flatMap { [$0.x, $0.y, $0.z] }.map { $0 * 1000 }
        var p = SVGPlot(height: 200, x: 0...span, y: (values.min() ?? -1)...(values.max() ?? 1))
        for (i, color) in ["#d33", "#3a3", "#36c"].enumerated() {
            p.line(rel, sink.bias.map { 1000 * (i == 0 ? $0.x : i == 1 ? $0.y : $0.z) }, color: color, id: "bias-\(i)")
        }
        return p.svg(title: "Gyro bias x, y, z (mrad/s)", xLabel: "s", yLabel: "mrad/s")
    }

    func html() -> String {
        var fits = sink.fits.prefix(12).map {
            "\(format($0.t - (sink.t.first ?? 0), 1)) s (rms \(format($0.rms, 2)) uT)"
        }
        if sink.fits.count > 12, let last = sink.fits.last {
            fits.append(
                "... \(sink.fits.count - 13) more ..., \(format(last.t - (sink.t.first ?? 0), 1)) s (rms "
                    + "\(format(last.rms, 2)) uT)"
            )
        }
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>\(escape(sink.settings.title))</title>
            <style>body{font-family:sans-serif;margin:24px;max-width:1000px}table{border-collapse:collapse}
            th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}
            svg{display:block;margin:14px 0}</style>
            </head><body>
            <h1>\(escape(sink.settings.title))</h1>
            \(summary())\(headingPlot())\(errorPlot())\(flagPlot())\(fieldPlot())
            <h2>Calibration</h2>
            <p>Fits accepted: \(fits.isEmpty ? "none" : fits.joined(separator: ", "))</p>
            \(projections())\(biasPlot())
            <p style="font-size:11px;color:#777">fusion-node report; every plot draws at most one minimum and one
            maximum per pixel column.</p>
            </body></html>

            """
    }
}
