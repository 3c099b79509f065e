import MessageBus

extension InputReader {
    /// Requests to one input's retransmit endpoint that went unanswered in a row before the reader
    /// stops asking it (each waits `RetransmitSettings.replyTimeoutMilliseconds`).
    static let unansweredBeforeGivingUp = 3

    /// A message on `input` skipped the frames `missed`: asks the input's publisher for them and reads
    /// them first, so the stage sees its input whole and in order. What the publisher no longer holds
    /// stays counted as missing.
    mutating func recover(
        _ missed: Range<UInt64>, from input: Int, _ publisher: inout Publisher, _ report: inout StageReport
    ) throws {
        guard let client = retransmitClients[input], unansweredInARow[input] < Self.unansweredBeforeGivingUp else {
            return
        }
        guard
            let reply = try client.request(
                first: missed.lowerBound, end: missed.upperBound,
                timeoutMilliseconds: RetransmitSettings.replyTimeoutMilliseconds)
        else {
            unanswered[input] += 1
            unansweredInARow[input] += 1
            log(
                "\(stage): no answer from \(client.endpoint) for \(missed.count) frame(s) missing from "
                    + "'\(names[input])'"
            )
            return
        }
        unansweredInARow[input] = 0
        recovered[input] += try read(reply, from: input, &publisher, &report)
        recoveries[input] += 1
    }

    /// A restarted sink of a live stream: reads first what each input's publisher still holds (the
    /// last few seconds; the sink drops what its files already have and proves from the overlap that
    /// nothing is missing), then the live stream, whose messages queued from before are dropped as
    /// repeats by number.
    mutating func catchUp(_ publisher: inout Publisher, _ report: inout StageReport) throws {
        for input in inputs.indices {
            guard let client = retransmitClients[input] else { continue }
            guard
                let reply = try client.request(
                    first: Retransmission.everythingHeld, end: .max,
                    timeoutMilliseconds: RetransmitSettings.replyTimeoutMilliseconds)
            else {
                report.notes.append(
                    "restarted: no answer from \(client.endpoint), the retransmit endpoint of "
                        + "'\(names[input])'; joined the live stream")
                continue
            }
            let frames = try read(reply, from: input, &publisher, &report)
            try flush(&publisher, &report)
            sequences[input].expectRepeats()
            report.notes.append(
                "restarted: read the \(frames) frame(s) '\(names[input])' still held (\(reply.messages.count) bus "
                    + "message(s) from \(client.endpoint)), then read on")
        }
    }

    /// Reads the messages of a reply as if they had arrived on `input`; returns their frames.
    private mutating func read(
        _ reply: RetransmitClient.Reply, from input: Int, _ publisher: inout Publisher, _ report: inout StageReport
    ) throws -> UInt64 {
        recovering = true
        defer { recovering = false }
        var frames: UInt64 = 0
        for bytes in reply.messages {
            frames += UInt64(WireFrame.sequence(of: bytes)?.count ?? 0)
            try handle(try BusMessage(copying: bytes), from: input, &publisher, &report)
        }
        return frames
    }

    /// What retransmission recovered, for the report.
    func recoveryNotes() -> [String] {
        inputs.indices.compactMap { i in
            var parts: [String] = []
            if recovered[i] > 0 {
                parts.append(
                    "recovered \(recovered[i]) frame(s) '\(names[i])' had skipped, in \(recoveries[i]) "
                        + "retransmission(s)"
                )
            }
            if unanswered[i] > 0 {
                parts.append("\(unanswered[i]) retransmit request(s) to '\(names[i])' went unanswered")
            }
            return parts.isEmpty ? nil : parts.joined(separator: "; ")
        }
    }
}
