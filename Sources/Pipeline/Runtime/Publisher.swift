import MessageBus

/// The stage's output socket (see `BusSocket.readerFollowingPublisher`), with a bind failure named
/// after the stage.
func readerFollowingPublisher(
    _ context: BusContext, endpoint: String, highWaterMark: Int32, stage: String, curve: CurveKeyPair? = nil
) throws -> BusSocket {
    do {
        return try BusSocket.readerFollowingPublisher(
            context, endpoint: endpoint, highWaterMark: highWaterMark, curve: curve)
    } catch {
        throw PipelineRunError.cannotBind(stage: stage, endpoint: endpoint, reason: "\(error)")
    }
}

extension ReaderCount {
    /// Waits until `wanted` readers are connected or `stop` is requested (see `wait(_:for:...)`).
    mutating func wait(
        _ socket: BusSocket, for wanted: Int, logEveryPolls: Int, stop: StopToken, _ waiting: (Int) -> Void
    ) throws {
        try wait(socket, for: wanted, logEveryPolls: logEveryPolls, stopRequested: { stop.requested }, waiting)
    }
}

/// Publishes frames with back-pressure: several frames go out as one bus message (a batch), at most
/// `maximumBatchFrames` frames or about `maximumBatchBytes` bytes each, far below the frame limit.
struct Publisher {
    let socket: BusSocket?
    let stage: String
    /// The run's stop request: waiting for readers ends with it.
    let stop: StopToken
    /// The stages reading this one, and how long to wait for them to connect before failing.
    let readerNames: [String]
    var expectedReaders: Int { readerNames.count }
    /// The expected readers connected: each subscribes to everything and to its mark, and only the
    /// marks are counted, so a stray subscriber (an `echo` on the endpoint) neither starts nor un-pauses
    /// a stage that waits for its real readers.
    /// Counted without building an array: a pausing source asks before every frame it publishes.
    var connectedReaders: Int {
        var count = 0
        for mark in readerMarks where readers.subscriptions(to: mark) > 0 { count += 1 }
        return count
    }
    /// `readerMark(of:)` of each reader, in the order of `readerNames` (asked for every batch a pausing
    /// source publishes: made once).
    let readerMarks: [[UInt8]]
    /// The readers not connected.
    var missingReaders: [String] {
        zip(readerNames, readerMarks).filter { readers.subscriptions(to: $0.1) == 0 }.map(\.0)
    }

    /// The extra subscription a pipeline stage makes to each of its inputs: it names the stage. It
    /// changes nothing the reader receives (its subscription to everything already matches every
    /// message); it tells the publisher who is reading.
    static func readerMark(of stage: String) -> [UInt8] { [0] + Array("gyrocompass reader \(stage)".utf8) }
    let readerTimeoutSeconds: Double
    let endpoint: String
    let log: @Sendable (String) -> Void
    private(set) var readers = ReaderCount()
    private(set) var pauses = 0
    private(set) var pausedSeconds = 0.0
    /// The number the next data frame gets (see `InputSequence`), and each topic's own counter.
    private(set) var nextSequence: UInt64 = 0
    private var topicNumbers = TopicNumbering()
    /// How numbered batches are packed (the pipeline's `compression` for this endpoint).
    let compression: FrameCompression
    /// Where a live stream's publisher keeps what it sent, for readers that missed it (nil: nothing kept).
    let retained: RetransmitBuffer?
    /// Reused buffers for compression: the plain batch, and LZ4's worst-case output.
    private var plainScratch: [UInt8] = []
    private var packedScratch: [UInt8] = []
    static let maximumBatchFrames = 256
    static let maximumBatchBytes = 1 << 20

    init(
        socket: BusSocket?, stage: String, readers: [String],
        readerTimeoutSeconds: Double = PipelineConfig.defaultReaderTimeoutSeconds, endpoint: String,
        compression: FrameCompression = .none, retained: RetransmitBuffer? = nil, stop: StopToken,
        log: @escaping @Sendable (String) -> Void
    ) {
        self.stop = stop
        self.socket = socket
        self.retained = retained
        self.compression = compression
        self.stage = stage
        self.readerNames = readers
        readerMarks = readers.map(Self.readerMark(of:))
        self.readerTimeoutSeconds = readerTimeoutSeconds
        self.endpoint = endpoint
        self.log = log
    }

    /// When subscriptions were last read (coarse monotonic seconds).
    private var lastSubscriptionCheck = -Double.infinity

    /// Reads the subscriptions that arrived, at most once a millisecond (a look when nothing came
    /// costs libzmq a system call): a connection over its subscription cap is found, and cut, only
    /// when they are read, so a publisher that never waits for its readers still looks.
    private mutating func readSubscriptionsNowAndThen() throws {
        let now = Clocks.coarseMonotonicSeconds()
        guard now - lastSubscriptionCheck >= 0.001 else { return }
        lastSubscriptionCheck = now
        try readSubscriptions(timeoutMilliseconds: 0)
    }

