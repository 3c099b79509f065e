#if canImport(Glibc)
    import Glibc
#endif
import MessageBus
import Pipeline
import WireFormat

/// `fusion-node watch [ENDPOINT]`: a live compass in the terminal, from a running pipeline's
/// publisher; one line per change instead when stdout is not a terminal (or with --plain).
enum WatchCommand {
    static let defaultEndpoint = "tcp://127.0.0.1:5600"

    static let help = CommandHelp(
        path: "watch",
        summary: "A live compass in the terminal: dial, heading, accuracy cone, state, field, message rate.",
        positionals: "[ENDPOINT]",
        options: [
            OptionHelp("--plain", nil, "one text line per change instead of the full-screen view"),
            OptionHelp("--server-key", "FILE", "the publisher's CURVE public key (its server_key NAME.key)"),
            OptionHelp("--key", "NAME", "this client's CURVE pair NAME.key / NAME.key_secret"),
        ],
        details: """
            ENDPOINT defaults to \(defaultEndpoint), where Pipelines/default.yaml publishes heading, imu/data
            (the rate of turn), calibration/status and interference/status, in CDR. Keys: q quit, t
            true/magnetic, z "this direction is zero" (a relative heading), Z clear it, space freeze. The view
            names the endpoint while it waits, says STALE when nothing arrived for 1 s and ENDED when the
            publisher ended its stream. Without a terminal (or with --plain) it prints one line whenever what
            it shows changes, and exits 0 at the end of the stream.
            fusion-node --watch runs the built-in simulator pipeline straight into this view.
            """,
        examples: [
            "fusion-node watch", "fusion-node watch tcp://robot.local:5600 --server-key server.key --key laptop",
        ])

    static func run(_ args: [String]) throws -> ExitCode {
        let a = try Arguments(args, help)
        try a.requirePositionals(0...1)
        let endpoint = a.positionals.first ?? defaultEndpoint
        if let problem = BusEndpoint.problem(endpoint) { throw UsageError(message: problem, command: help.path) }
        let stop = StopToken().handleSignals()
        let context = BusContext()
        let socket = try subscriber(context, endpoint: endpoint, a)
        return try view(socket, endpoint: endpoint, plain: a.has("--plain") || isatty(1) != 1, stop: stop)
    }

    /// A subscriber to everything the view reads, with CURVE keys when given.
    static func subscriber(_ context: BusContext, endpoint: String, _ a: Arguments?) throws -> BusSocket {
        let socket = try BusSocket(context, .sub)
        for topic in [
            PipelineTopics.heading, PipelineTopics.imuFused, PipelineTopics.calibrationStatus,
            PipelineTopics.interferenceStatus,
        ] {
            try socket.subscribe(Array(topic.utf8) + [0])
        }
        // Every other magnetometer's interference/status/NAME: a prefix without the terminator.
        try socket.subscribe(Array((PipelineTopics.interferenceStatus + "/").utf8))
        // A view has nothing to deliver: q must not wait for subscriptions queued to an absent publisher.
        try socket.setOption(lingerMilliseconds: 0)
        try a?.applyCurveClientKeys(to: socket)
        try socket.connect(endpoint)
        return socket
    }

    /// How long the terminal view stays after the publisher's end of stream.
    static let endedViewSeconds = 2.0

    /// Runs the view until q, Ctrl-C, SIGHUP or the publisher's end of stream (the terminal view 2 s
    /// after it, leaving the last line on the terminal).
    static func view(_ socket: BusSocket, endpoint: String, plain: Bool, stop: StopToken) throws -> ExitCode {
        var readout = CompassReadout()
        readout.endpoint = endpoint
        // Frozen, the view is drawn as it was at the freeze: the stream is not stale, the view is held.
        var frozenAt: Double?
        var frozen: Bool { frozenAt != nil }
        var lastPlain = ""
        let screen = plain ? nil : TerminalCompass()
        screen?.start()
        defer { screen?.stop() }
        var lastDraw = 0.0
        var endedAt: Double?
        while !stop.requested {
            // Everything queued, then the keys (the screen's getch waits up to 100 ms).
            // At most 100 ms of messages per pass, so a key is read at least every ~0.2 s however fast
            // the stream is.
            let passStart = Clocks.monotonicSeconds()
            while let bytes = try socket.receive(timeoutMilliseconds: screen == nil ? 100 : 0) {
                guard let frame = try? WireFrame.decode(bytes) else { continue }
                if frame.isEndOfStream {
                    if frame.topic == PipelineTopics.heading { readout.ended = true }
                    continue
                }
                if !frozen { readout.receive(frame, at: Clocks.monotonicSeconds()) }
                if screen == nil || Clocks.monotonicSeconds() - passStart > 0.1 { break }
            }
            let now = Clocks.monotonicSeconds()
            if let screen {
                if let key = screen.key() {
                    switch key {
                    case Int32(UInt8(ascii: "q")): return .complete
                    case Int32(UInt8(ascii: "t")): readout.showTrue.toggle()
                    case Int32(UInt8(ascii: "z")):
                        readout.zeroOffsetDegrees = nil
                        readout.zeroOffsetDegrees = readout.shown?.degrees
                    case Int32(UInt8(ascii: "Z")): readout.zeroOffsetDegrees = nil
                    case Int32(UInt8(ascii: " ")): frozenAt = frozenAt == nil ? now : nil
                    default: break
                    }
                    lastDraw = 0
                }
                if now - lastDraw >= 0.1 {
                    screen.draw(readout, at: frozenAt ?? now, frozen: frozen)
                    lastDraw = now
                }
                // The stream ended: its last view stays 2 s, then the terminal gets its last line.
                if readout.ended {
                    endedAt = endedAt ?? now
                    if now - endedAt! >= Self.endedViewSeconds {
                        screen.stop()
                        print(readout.plainLine(at: now))
                        return .complete
                    }
                }
            } else {
                let text = readout.plainLine(at: now)
                if text != lastPlain {
                    print(text)
                    fflush(nil)
                    lastPlain = text
                }
                if readout.ended { return .complete }
            }
        }
        return .interrupted
    }
}
