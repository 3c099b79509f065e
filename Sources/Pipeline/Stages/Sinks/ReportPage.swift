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
    static let flagRows: [(UInt16, String, String, String)] = FusionFlags.names.map { flag, name in
        let label = flagLabels[name] ?? name.replacingOccurrences(of: "_", with: " ")
        return (flag.rawValue, label, flagColors[name] ?? "#888", "flag-" + name)
    }
    static let flagLabels = [
        "magnetometer_rejected": "disturbance (magnetometer rejected)",
        "magnetic_strength": "reason: field strength", "magnetic_dip": "reason: dip",
        "magnetic_gyro_inconsistent": "reason: compass vs gyro", "magnetic_reference_changed": "new field reference",
        "compass_gnss_disagree": "compass disagrees with GNSS",
    ]
    static let flagColors = [
        "initialising": "#999", "at_rest": "#4a9", "acceleration_rejected": "#e80", "magnetometer_rejected": "#d33",
        "gyro_only": "#a3c", "magnetic_strength": "#e77", "magnetic_dip": "#e77", "magnetic_gyro_inconsistent": "#e77",
        "magnetic_reference_changed": "#37a", "filter_reset": "#000", "magnetometer_uncalibrated": "#777",
        "gnss_aided": "#2a9d3a", "compass_gnss_disagree": "#c0c",
    ]
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

    /// Signed heading error with the reported bound as +-band, and the inclination error: scaled to the
    /// calibrated part (an uncalibrated start can be off by any angle; it is clipped and says so), with
    /// gaps in the truth left as gaps.
    func errorPlots() -> String {
        guard let e = scoredOnce else { return "" }
        let times = errorTimesFromStart(e)
        let split = splitByCalibration(times: times, e.signedHeadingErrors)
        let scaled = (split.calibrated.isEmpty ? split.uncalibrated : split.calibrated).map(abs).sorted()
        let bounds = zip(relative, sink.accuracy).filter { $0.1.isFinite && $0.1 < 180 && !isUncalibrated(at: $0.0) }
            .map(\.1).sorted()
        let top = min(180, max(1, Self.percentile(scaled, 0.99), Self.percentile(bounds, 0.5)) * 1.2)
        var p = timePlot(height: 240, y: -top...top, id: "heading-error")
        p.band(relative, low: sink.accuracy.map { -$0 }, high: sink.accuracy, color: Self.boundColor, id: "error-bound")
        p.horizontal(0, color: "#999")
        p.line(times, e.signedHeadingErrors, color: Self.errorColor, id: "heading-error", gap: 0.1)
        p.legend("heading error (estimate - truth)", color: Self.errorColor)
        p.legend("reported 95 % bound", color: Self.boundColor)
        if let largest = e.signedHeadingErrors.map(abs).max(), largest > top {
            p.note(
                "clipped at +-\(format(top, 1)): errors reach \(format(largest, 1)) deg", id: "heading-error-clipped")
        }
        var out = p.svg(
            title: "Heading error against the truth, signed, with the reported 95 % bound", xLabel: "s",
            yLabel: "deg", clip: "clip-heading-error")
        let inclinations = e.inclinationErrors.sorted()
        let inclinationTop = max(0.5, Self.percentile(inclinations, 0.99) * 1.2)
        var q = timePlot(height: 200, y: 0...inclinationTop, id: "inclination-error")
        q.line(times, e.inclinationErrors, color: "#7a3", id: "inclination-error", gap: 0.1)
        q.legend("inclination error (roll and pitch together)", color: "#7a3")
        if let largest = inclinations.last, largest > inclinationTop {
            q.note(
                "clipped at \(format(inclinationTop, 1)): errors reach \(format(largest, 1)) deg",
                id: "inclination-error-clipped")
        }
        out += q.svg(
            title: "Inclination error against the truth", xLabel: "s", yLabel: "deg", clip: "clip-inclination-error")
        return out
    }

    func headingPlot() -> String {
        var p = timePlot(height: 260, y: 0...360, id: "heading")
        p.yTickValues = [0, 90, 180, 270, 360]
        p.circularBand(
            relative, centre: sink.heading, halfWidth: sink.accuracy, color: Self.boundColor, id: "accuracy-band")
        p.line(relative, sink.heading, color: Self.estimateColor, id: "heading", wrap: 180)
        p.legend("estimate", color: Self.estimateColor)
        p.legend("95 % accuracy", color: Self.boundColor)
        if let c = sink.compared, let t0 = sink.t.first {
            let offset = t0 - 1_700_000_000
            p.line(
                c.t.map { $0 - offset }, c.q.map { $0.headingDegrees ?? .nan }, color: Self.comparedColor,
                id: "compared-heading", wrap: 180, gap: 0.1, width: 1.2)
            p.legend(escape(sink.comparedLabel), color: Self.comparedColor)
        }
        if let r = sink.reference, let t0 = sink.t.first {
            let offset = t0 - 1_700_000_000
            // Drawn last and thinner: the truth stays visible where the estimate lies on it.
            p.line(
                r.t.map { $0 - offset }, r.q.map { $0.headingDegrees ?? .nan }, color: Self.truthColor,
                id: "true-heading", wrap: 180, gap: 0.1, width: 0.9)
            p.legend("truth", color: Self.truthColor)
        }
        return p.svg(
            title: "Heading with its 95 % accuracy band", xLabel: "s", yLabel: "deg (magnetic)", clip: "clip-heading")
    }

    func flagPlot() -> String {
        var p = SVGPlot.timeSeries(height: 60 + 18 * Double(Self.flagRows.count), span: span, y: 0...1)
        for (row, (flag, name, color, id)) in Self.flagRows.enumerated() {
            p.spans(sink.spans(flag), color: color, label: name, row: row, rows: Self.flagRows.count, id: id)
        }
        return p.svg(
            title: "What the filter was doing", xLabel: "s", yLabel: "flags", yTicks: false, clip: "clip-flags")
    }

    /// Strength and dip on their own axes, each with its expected value dashed on top of the data.
    func fieldPlots() -> String {
        var out = ""
        for (values, expected, name, unit, color, id) in [
            (sink.strength, sink.expected?.strength, "Field strength", "uT", "#c60", "field-strength"),
            (sink.dip, sink.expected?.dip, "Dip (inclination of the field)", "deg", "#06c", "field-dip"),
        ] {
            let finite = values.filter(\.isFinite).sorted()
            let lo = min(Self.percentile(finite, 0.005), expected ?? .infinity)
            let hi = max(Self.percentile(finite, 0.995), expected ?? -.infinity)
            let pad = max(1, (hi - lo) * 0.1)
            var p = timePlot(height: 200, y: (lo.isFinite ? lo - pad : 0)...(hi.isFinite ? hi + pad : 1), id: id)
            p.line(relative, values, color: color, id: id)
            p.legend("measured", color: color)
            if let e = expected {
                p.horizontal(e, color: "#111", id: id + "-expected")
                p.legend("expected (fusion's reference)", color: "#111", dashed: true)
            }
            out += p.svg(title: name, xLabel: "s", yLabel: unit, clip: "clip-" + id)
        }
        return out
    }

    /// The 2x2 shape of the fitted ellipsoid's outline in the plane of axes `a`, `b`: the raw field
    /// is h + B S^-1 u for unit u, so its projection is the ellipse with matrix B^2 [(S^T S)^-1]_ab.
    static func outline(
        centre: (Double, Double), softIron s: [Double], strength: Double, axes a: Int, _ b: Int
    ) -> [(Double, Double)] {
        func m(_ r: Int, _ c: Int) -> Double { s[3 * r + c] }
        var g = [Double](repeating: 0, count: 9)  // S^T S
        for r in 0..<3 {
            for c in 0..<3 { g[3 * r + c] = (0..<3).reduce(0) { $0 + m($1, r) * m($1, c) } }
        }
        let det =
            g[0] * (g[4] * g[8] - g[5] * g[7]) - g[1] * (g[3] * g[8] - g[5] * g[6]) + g[2] * (g[3] * g[7] - g[4] * g[6])
        guard det.isFinite, abs(det) > 1e-12 else { return [] }
        // The cofactors needed for entries (a,a), (a,b), (b,b) of the inverse (G is symmetric).
        func cofactor(_ r: Int, _ c: Int) -> Double {
            let rows = (0..<3).filter { $0 != r }, cols = (0..<3).filter { $0 != c }
            let minor =
                g[3 * rows[0] + cols[0]] * g[3 * rows[1] + cols[1]] - g[3 * rows[0] + cols[1]]
                * g[3 * rows[1] + cols[0]]
            return ((r + c) % 2 == 0 ? 1 : -1) * minor
        }
        let b2 = strength * strength
        let maa = b2 * cofactor(a, a) / det, mab = b2 * cofactor(a, b) / det, mbb = b2 * cofactor(b, b) / det
        guard maa > 0, mbb - mab * mab / maa > 0 else { return [] }
        let l11 = maa.squareRoot(), l21 = mab / l11, l22 = (mbb - l21 * l21).squareRoot()
        return stride(from: 0.0, through: 2 * Double.pi, by: Double.pi / 60).map {
            (centre.0 + l11 * cos($0), centre.1 + l21 * cos($0) + l22 * sin($0))
        }
    }

    func projections() -> String {
        let raw = sink.raw.points, calibrated = sink.calibrated.points
        let all = raw + calibrated
        guard !all.isEmpty else { return "" }
        var out = "<div style=\"display:flex;flex-wrap:wrap;gap:4px\">"
        for (a, b, name) in [(0, 1, "x-y"), (0, 2, "x-z"), (1, 2, "y-z")] {
            func c(_ v: Vector3, _ i: Int) -> Double { i == 0 ? v.x : i == 1 ? v.y : v.z }
            let values = all.flatMap { [c($0, a), c($0, b)] }.filter(\.isFinite)
            let r = max(values.map(abs).max() ?? 60, 10) * 1.1
            var p = SVGPlot.square(side: 240, range: -r...r)
            p.scatter(raw.map { (c($0, a), c($0, b)) }, color: "#d33", id: "raw-\(name)")
            p.scatter(calibrated.map { (c($0, a), c($0, b)) }, color: "#36c", id: "calibrated-\(name)")
            p.legend("raw", color: "#d33")
            p.legend("calibrated", color: "#36c")
            if let cal = sink.calibration, cal.fieldStrength.isFinite {
                let h = cal.hardIron
                let soft = [
                    cal.softIron.m0, cal.softIron.m1, cal.softIron.m2, cal.softIron.m3, cal.softIron.m4,
                    cal.softIron.m5, cal.softIron.m6, cal.softIron.m7, cal.softIron.m8,
                ]
                p.outline(
                    Self.outline(
                        centre: (c(h, a), c(h, b)), softIron: soft, strength: cal.fieldStrength, axes: a, b),
                    color: "#900", id: "fit-\(name)")
                p.outline(
                    Self.outline(
                        centre: (0, 0), softIron: [1, 0, 0, 0, 1, 0, 0, 0, 1], strength: cal.fieldStrength, axes: a, b),
                    color: "#036", id: "fit-calibrated-\(name)")
                p.legend("fit", color: "#900", dashed: true)
            }
            out += p.svg(title: "Magnetometer \(name)", xLabel: "uT", yLabel: "uT", clip: "clip-field-\(name)")
        }
        return out + "</div>\n"
    }

    func biasPlot() -> String {
        guard !sink.bias.isEmpty, let t0 = sink.t.first else {
            return "<p>No gyro bias to show: the recording has no raw gyro readings to compare with the fused ones.</p>"
        }
        let rel = sink.biasT.map { $0 - t0 }
        let values = sink.bias.flatMap { [$0.x, $0.y, $0.z] }.map { $0 * 1000 }.filter(\.isFinite)
        let lo = values.min() ?? -1, hi = values.max() ?? 1, pad = max(0.05, (hi - lo) * 0.1)
        var p = timePlot(height: 200, y: (lo - pad)...(hi + pad), id: "bias")
        for (i, (color, axis)) in [("#d33", "x"), ("#3a3", "y"), ("#36c", "z")].enumerated() {
            p.line(rel, sink.bias.map { 1000 * (i == 0 ? $0.x : i == 1 ? $0.y : $0.z) }, color: color, id: "bias-\(i)")
            p.legend(axis, color: color)
        }
        return p.svg(
            title: "Gyro bias the filter removed (raw minus fused rate)", xLabel: "s", yLabel: "mrad/s",
            clip: "clip-bias")
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
