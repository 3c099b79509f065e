import WireFormat

/// Where a file sink's killed predecessor stopped on a live stream: the time of its last row or
/// message. A restarted sink first reads again what its input still holds (the retransmit buffer's
/// last seconds): what is at or before that time is already written and dropped, and the first one
/// offered tells whether the stream reached back to it (nothing missing in between) or starts after
/// it (some may be lost: the restart took longer than the buffer holds).
struct ResumePoint {
    /// What was resumed ("/tmp/x.csv", "/tmp/run.mcap, topic heading") and what it holds ("row").
    let what: String
    let unit: String
    /// The last one's stamp; nil when the killed sink wrote none (nothing to prove against).
    let last: RosTime?
    private(set) var dropped = 0
    /// Whether the first one offered was at or before `last`; nil until one is offered.
    private(set) var overlapped: Bool?
    private(set) var firstNew: RosTime?

    /// "sec.nanosec" in a CSV row's first column (as `stampText` writes it).
    static func stamp(ofRow row: String) -> RosTime? {
        let field = row.prefix { $0 != "," }
        let parts = field.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1].count == 9, let sec = Int32(parts[0]), let ns = UInt32(parts[1]) else {
            return nil
        }
        return RosTime(sec: sec, nanosec: ns)
    }

    /// True for one already written (to drop); the first one offered decides the overlap.
    mutating func isWritten(_ t: RosTime) -> Bool {
        let written = last.map { (t.sec, t.nanosec) <= ($0.sec, $0.nanosec) } ?? false
        if overlapped == nil { overlapped = written }
        if written { dropped += 1 } else if firstNew == nil { firstNew = t }
        return written
    }

    /// Nothing is missing: the stream read again reached back to the last one (or nothing came).
    var provenWhole: Bool { overlapped == true || firstNew == nil }

    var summary: String {
        if provenWhole {
            return "\(what): \(dropped) \(unit)(s) read again were already written; the stream reached back to the "
                + "last \(unit): nothing missing"
        }
        let after = last.map { "after its last \(unit) at \(stampText($0))" } ?? "with no \(unit) written before"
        return "\(what): resumed \(after), but the stream read again starts at \(stampText(firstNew!)): \(unit)s in "
            + "between may be lost (the restart took longer than the retransmit buffer holds)"
    }
}
