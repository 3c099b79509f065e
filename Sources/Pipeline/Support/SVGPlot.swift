import Foundation

/// Small, dependency-free SVG plots for the replay report: time series drawn as at most one minimum
/// and one maximum per pixel column (spikes stay visible, a one-hour bag stays a few thousand points),
/// bands, shaded spans and scatter plots.
struct SVGPlot {
    let width = 960.0, height: Double
    var margin = (left: 56.0, right: 12.0, top: 22.0, bottom: 26.0)
    var xRange: ClosedRange<Double>
    var yRange: ClosedRange<Double>
    var body = ""

    init(height: Double = 240, x: ClosedRange<Double>, y: ClosedRange<Double>) {
        self.height = height
        xRange = x.lowerBound < x.upperBound ? x : x.lowerBound...(x.lowerBound + 1)
        yRange = y.lowerBound < y.upperBound ? y : (y.lowerBound - 1)...(y.upperBound + 1)
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

    /// Per pixel column, the first, minimum, maximum and last value: the drawn line keeps every spike.
    func decimated(_ t: [Double], _ v: [Double]) -> [(Double, Double)] {
        var out: [(Double, Double)] = []
        var column = -1, lo = 0.0, hi = 0.0, loT = 0.0, hiT = 0.0
        func flush() {
            guard column >= 0 else { return }
            if loT <= hiT { out += [(loT, lo), (hiT, hi)] } else { out += [(hiT, hi), (loT, lo)] }
        }
        for i in t.indices where v[i].isFinite {
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

    /// A line; breaks where values jump by more than `wrap` (a heading crossing 0/360).
    mutating func line(_ t: [Double], _ v: [Double], color: String, id: String, wrap: Double? = nil) {
        var d = "", previous: Double?
        for (x, y) in decimated(t, v) {
            let jump = wrap.map { w in previous.map { abs(y - $0) > w } ?? true } ?? (previous == nil)
            d += (jump ? "M" : "L") + Self.n(px(x)) + "," + Self.n(py(y))
            previous = y
        }
        body += "<path id=\"\(id)\" d=\"\(d)\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"1.2\"/>\n"
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

    /// Shaded time spans (a flag being set), in one row of the plot's height band.
    mutating func spans(_ spans: [(Double, Double)], color: String, label: String, row: Int, rows: Int, id: String) {
        let h = plotHeight / Double(rows), y = margin.top + Double(row) * h
        body += "<g id=\"\(id)\"><text x=\"4\" y=\"\(Self.n(y + h * 0.7))\" font-size=\"10\">\(label)</text>"
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

    mutating func horizontal(_ y: Double, color: String) {
        body +=
            "<line x1=\"\(Self.n(margin.left))\" x2=\"\(Self.n(width - margin.right))\" y1=\"\(Self.n(py(y)))\" "
            + "y2=\"\(Self.n(py(y)))\" stroke=\"\(color)\" stroke-dasharray=\"5 4\"/>\n"
    }

    /// The finished plot with axes, ticks and a title.
    func svg(title: String, xLabel: String, yLabel: String, yTicks: Bool = true) -> String {
        var axes =
            "<rect x=\"\(margin.left)\" y=\"\(margin.top)\" width=\"\(Self.n(plotWidth))\" "
            + "height=\"\(Self.n(plotHeight))\" "
            + "fill=\"none\" stroke=\"#999\"/>"
        for k in 0...5 {
            let x = xRange.lowerBound + Double(k) / 5 * (xRange.upperBound - xRange.lowerBound)
            let y = yRange.lowerBound + Double(k) / 5 * (yRange.upperBound - yRange.lowerBound)
            axes +=
                "<text x=\"\(Self.n(px(x)))\" y=\"\(Self.n(height - 8))\" font-size=\"10\" "
                + "text-anchor=\"middle\">\(Self.n(x))</text>"
            if yTicks {
                axes +=
                    "<text x=\"\(Self.n(margin.left - 4))\" y=\"\(Self.n(py(y) + 3))\" font-size=\"10\" "
                    + "text-anchor=\"end\">\(Self.n(y))</text>"
            }
        }
        axes += "<text x=\"\(margin.left)\" y=\"14\" font-size=\"12\" font-weight=\"bold\">\(title)</text>"
        axes +=
            "<text x=\"\(Self.n(width - margin.right))\" y=\"14\" font-size=\"10\" text-anchor=\"end\">\(xLabel); "
            + "\(yLabel)</text>"
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
            + "viewBox=\"0 0 \(Int(width)) \(Int(height))\" font-family=\"sans-serif\">\(axes)\n\(body)</svg>\n"
    }
}
