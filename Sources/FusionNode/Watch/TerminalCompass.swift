#if canImport(Glibc)
    import Glibc
#endif
import CNcurses
import CompassCore
import Pipeline

/// The full-screen view: a compass dial with the heading needle and the 95 % accuracy as a cone,
/// the heading in degrees with its 16-point name, the state in words, field and message rate. ncurses
/// does the terminal (capabilities, resize, restoring the screen); this only decides what goes where.
final class TerminalCompass {
    private(set) var open = false

    func start() {
        setlocale(LC_ALL, "")
        initscr()
        cbreak()
        noecho()
        keypad(gc_screen(), true)
        wtimeout(gc_screen(), 100)
        curs_set(0)
        if has_colors() {
            start_color()
            use_default_colors()
            init_pair(1, Int16(COLOR_GREEN), -1)
            init_pair(2, Int16(COLOR_YELLOW), -1)
            init_pair(3, Int16(COLOR_RED), -1)
        }
        open = true
    }

    /// Restores the terminal (also after Ctrl-C: the caller's loop ends and calls this).
    func stop() {
        guard open else { return }
        open = false
        endwin()
    }

    /// A key pressed within the last 100 ms, or nil.
    func key() -> Int32? {
        let k = wgetch(gc_screen())
        return k == ERR ? nil : k
    }

    /// `text` at row y, column x, cut at the screen's edge.
    func put(_ y: Int32, _ x: Int32, _ text: String, attributes: UInt32 = 0) {
        guard y >= 0, x >= 0, y < getmaxy(gc_screen()), x < getmaxx(gc_screen()) else { return }
        if attributes != 0 { wattr_on(gc_screen(), attributes, nil) }
        wmove(gc_screen(), y, x)
        waddnstr(gc_screen(), text, Int32(min(text.utf8.count, Int(getmaxx(gc_screen()) - x))))
        if attributes != 0 { wattr_off(gc_screen(), attributes, nil) }
    }

    static let bold: UInt32 = 1 << 21
    static func color(_ pair: UInt32) -> UInt32 { pair << 8 }

    /// Where the dial and the text go on a screen of this size. The text column keeps at least
    /// `minimumTextColumns` (80x24: a dial of radius 8 and 39 columns of text); on a screen too small
    /// for both the dial goes and the text takes the whole width.
    struct Layout: Equatable {
        static let minimumTextColumns: Int32 = 38
        var radius: Int32
        var textX: Int32
        var textWidth: Int32

        init(rows: Int32, columns: Int32) {
            let fit = min(rows / 2 - 2, (columns - Self.minimumTextColumns - 8) / 4)
            radius = fit >= 3 ? fit : 0
            textX = radius > 0 ? 4 * radius + 8 : 1
            textWidth = max(1, columns - textX - 1)
        }
    }

    /// Words wrapped to `width` columns; a word longer than a line is cut.
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ") {
            let word = String(word.prefix(width))
            if current.isEmpty {
                current = word
            } else if current.count + 1 + word.count <= width {
                current += " " + word
            } else {
                lines.append(current)
                current = word
            }
        }
        if !current.isEmpty { lines.append(current) }
        return lines
    }

    func draw(_ r: CompassReadout, at now: Double, frozen: Bool) {
        werase(gc_screen())
        let rows = getmaxy(gc_screen()), cols = getmaxx(gc_screen())
        let stale = r.isStale(at: now) || r.ended
        let layout = Layout(rows: rows, columns: cols)
        let shown = r.shown
        if layout.radius > 0 { drawDial(r, shown: shown, radius: layout.radius, stale: stale) }
        // The text on the right (or alone), wrapped to its column; what does not fit is left out from the
        // bottom, above the key line.
        let x = layout.textX
        let lastTextRow = rows - 2
        var y: Int32 = min(1, rows - 1)
        func line(_ text: String, _ attributes: UInt32 = 0) {
            for part in Self.wrap(text, width: Int(layout.textWidth)) where y <= lastTextRow {
                put(y, x, part, attributes: attributes)
                y += 1
            }
        }
        func gap() { if rows >= 20 { y += 1 } }
        line("GyroCompass", Self.bold)
        gap()
        if let s = shown {
            let name = CardinalDirection.name(forHeadingDegrees: s.degrees) ?? "-"
            line("heading \(format(s.degrees, 1)) deg  \(name)", Self.bold | (stale ? Self.color(3) : 0))
            line(s.kind)
            if let acc = r.heading?.headingAccuracy {
                line(acc.isFinite ? "95 % accuracy +-\(format(acc, 1)) deg" : "accuracy not known yet")
            }
        } else {
            line("no heading yet", Self.bold)
        }
        if let problem = r.trueNorthProblem { line(problem, Self.color(2)) }
        if let rate = r.turnRate(at: now) { line("turning \(format(rate, 1)) deg/s") }
        gap()
        for state in r.stateLines(at: now) {
            let alarm = state.hasPrefix("STALE") || state.hasPrefix("ENDED") || state.hasPrefix("magnetic")
            line(state, alarm ? Self.color(3) | Self.bold : 0)
        }
        gap()
        if let field = r.fieldLine { line(field) }
        let age = r.lastArrival.map { format(now - $0, 2) + " s ago" } ?? "never"
        line("\(r.messageRate(at: now)) msg/s, newest \(age)")
        if frozen { line("FROZEN (space resumes)", Self.bold | Self.color(2)) }
        let keys =
            cols >= 64 ? "q quit  t true/magnetic  z zero here  Z clear zero  space freeze" : "q t z Z space"
        put(rows - 1, 0, keys)
        wrefresh(gc_screen())
    }

    /// The dial on the left: a circle (cells are about twice as tall as wide), N at the top, the
    /// accuracy cone on the rim and the heading needle.
    private func drawDial(_ r: CompassReadout, shown: (degrees: Double, kind: String)?, radius: Int32, stale: Bool) {
        let cy = radius + 1, cx = 2 * radius + 2
        func cell(_ distance: Double, _ degrees: Double) -> (Int32, Int32) {
            let a = degrees * radiansPerDegree
            return (cy - Int32((distance * cos(a)).rounded()), cx + Int32((2 * distance * sin(a)).rounded()))
        }
        for step in stride(from: 0.0, to: 360.0, by: 3.0) {
            let (y, x) = cell(Double(radius), step)
            put(y, x, ".")
        }
        for (label, angle) in [("N", 0.0), ("E", 90.0), ("S", 180.0), ("W", 270.0)] {
            let (y, x) = cell(Double(radius + 1), angle)
            put(y, x, label, attributes: Self.bold)
        }
        if let s = shown {
            if let acc = r.heading?.headingAccuracy, acc.isFinite {
                let half = min(acc, 180)
                for d in stride(from: -half, through: half, by: 2.0) {
                    let (y, x) = cell(Double(radius), s.degrees + d)
                    put(y, x, "*", attributes: Self.color(2))
                }
            }
            for k in 1..<Int(radius) {
                let (y, x) = cell(Double(k), s.degrees)
                put(y, x, "#", attributes: stale ? 0 : Self.color(1) | Self.bold)
            }
        }
        put(cy, cx, "+")
    }
}
