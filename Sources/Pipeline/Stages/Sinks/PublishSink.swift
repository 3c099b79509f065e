#if canImport(Glibc)
    import Glibc
#endif
import CompassCore
import WireFormat
import MessageBus

/// Publishes topics to external subscribers on their own endpoint, one frame per message, in CDR or
/// JSON. A subscriber that falls behind never holds the pipeline by default (`on_slow: drop`: a
/// message its full queue cannot take is dropped for it, counted); `on_slow: block` is lossless
/// (back-pressure reaches the source); `latest_only` keeps just the newest message for a slow
/// subscriber and counts what it replaced. It follows the subscriptions (XPUB, verbose both ways): a
/// message offered while nobody subscribes is not sent and is counted as such, so "published" only
/// counts messages a subscriber could receive.
final class PublishSink: StageLogic, SinkLogic, InPlaceTransform, @unchecked Sendable {

    static let type = StageType(
        name: "publish", role: .sink,
        summary: "messages for external subscribers (pyzmq, fusion-node echo) on their own endpoint",
        settings: Settings.table, restart: .joinsLive
    ) { settings, context in
        try PublishSink(
            settings, stage: context.stage, security: context.security, stop: context.stop, log: context.log)
    }

    let settings: Settings
    let socket: BusSocket
    let context: BusContext
    let log: @Sendable (String) -> Void
    let stage: String
    var changeFilters: [String: HeadingChangeFilter] = [:]
    /// latest_only: the newest message of each topic not sent yet, in the order they first waited (a
    /// status sent once a second is not superseded by the next heading, only by the next status).
    var pending: [(topic: String, bytes: [UInt8])] = []
    /// Frames on its topics; of those: sent, held back by min_change_deg, not sent while nobody
    /// subscribed, not sent because no subscription matched (on_slow: drop), superseded
    /// (latest_only) or dropped while stopping, not sent while the only subscriber they were for had
    /// a full queue (on_slow: drop). They add up. `fellBehind`: times one of several subscribers'
    /// queues was full (on_slow: drop), each the start of a run of messages it missed, which libzmq
    /// does not count (see `sendSkippingFullReaders`); `loneReaderFilled`: times the queue of a sole
    /// subscriber filled, each the start of a run counted in `missedWhileFull`.
    var offered = 0, sent = 0, heldBack = 0, withoutSubscriber = 0, unmatched = 0, dropped = 0
    var missedWhileFull = 0, fellBehind = 0, loneReaderFilled = 0
    /// A sole subscription's queue found full: when it filled, and when a frame last went out to
    /// learn whether it has room again (coarse monotonic seconds).
    struct FullQueue {
        let since: Double
        var probed: Double
    }
    /// By subscription (index into `subscribers.prefixes`); forgotten whenever subscriptions change.
    var fullQueues: [Int: FullQueue] = [:]
    /// Subscriptions whose full queue later had room again: their readers read.
    var readDown: Set<Int> = []
    /// Live subscribers.
    var subscribers = ReaderCount()
    /// One message object for every frame the view path sends (libzmq empties it on sending).
    let outgoing = try? BusMessage(size: 0)
    /// When `subscribers` was last brought up to date (monotonic seconds).
    var lastSubscriptionCheck = -Double.infinity

    /// The health the diagnostics topic carries, and when it was last sent (monotonic seconds).
    var health = HealthDiagnostics()
    var lastDiagnostics = Clocks.monotonicSeconds()

    /// With CURVE, the handler that admits only the allowed client keys.
    var zap: ZapHandler?

    /// The run's stop request: waiting for subscribers, and sending to one that does not read, end with it.
    let stop: StopToken

