import MessageBus
import WireFormat

/// Thrown inside the recomputed source once the live input can take over.
private struct CaughtUp: Error {}

extension InputReader {
    /// A restarted stage whose input is reproducible rebuilds what it had read before it was killed:
    /// the stages from the source to its input run here, unpaced, and their frames go through this
    /// stage as if they had arrived, until the recomputation reaches the first frame the live input
    /// sends; the live input goes on from there (frames read twice are dropped by number). So the
    /// stage's state, and every frame it publishes, are those of an uninterrupted run: it publishes
    /// again from its first frame, and its readers drop the frames they already have.
    mutating func recompute(from chain: [StageConfig], _ publisher: inout Publisher, _ report: inout StageReport)
        throws
    {
        let quiet: @Sendable (String) -> Void = { _ in }
        guard let source = try chain.first?.makeLogic(log: quiet, stop: publisher.stop) as? SourceLogic else {
            throw StageFailure("cannot recompute the input: '\(chain.first?.name ?? "?")' is not a source")
        }
        let upstream = try chain.dropFirst().map { stage in
            guard let logic = try stage.makeLogic(log: quiet, stop: publisher.stop) as? TransformLogic else {
                throw StageFailure("cannot recompute the input: '\(stage.name)' is not a transform")
            }
            return logic
        }
        let started = Clocks.monotonicSeconds()
        var produced: UInt64 = 0
        var liveStart: UInt64?
        var next: [WireFrame] = []

        /// Frames of the stage at `index` in `upstream` (or of the source, -1) through the rest.
        func downstream(of index: Int, _ frames: [WireFrame]) throws -> [WireFrame] {
            var stream = frames
            for t in upstream[(index + 1)...] {
                next.removeAll(keepingCapacity: true)
                for frame in stream {
                    do { try t.process(frame, into: &next) } catch is UnexpectedFrame {}
                }
                swap(&stream, &next)
            }
            return stream
        }

        func read(_ frames: [WireFrame]) throws {
            for frame in frames {
                produced += 1
                try process(frame, from: 0, &report)
                if outgoing.count >= Publisher.maximumBatchFrames { try flush(&publisher, &report) }
            }
            try flush(&publisher, &report)
        }

        do {
            try source.run { frames in
                try read(try downstream(of: -1, frames))
                if liveStart == nil, let message = try inputs[0].receiveMessage(timeoutMilliseconds: 0) {
                    pending = (message, 0)
                    // An end of stream, unnumbered: the input had ended; recompute all of it.
                    liveStart = WireFrame.sequence(of: UnsafeRawBufferPointer(message.bytes))?.first ?? .max
                }
                if let s = liveStart, produced >= s { throw CaughtUp() }
                if publisher.stop.requested { throw StopRequested() }
                return 0
            }
            // The whole input recomputed: what the stages upstream publish when they finish, too.
            for index in upstream.indices {
                try upstream[index].finish { try read(try downstream(of: index, $0)) }
            }
        } catch is CaughtUp {}
        sequences[0].expect(produced)
        report.notes.append(
            "restarted: recomputed \(produced) frame(s) of '\(names[0])' from '\(chain[0].name)' in "
                + "\(format(Clocks.monotonicSeconds() - started, 2)) s, then read on")
    }

    /// What the sequence numbers showed, for the report.
    func sequenceNotes() -> [String] {
        var notes: [String] = []
        for (i, (name, s)) in zip(names, sequences).enumerated() {
            if s.missing > 0 {
                let topics = topicSequences[i].missingByTopic.map { "\($0.topic) \($0.frames)" }
                notes.append(
                    "missing \(s.missing) frame(s) from '\(name)' in \(s.gaps) gap(s)"
                        + (topics.isEmpty ? "" : " (by topic: \(topics.joined(separator: ", ")))"))
            }
            if s.duplicates > 0 {
                notes.append(
                    "dropped \(s.duplicates) frame(s) from '\(name)' already read (sent again after a restart)")
            }
            if s.restarts > 0 {
                notes.append(
                    "'\(name)' numbered its frames from the start again \(s.restarts) time(s) (a restarted stage of a "
                        + "live stream): what it held when it stopped is lost")
            }
        }
        return notes + recoveryNotes()
    }

    /// Frames known to be missing, and live restarts (each lost an unknown number).
    var sequenceLosses: Int { sequences.reduce(0) { $0 + Int(clamping: $1.missing) + $1.restarts } }
}
