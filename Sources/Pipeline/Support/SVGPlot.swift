import Foundation

/// Small, dependency-free SVG plots for the replay report: time series drawn as at most one minimum
/// and one maximum per pixel column (spikes stay visible, a one-hour bag stays a few thousand points),
/// bands, shaded spans and scatter plots.
struct SVGPlot {
    let width: Double, height: Double
    var margin = (left: 56.0, right: 12.0, top: 34.0, bottom: 26.0)
    var xRange: ClosedRange<Double>
    var yRange: ClosedRange<Double>
    var body = ""
    /// Drawn outside the clipped plot area (row labels in the margin).
    var annotations = ""
    /// Entries drawn above the plot area, right-aligned: label, colour, dashed.
    var legendEntries: [(label: String, color: String, dashed: Bool)] = []
    /// The y ticks; nil: round values (`ticks`).
    var yTickValues: [Double]?
    /// Drawn beneath everything else in the plot area (shaded spans), and on top of everything
    /// (their labels, notes), unclipped.
    var underlay = "", overlay = ""

    /// Left margin of every plot with time across: wide enough for the flags chart's row labels, so the
    /// time axes of a report's plots line up.
    static let timeAxisLeft = 200.0

    /// A plot of `height` pixels with seconds `0...span` across, on the report's shared time axis.
    static func timeSeries(height: Double, span: Double, y: ClosedRange<Double>) -> SVGPlot {
        var p = SVGPlot(height: height, x: 0...span, y: y)
        p.margin.left = timeAxisLeft
        return p
    }

    init(width: Double = 960, height: Double = 240, x: ClosedRange<Double>, y: ClosedRange<Double>) {
        self.width = width
        self.height = height
        xRange = x.lowerBound < x.upperBound ? x : x.lowerBound...(x.lowerBound + 1)
        yRange = y.lowerBound < y.upperBound ? y : (y.lowerBound - 1)...(y.upperBound + 1)
    }

    /// A square plot area of `side` pixels with equal scales on both axes, both spanning `range`: a
    /// sphere's projection is drawn round.
    static func square(side: Double, range: ClosedRange<Double>) -> SVGPlot {
        let m = (left: 56.0, right: 12.0, top: 34.0, bottom: 26.0)
        var p = SVGPlot(width: side + m.left + m.right, height: side + m.top + m.bottom, x: range, y: range)
        p.margin = m
        return p
    }

    /// Round tick values (1, 2 or 5 times a power of ten) inside `range`, about `count` of them.
    static func ticks(_ range: ClosedRange<Double>, count: Int = 6) -> [Double] {
        let span = range.upperBound - range.lowerBound
        guard span > 0, span.isFinite else { return [range.lowerBound] }
        let raw = span / Double(max(1, count))
        let power = pow(10, floor(log10(raw)))
        let step = [1.0, 2, 5, 10].map { $0 * power }.first { $0 >= raw } ?? 10 * power
        var out: [Double] = []
        var v = ceil(range.lowerBound / step - 1e-9) * step
        while v <= range.upperBound + step * 1e-9 {
            out.append(abs(v) < step * 1e-9 ? 0 : v)
            v += step
        }
        return out
    }

    /// A tick label without needless decimals.
    static func label(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e9 ? String(Int(v)) : String(format: "%g", v)
    }

    mutating func legend(_ label: String, color: String, dashed: Bool = false) {
        legendEntries.append((label, color, dashed))
    }

    var plotWidth: Double { width - margin.left - margin.right }
    var plotHeight: Double { height - margin.top - margin.bottom }
    func px(_ x: Double) -> Double {
        margin.left + (x - xRange.lowerBound) / (xRange.upperBound - xRange.lowerBound) * plotWidth
    }
    func py(_ y: Double) -> Double {
        margin.top + (1 - (y - yRange.lowerBound) / (yRange.upperBound - yRange.lowerBound)) * plotHeight
    }
    static func n(_ v: Double) -> String { String(format: "%.1f", v) }