    init(
        _ settings: Settings, stage: String, security: CurveSecurity? = nil, stop: StopToken = StopToken(),
        log: @escaping @Sendable (String) -> Void
    ) throws {
        self.stop = stop
        self.settings = settings
        self.log = log
        self.stage = stage
        let context = BusContext()
        self.context = context
        let curve = settings.bind.hasPrefix("inproc://") ? nil : security
        zap = try curve.map { security in
            try ZapHandler(context: context, allowedClientKeys: security.allowedClients) { log("\(stage): \($0)") }
        }
        socket = try readerFollowingPublisher(
            context, endpoint: settings.bind,
            highWaterMark: settings.latestOnly ? 1 : Int32(clamping: settings.highWaterMark),
            stage: stage, curve: curve?.server)
        super.init()
        try subscribers.wait(socket, for: settings.waitForSubscribers, logEveryPolls: 2, stop: stop) { missing in
            log("\(stage): waiting for \(missing) subscriber(s) on \(settings.bind)")
        }
        logSubscriptionNotices()
    }

    /// Logs what the subscriber count noticed (a connection at its subscription cap).
    func logSubscriptionNotices() {
        for notice in subscribers.takeNotices() { log("\(stage): \(settings.bind): \(notice)") }
    }

    /// Reads the (un)subscriptions that arrived (see `ReaderCount.read`); true when one did.
    @discardableResult
    func readSubscriptions(timeoutMilliseconds: Int32) throws -> Bool {
        defer { logSubscriptionNotices() }
        return try subscribers.read(socket, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// CDR passed on as it came, with on_slow: drop (the defaults but min_change_deg): each frame is
    /// written into its message straight from the batch it arrived in, nothing decoded. JSON,
    /// min_change_deg, latest_only and on_slow: block take the general path.
    var inputHandling: InputHandling {
        !settings.json && settings.minimumChangeDegrees <= 0 && !settings.latestOnly && !settings.blockOnSlow
            && settings.diagnosticsTopic.isEmpty
            ? .inPlace(.ownFramesOnly) : .decoded
    }

    func inPlaceSample(_ frame: WireFrame.View) -> InPlaceSample? { .unchanged }

    func apply(_ sample: InPlaceSample, to frame: WireFrame.View, extra: inout [WireFrame]) throws {
        guard settings.topics.contains(frame.topic) else { return }
        offered += 1
        guard try someoneSubscribes(), let route = route(UnsafeRawBufferPointer(frame.encoded)) else { return }
        try sendDropping(frame.encodedBusMessage(reusing: outgoing), route)
    }

    /// Brings the subscriber count up to date (at most once a millisecond, by the coarse clock, so
    /// once per kernel tick: looking when nothing has come costs libzmq a system call, which per
    /// frame of a bulk replay cost more than sending) and says whether anyone subscribes; a frame
    /// offered to nobody is counted.
    func someoneSubscribes() throws -> Bool {
        let now = Clocks.coarseMonotonicSeconds()
        if now - lastSubscriptionCheck >= 0.001 {
            if try readSubscriptions(timeoutMilliseconds: 0) {
                fullQueues.removeAll()
                readDown.removeAll()
            }
            lastSubscriptionCheck = now
        }
        guard subscribers.value > 0 else {
            withoutSubscriber += 1
            if !pending.isEmpty {  // held for a subscriber who left
                dropped += pending.count
                pending.removeAll()
            }
            return false
        }
        return true
    }

    /// Whom a frame (its encoded bytes) goes to under on_slow: drop.
    enum Route {
        /// One subscription matches it: that reader's, by index.
        case sole(Int)
        /// Several do.
        case several
    }

    /// The route of a frame about to be sent, or nil when it is not sent, counted: no subscription
    /// matches it, or the one that does has a full queue. Then the frame is not even written into a
    /// message: that reader would miss it. One a millisecond (by the coarse clock) goes out to learn
    /// whether it has read its queue down.
    func route(_ encoded: UnsafeRawBufferPointer) -> Route? {
        let matching = subscribers.subscriptions(matching: encoded)
        guard matching.count > 0 else {
            unmatched += 1
            return nil
        }
        guard let sole = matching.sole else { return .several }
        if !fullQueues.isEmpty, let full = fullQueues[sole] {
            let now = Clocks.coarseMonotonicSeconds()
            guard now - full.probed >= 0.001 else {
                missedWhileFull += 1
                return nil
            }
            fullQueues[sole]?.probed = now
        }
        return .sole(sole)
    }

    /// on_slow: drop. To a sole subscription, a no-drop send that fails means its reader's queue is
    /// full: it misses exactly this message, counted, and its queue stays among those a no-drop send
    /// checks, so a later send says when it has room. With several, a full one is skipped without a
    /// count (`sendSkippingFullReaders`).
    func sendDropping(_ message: BusMessage, _ route: Route) throws {
        guard case .sole(let subscription) = route else {
            if try !socket.sendSkippingFullReaders(message) { fellBehind += 1 }
            sent += 1
            return
        }
        if try socket.send(message, blocking: false) {
            if !fullQueues.isEmpty, fullQueues.removeValue(forKey: subscription) != nil {
                readDown.insert(subscription)
            }
            sent += 1
            return
        }
        if fullQueues[subscription] == nil {
            let now = Clocks.coarseMonotonicSeconds()
            fullQueues[subscription] = FullQueue(since: now, probed: now)
            loneReaderFilled += 1
        }
        missedWhileFull += 1
    }

    func consume(_ frame: consuming WireFrame) throws {
        if !settings.diagnosticsTopic.isEmpty, try health.observe(frame: frame) {
            let now = Clocks.monotonicSeconds()
            if now - lastDiagnostics >= settings.diagnosticsPeriodSeconds {
                lastDiagnostics = now
                try publishDiagnostics()
            }
        }
        guard settings.topics.contains(frame.topic) else { return }
        try deliver(frame)
    }

    /// The health now, on the diagnostics topic, as any other message of this sink.
    func publishDiagnostics(final: Bool = false) throws {
        try deliver(cdrFrame(health.report(final: final), topic: settings.diagnosticsTopic))
    }

    /// One message on one of this sink's topics: held back, encoded, sent, or counted as not sent.
    func deliver(_ frame: consuming WireFrame) throws {
        offered += 1
        if settings.minimumChangeDegrees > 0, frame.type == HeadingMessage.typeName {
            // Deliver a heading only once it changed enough since the last one delivered on this topic.
            let h = try decoded(frame, as: HeadingMessage.self)
            let value = h.trueHeading.isFinite ? h.trueHeading : h.magneticHeading
            var filter =
                changeFilters[frame.topic] ?? HeadingChangeFilter(minimumChangeDegrees: settings.minimumChangeDegrees)
            let deliver = filter.offer(value) != nil
            changeFilters[frame.topic] = filter
            if !deliver {
                heldBack += 1
                return
            }
        }
        var out = frame
        if settings.json {
            do {
                guard let text = try jsonFromCDR(type: out.type, out.payload) else {
                    throw UnexpectedFrame(reason: "no JSON form for \(out.type)")
                }
                out = WireFrame(topic: out.topic, type: out.type, encoding: "json", payload: Array(text.utf8))
            } catch let e as UnexpectedFrame { throw e } catch {
                throw UnexpectedFrame(reason: "undecodable \(out.type): \(error)")
            }
        }
        guard try someoneSubscribes() else { return }
        if !settings.latestOnly && !settings.blockOnSlow {
            let message = try out.encodedBusMessage()
            guard let route = route(UnsafeRawBufferPointer(message.bytes)) else { return }
            try sendDropping(message, route)
            return
        }
        let bytes = out.encoded()
        if settings.latestOnly {
            if let i = pending.firstIndex(where: { $0.topic == out.topic }) {
                dropped += 1
                pending[i].bytes = bytes
            } else {
                pending.append((out.topic, bytes))
            }
            try sendPending()
        } else {
            while try !socket.send(bytes, blocking: false) {
                // Stopping: a subscriber that does not read must not hold the run (1 ms per frame would).
                if stop.requested {
                    dropped += 1
                    return
                }
                try readSubscriptions(timeoutMilliseconds: 1)
            }
            sent += 1
        }
    }

    /// latest_only: sends what waits, oldest first, until the subscriber's queue is full.
    func sendPending() throws {
        while let first = pending.first, try socket.send(first.bytes, blocking: false) {
            pending.removeFirst()
            sent += 1
        }
    }

    func close() throws {
        // The health at the end of the run, so a short replay reports at least once.
        if !settings.diagnosticsTopic.isEmpty, health.heading != nil { try? publishDiagnostics(final: true) }
        try sendPending()
        dropped += pending.count
        pending.removeAll()
        // Subscribers learn that the stream ended: one end-of-stream frame per topic (they filter by
        // topic). The only subscriber, if its queue is full (the last frames may have filled it
        // without a refused send to say so), has room again once it has read what the socket buffers
        // hold and part of its queue: it gets half a second for that (a reader of 30,000 messages a
        // second drains a local socket's buffers in a tenth of it, unloaded), or 50 ms when its queue
        // is known full and it has shown no reading: full for over a second, or never read down since
        // it filled. If it still has no room, it is stuck, and what is queued for it is given up
        // rather than held for.
        var stuckAtEnd = false
        if subscribers.value > 0 {
            // One connection, however many topics it subscribes to (a watch takes five): full now, or
            // filled by the last frames sent. Several get a quarter of a second in all.
            let lone = subscribers.connections == 1
            let now = Clocks.coarseMonotonicSeconds()
            let notReading = fullQueues.contains { now - $0.value.since > 1 || !readDown.contains($0.key) }
            let deadline = Clocks.monotonicSeconds() + (lone ? (notReading ? 0.05 : 0.5) : 0.25)
            for topic in settings.sentTopics where !stuckAtEnd {
                let end = WireFrame(topic: topic, type: WireFrame.endOfStreamType, encoding: "none", payload: [])
                while try !socket.send(end.encoded(), blocking: false) {
                    guard Clocks.monotonicSeconds() < deadline else {
                        stuckAtEnd = lone
                        break
                    }
                    usleep(1000)
                }
            }
        }
        var parts = [
            "sent \(sent) of \(offered) message(s) on \(settings.sentTopics.joined(separator: ", ")) to "
                + "subscribers"
        ]
        if heldBack > 0 { parts.append("\(heldBack) held back by min_change_deg") }
        if withoutSubscriber > 0 { parts.append("\(withoutSubscriber) not sent while nobody subscribed") }
        if unmatched > 0 { parts.append("\(unmatched) not sent as no subscription matched their topic") }
        if dropped > 0 { parts.append("\(dropped) superseded or dropped") }
        if missedWhileFull > 0 {
            parts.append(
                "\(missedWhileFull) not sent while the only subscriber they were for had a full queue of "
                    + "\(settings.highWaterMark) "
                    + "(it filled \(loneReaderFilled) time(s); on_slow: block waits instead)"
                    + (stuckAtEnd ? "; it was not reading at the end, so what was queued for it was given up" : ""))
        }
        if fellBehind > 0 {
            parts.append(
                "a slow subscriber's queue of \(settings.highWaterMark) filled \(fellBehind) time(s): each time it "
                    + "missed what was sent until it had read its queue down (libzmq counts neither those messages "
                    + "nor says which subscriber; on_slow: block waits instead)")
        }
        if subscribers.refused > 0 { parts.append(subscribers.refusalSummary) }
        if let zap, zap.rejected > 0 {
            parts.append("\(zap.rejected) client(s) refused (unknown key or no CURVE handshake)")
        }
        notes.append(parts.joined(separator: ", "))
        // A closing publisher gives its tail 2 s to reach the subscribers; one of several known to be
        // stuck would hold the exit for all of it, so the others get a quarter of a second; the only
        // subscriber, stuck, gets nothing more.
        if stuckAtEnd {
            try? socket.setOption(lingerMilliseconds: 0)
        } else if fellBehind > 0 {
            try? socket.setOption(lingerMilliseconds: 250)
        }
        socket.close()
        zap?.stop()
        return
    }
}
