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

    private func put(_ y: Int32, _ x: Int32, _ text: String, attributes: UInt32 = 0) {
        guard y >= 0, x >= 0, y < getmaxy(gc_screen()), x < getmaxx(gc_screen()) else { return }
        if attributes != 0 { wattr_on(gc_screen(), attributes, nil) }
        wmove(gc_screen(), y, x)
        waddnstr(gc_screen(), text, Int32(min(text.utf8.count, Int(getmaxx(gc_screen()) - x))))
        if attributes != 0 { wattr_off(gc_screen(), attributes, nil) }
    }

    static let bold: UInt32 = 1 << 21
    static func color(_ pair: UInt32) -> UInt32 { pair << 8 }

    func draw(_ r: CompassReadout, at now: Double, frozen: Bool) {
        werase(gc_screen())
        let rows = getmaxy(gc_screen()), cols = getmaxx(gc_screen())
        let stale = r.isStale(at: now)
        // The dial on the left: a circle (cells are about twice as tall as wide), N at the top.
        let radius = max(3, min(Int32(rows) / 2 - 2, (cols - 44) / 4))
        let cy = radius + 1, cx = 2 * radius + 2
        for step in stride(from: 0.0, to: 360.0, by: 3.0) {
            let a = step * radiansPerDegree
            put(
                cy - Int32((Double(radius) * cos(a)).rounded()), cx + Int32((2 * Double(radius) * sin(a)).rounded()),
                ".")
        }
        for (label, angle) in [("N", 0.0), ("E", 90.0), ("S", 180.0), ("W", 270.0)] {
            let a = angle * radiansPerDegree
            put(
                cy - Int32((Double(radius + 1) * cos(a)).rounded()),
                cx + Int32((2 * Double(radius + 1) * sin(a)).rounded()),
                label, attributes: Self.bold)
        }
        let shown = r.shown
        if let s = shown {
            // The accuracy cone on the rim, then the needle.
            if let acc = r.heading?.headingAccuracy, acc.isFinite {
                let half = min(acc, 180)
                for d in stride(from: -half, through: half, by: 2.0) {
                    let a = (s.degrees + d) * radiansPerDegree
                    put(
                        cy - Int32((Double(radius) * cos(a)).rounded()),
                        cx + Int32((2 * Double(radius) * sin(a)).rounded()),
                        "*", attributes: Self.color(2))
                }
            }
            let a = s.degrees * radiansPerDegree
            for k in 1..<Int(radius) {
                let f = Double(k)
                put(
                    cy - Int32((f * cos(a)).rounded()), cx + Int32((2 * f * sin(a)).rounded()), "#",
                    attributes: stale ? 0 : Self.color(1) | Self.bold)
            }
        }
        put(cy, cx, "+")
        // The text on the right.
        let x = 4 * radius + 8
        var y: Int32 = 1
        func line(_ text: String, _ attributes: UInt32 = 0) {
            put(y, x, text, attributes: attributes)
            y += 1
        }
        line("GyroCompass", Self.bold)
        y += 1
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
        if let rate = r.turnRateDegreesPerSecond { line("turning \(format(rate, 1)) deg/s") }
        y += 1
        for state in r.stateLines(at: now) {
            line(state, state.hasPrefix("STALE") || state.hasPrefix("magnetic") ? Self.color(3) | Self.bold : 0)
        }
        y += 1
        if let field = r.fieldLine { line(field) }
        let age = r.lastArrival.map { format(now - $0, 2) + " s ago" } ?? "never"
        line("\(r.messageRate(at: now)) msg/s, newest \(age)")
        if frozen { line("FROZEN (space resumes)", Self.bold | Self.color(2)) }
        put(rows - 1, 0, "q quit  t true/magnetic  z zero here  Z clear zero  space freeze")
        wrefresh(gc_screen())
    }
}