    /// Per pixel column, the minimum and maximum value in time order: the drawn line keeps every
    /// spike. A run of samples is cut where successive times are more than `gap` apart; the first
    /// point after a cut carries `breakBefore`.
    func decimated(_ t: [Double], _ v: [Double], gap: Double? = nil) -> [(x: Double, y: Double, breakBefore: Bool)] {
        var out: [(x: Double, y: Double, breakBefore: Bool)] = []
        var column = -1, lo = 0.0, hi = 0.0, loT = 0.0, hiT = 0.0, pendingBreak = true
        var previousT: Double?
        func flush() {
            guard column >= 0 else { return }
            if loT <= hiT {
                out += [(loT, lo, pendingBreak), (hiT, hi, false)]
            } else {
                out += [(hiT, hi, pendingBreak), (loT, lo, false)]
            }
            pendingBreak = false
            column = -1
        }
        for i in t.indices where v[i].isFinite {
            if let g = gap, let p = previousT, t[i] - p > g {
                flush()
                pendingBreak = true
            }
            previousT = t[i]
            let c = Int(px(t[i]))
            if c != column {
                flush()
                column = c
                lo = v[i]
                hi = v[i]
                loT = t[i]
                hiT = t[i]
            } else {
                if v[i] < lo {
                    lo = v[i]
                    loT = t[i]
                }
                if v[i] > hi {
                    hi = v[i]
                    hiT = t[i]
                }
            }
        }
        flush()
        return out
    }

    /// A line; breaks where values jump by more than `wrap` (a heading crossing 0/360) and where
    /// successive times are more than `gap` apart (missing data stays missing).
    mutating func line(
        _ t: [Double], _ v: [Double], color: String, id: String, wrap: Double? = nil, gap: Double? = nil,
        width strokeWidth: Double = 1.2
    ) {
        var d = "", previous: Double?
        for (x, y, breakBefore) in decimated(t, v, gap: gap) {
            var jump = breakBefore || previous == nil
            if let w = wrap, let p = previous, abs(y - p) > w { jump = true }
            d += (jump ? "M" : "L") + Self.n(px(x)) + "," + Self.n(py(y))
            previous = y
        }
        body +=
            "<path id=\"\(id)\" d=\"\(d)\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"\(strokeWidth)\"/>\n"
    }

    /// A band of `centre` +- `halfWidth` on a circular axis of 0...360 (a heading and its accuracy):
    /// per pixel column, the degrees covered are collected in 2-degree bins, so a band that crosses
    /// 0/360 is drawn at both edges rather than as a full-height stroke.
    mutating func circularBand(_ t: [Double], centre: [Double], halfWidth: [Double], color: String, id: String) {
        var d = "", column = -1
        var bins = [Bool](repeating: false, count: 180)
        func flush() {
            guard column >= 0 else { return }
            var k = 0
            while k < 180 {
                guard bins[k] else {
                    k += 1
                    continue
                }
                let start = k
                while k < 180 && bins[k] { k += 1 }
                d += "M\(column).5,\(Self.n(py(Double(k) * 2)))V\(Self.n(py(Double(start) * 2)))"
            }
            bins = [Bool](repeating: false, count: 180)
        }
        for i in t.indices where centre[i].isFinite && halfWidth[i].isFinite {
            let c = Int(px(t[i]))
            if c != column {
                flush()
                column = c
            }
            let half = min(halfWidth[i], 180)
            var a = centre[i] - half
            while a <= centre[i] + half {
                let wrapped = (a.truncatingRemainder(dividingBy: 360) + 360).truncatingRemainder(dividingBy: 360)
                bins[min(179, Int(wrapped / 2))] = true
                a += 2
            }
        }
        flush()
        body += "<path id=\"\(id)\" d=\"\(d)\" stroke=\"\(color)\" stroke-opacity=\"0.35\" stroke-width=\"1\"/>\n"
    }

    /// A closed outline through `points` (data coordinates), dashed.
    mutating func outline(_ points: [(Double, Double)], color: String, id: String) {
        guard let first = points.first else { return }
        var d = "M" + Self.n(px(first.0)) + "," + Self.n(py(first.1))
        for p in points.dropFirst() { d += "L" + Self.n(px(p.0)) + "," + Self.n(py(p.1)) }
        body +=
            "<path id=\"\(id)\" d=\"\(d)Z\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"1.5\" "
            + "stroke-dasharray=\"5 3\"/>\n"
    }

