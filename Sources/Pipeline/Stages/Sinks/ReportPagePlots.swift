import BuildInfo
import Foundation
import CompassCore
import WireFormat

/// The report's plots: errors, heading, flags, field, projections, gyro bias.
extension ReportPage {
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
}