    /// Counts the (un)subscription messages that arrived (see `ReaderCount.read`).
    @discardableResult
    mutating func readSubscriptions(timeoutMilliseconds: Int32) throws -> Bool {
        guard let socket else { return false }
        defer { logReaderNotices() }
        return try readers.read(socket, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// Logs what the reader count noticed (a connection at its subscription cap).
    private mutating func logReaderNotices() {
        for notice in readers.takeNotices() { log("\(stage): \(endpoint): \(notice)") }
    }

    /// Holds the stage until every expected reader is connected (or a stop is requested): at start,
    /// so nothing is published into the void, and, `pausing`, whenever a reader has gone. Returns
    /// the seconds waited; throws, naming the readers and the endpoint, after `readerTimeoutSeconds`.
    @discardableResult
    mutating func waitForReaders(pausing: Bool) throws -> Double {
        guard let socket else { return 0 }
        defer { logReaderNotices() }
        try readers.read(socket, timeoutMilliseconds: 0)
        guard connectedReaders < expectedReaders, !stop.requested else { return 0 }
        let started = Clocks.monotonicSeconds()
        if pausing {
            pauses += 1
            log("\(stage): paused: \(connectedReaders) of \(expectedReaders) reader(s) connected on \(endpoint)")
        }
        let deadline = started + readerTimeoutSeconds
        var quietPolls = 0
        while connectedReaders < expectedReaders && !stop.requested
            && Clocks.monotonicSeconds() < deadline
        {
            if try !readers.read(socket, timeoutMilliseconds: 500) {
                quietPolls += 1
                if quietPolls % 10 == 0 {
                    let missing = missingReaders
                    log(
                        "\(stage): waiting for \(missing.joined(separator: ", ")) to connect to \(endpoint) "
                            + "(\(connectedReaders) of \(expectedReaders) reader(s) connected); giving up "
                            + "\(format(readerTimeoutSeconds, 0)) s after it began")
                }
            }
            logReaderNotices()
        }
        let seconds = Clocks.monotonicSeconds() - started
        if connectedReaders < expectedReaders && !stop.requested {
            let missing = missingReaders
            throw StageFailure(
                "\(missing.joined(separator: ", ")) did not connect to \(endpoint) within "
                    + "\(format(readerTimeoutSeconds, 0)) s (top-level reader_timeout_s): is the process running "
                    + "\(missing.count == 1 ? "that stage" : "each of them") started, with this pipeline file?")
        }
        if pausing {
            pausedSeconds += seconds
            log("\(stage): resumed after \(format(seconds, 2)) s")
        }
        return seconds
    }

    /// Publishes data frames, numbered (`counted`), or a control frame (the end of stream), which
    /// travels alone and unnumbered.
    mutating func publish(_ frames: [WireFrame], report: inout StageReport, counted: Bool = true) throws {
        guard socket != nil, !frames.isEmpty else { return }
        try readSubscriptionsNowAndThen()
        var start = 0
        while start < frames.count {
            var end = start, bytes = 0
            frames.withUnsafeBufferPointer { all in  // borrowed: no copy per frame
                while end < all.count && end - start < Self.maximumBatchFrames
                    && (bytes < Self.maximumBatchBytes || end == start)
                {
                    bytes += all[end].payload.count + 64
                    end += 1
                }
            }
            let slice = frames[start..<end]
            if let socket {
                let message: BusMessage
                let numbers = counted ? BatchNumbers(first: nextSequence, census: topicNumbers.census(of: slice)) : nil
                if let numbers, compression == .lz4 {
                    let size = WireFrame.encodedSize(slice, numbers: numbers)
                    if plainScratch.count < size { plainScratch = [UInt8](repeating: 0, count: size) }
                    message = try plainScratch.withUnsafeMutableBytes { plain in
                        let batch = UnsafeMutableRawBufferPointer(rebasing: plain[0..<size])
                        WireFrame.encode(slice, into: batch, numbers: numbers)
                        return try WireFrame.compressed(
                            sequenced: UnsafeRawBufferPointer(batch), numbers: numbers, scratch: &packedScratch)
                    }
                } else {
                    message = try BusMessage(size: WireFrame.encodedSize(slice, numbers: numbers))
                    WireFrame.encode(slice, into: message.bytes, numbers: numbers)
                }
                if counted { retained?.keep(message) }
                while try !socket.send(message, blocking: false) {
                    if try waitForRoom(counted: counted) { return }
                }
            }
            if counted {
                report.published += slice.count
                nextSequence += UInt64(slice.count)
            }
            start = end
        }
    }

    /// Passes on a received bus message of `frames` data frames as it is, numbered as this stage's
    /// output (no copy unless other readers share it). A message without numbers, or one that came
    /// compressed (its numbers sit beside an LZ4 block this publisher would have to pack again), is
    /// sent again as a numbered batch of its frames.
    mutating func forward(_ message: BusMessage, frames: Int, report: inout StageReport) throws {
        guard let socket else { return }
        try readSubscriptionsNowAndThen()
        guard !WireFrame.isCompressed(UnsafeRawBufferPointer(message.bytes)),
            WireFrame.sequence(of: UnsafeRawBufferPointer(message.bytes))?.count == frames,
            let census = WireFrame.census(of: UnsafeRawBufferPointer(message.bytes))
        else {
            try publish(try WireFrame.frames(in: message.array), report: &report)
            return
        }
        let numbers = BatchNumbers(first: nextSequence, census: topicNumbers.renumbered(census))
        let owned: BusMessage
        if compression == .lz4 {
            owned = try WireFrame.compressed(
                sequenced: UnsafeRawBufferPointer(message.bytes), numbers: numbers, scratch: &packedScratch)
        } else {
            owned = message.isShared ? try message.unsharedCopy() : message
            WireFrame.renumber(owned.bytes, numbers: numbers)
        }
        retained?.keep(owned)
        while try !socket.send(owned, blocking: false) {
            if try waitForRoom(counted: true) { return }
        }
        report.published += frames
        nextSequence += UInt64(frames)
    }

    /// The slowest subscriber's queue is full: waits for room, draining subscription messages. True
    /// when the send should be given up (an uncounted message while stopping).
    mutating func waitForRoom(counted: Bool) throws -> Bool {
        try readSubscriptions(timeoutMilliseconds: 1)
        return stop.requested && !counted
    }
}