    /// A band between `low` and `high` (decimated by pixel column, drawn as vertical strokes).
    mutating func band(_ t: [Double], low: [Double], high: [Double], color: String, id: String) {
        var d = "", column = -1, lo = 0.0, hi = 0.0
        func flush(_ c: Int) {
            guard c >= 0 else { return }
            d += "M\(c).5,\(Self.n(py(hi)))V\(Self.n(py(lo)))"
        }
        for i in t.indices where low[i].isFinite && high[i].isFinite {
            let c = Int(px(t[i]))
            if c != column {
                flush(column)
                column = c
                lo = low[i]
                hi = high[i]
            } else {
                lo = min(lo, low[i])
                hi = max(hi, high[i])
            }
        }
        flush(column)
        body += "<path id=\"\(id)\" d=\"\(d)\" stroke=\"\(color)\" stroke-opacity=\"0.35\" stroke-width=\"1\"/>\n"
    }

    /// Time spans shaded over the plot's whole height, under the data, the first labelled at its top
    /// left (the uncalibrated period).
    mutating func shade(_ spans: [(Double, Double)], color: String, label: String, id: String) {
        guard !spans.isEmpty else { return }
        underlay += "<g id=\"\(id)\" fill=\"\(color)\">"
        for (a, b) in spans {
            let x0 = max(px(a), margin.left), x1 = min(max(px(b), x0 + 0.8), width - margin.right)
            underlay +=
                "<rect x=\"\(Self.n(x0))\" y=\"\(Self.n(margin.top))\" width=\"\(Self.n(x1 - x0))\" "
                + "height=\"\(Self.n(plotHeight))\"/>"
        }
        underlay += "</g>\n"
        let x = max(px(spans[0].0), margin.left) + 3
        overlay +=
            "<text class=\"shade-label\" x=\"\(Self.n(x))\" y=\"\(Self.n(margin.top + 11))\" font-size=\"10\" "
            + "paint-order=\"stroke\" stroke=\"#fff\" stroke-width=\"3\" "
            + "fill=\"#555\">\(label)</text>"
    }

    /// A note in the plot area's top right corner (what was clipped).
    mutating func note(_ text: String, id: String) {
        overlay +=
            "<text id=\"\(id)\" x=\"\(Self.n(width - margin.right - 4))\" y=\"\(Self.n(margin.top + 11))\" "
            + "font-size=\"10\" fill=\"#900\" text-anchor=\"end\" paint-order=\"stroke\" stroke=\"#fff\" "
            + "stroke-width=\"3\">\(text)</text>"
    }

    /// Shaded time spans (a flag being set), in one row of the plot's height band.
    mutating func spans(_ spans: [(Double, Double)], color: String, label: String, row: Int, rows: Int, id: String) {
        let h = plotHeight / Double(rows), y = margin.top + Double(row) * h
        annotations += "<text x=\"4\" y=\"\(Self.n(y + h * 0.7))\" font-size=\"10\">\(label)</text>"
        body += "<g id=\"\(id)\">"
        for (a, b) in spans {
            let x0 = px(a), x1 = max(px(b), x0 + 0.8)
            body +=
                "<rect x=\"\(Self.n(x0))\" y=\"\(Self.n(y + 1))\" width=\"\(Self.n(x1 - x0))\" "
                + "height=\"\(Self.n(h - 2))\" fill=\"\(color)\"/>"
        }
        body += "</g>\n"
    }

    mutating func scatter(_ points: [(Double, Double)], color: String, id: String, radius: Double = 1.2) {
        body += "<g id=\"\(id)\" fill=\"\(color)\">"
        for (x, y) in points { body += "<circle cx=\"\(Self.n(px(x)))\" cy=\"\(Self.n(py(y)))\" r=\"\(radius)\"/>" }
        body += "</g>\n"
    }

    mutating func circle(centre: (Double, Double), radius: Double, color: String, id: String) {
        let rx = radius / (xRange.upperBound - xRange.lowerBound) * plotWidth
        let ry = radius / (yRange.upperBound - yRange.lowerBound) * plotHeight
        body +=
            "<ellipse id=\"\(id)\" cx=\"\(Self.n(px(centre.0)))\" cy=\"\(Self.n(py(centre.1)))\" rx=\"\(Self.n(rx))\" "
            + "ry=\"\(Self.n(ry))\" fill=\"none\" stroke=\"\(color)\" stroke-dasharray=\"4 3\"/>\n"
    }

    mutating func horizontal(_ y: Double, color: String, id: String? = nil) {
        let idAttribute = id.map { " id=\"\($0)\"" } ?? ""
        body +=
            "<line\(idAttribute) x1=\"\(Self.n(margin.left))\" x2=\"\(Self.n(width - margin.right))\" "
            + "y1=\"\(Self.n(py(y)))\" y2=\"\(Self.n(py(y)))\" stroke=\"\(color)\" stroke-width=\"2\" "
            + "stroke-dasharray=\"6 4\"/>\n"
    }

    /// The finished plot with axes, round ticks, a title, the legend, and everything drawn clipped to
    /// the plot area. `clip` names the clip path; it must be unique within the page.
    func svg(title: String, xLabel: String, yLabel: String, yTicks: Bool = true, clip: String) -> String {
        var axes =
            "<clipPath id=\"\(clip)\"><rect x=\"\(margin.left)\" y=\"\(margin.top)\" width=\"\(Self.n(plotWidth))\" "
            + "height=\"\(Self.n(plotHeight))\"/></clipPath>"
            + "<rect class=\"plot-area\" data-x-range=\"\(xRange.lowerBound) \(xRange.upperBound)\" "
            + "x=\"\(margin.left)\" y=\"\(margin.top)\" width=\"\(Self.n(plotWidth))\" "
            + "height=\"\(Self.n(plotHeight))\" fill=\"none\" stroke=\"#999\"/>"
        for x in Self.ticks(xRange, count: width > 500 ? 8 : 4) {
            axes +=
                "<line x1=\"\(Self.n(px(x)))\" x2=\"\(Self.n(px(x)))\" y1=\"\(Self.n(height - margin.bottom))\" "
                + "y2=\"\(Self.n(height - margin.bottom + 4))\" stroke=\"#999\"/>"
                + "<text x=\"\(Self.n(px(x)))\" y=\"\(Self.n(height - 8))\" font-size=\"10\" "
                + "text-anchor=\"middle\">\(Self.label(x))</text>"
        }
        if yTicks {
            for y in yTickValues ?? Self.ticks(yRange, count: 5) {
                axes +=
                    "<line x1=\"\(Self.n(margin.left))\" x2=\"\(Self.n(width - margin.right))\" "
                    + "y1=\"\(Self.n(py(y)))\" y2=\"\(Self.n(py(y)))\" stroke=\"#eee\"/>"
                    + "<text x=\"\(Self.n(margin.left - 4))\" y=\"\(Self.n(py(y) + 3))\" font-size=\"10\" "
                    + "text-anchor=\"end\">\(Self.label(y))</text>"
            }
        }
        axes += "<text x=\"\(margin.left)\" y=\"14\" font-size=\"12\" font-weight=\"bold\">\(title)</text>"
        // The axis units on the second line, left; the legend on the second line, right to left.
        axes += "<text x=\"\(margin.left)\" y=\"28\" font-size=\"10\" fill=\"#555\">x: \(xLabel), y: \(yLabel)</text>"
        var x = width - margin.right
        for entry in legendEntries.reversed() {
            let textWidth = Double(entry.label.count) * 5.6
            x -= textWidth
            axes += "<text x=\"\(Self.n(x))\" y=\"28\" font-size=\"10\">\(entry.label)</text>"
            axes +=
                "<line x1=\"\(Self.n(x - 22))\" x2=\"\(Self.n(x - 4))\" y1=\"25\" y2=\"25\" stroke=\"\(entry.color)\" "
                + "stroke-width=\"\(entry.dashed ? 2 : 3)\"\(entry.dashed ? " stroke-dasharray=\"5 3\"" : "")/>"
            x -= 32
        }
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
            + "viewBox=\"0 0 \(Int(width)) \(Int(height))\" font-family=\"sans-serif\">\(axes)\(annotations)\n"
            + "<g clip-path=\"url(#\(clip))\">\n\(underlay)\(body)</g>\(overlay)</svg>\n"
    }
}
