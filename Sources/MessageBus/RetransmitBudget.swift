/// How many bytes of retransmission each client of a `RetransmitServer` may take: a token bucket per
/// client connection (its ROUTER routing id). A reader that missed frames asks once for a range, a
/// restarted one once for everything held, so a bucket holds twice the buffer and refills a buffer's
/// worth per buffer-seconds; a peer repeating requests for everything (9 KB of requests could draw tens
/// of MB a second) is refused once its bucket is empty, and the refusal is counted. At most
/// `maximumClients` connections are followed; beyond that the one seen longest ago is forgotten.
struct RetransmitBudget {
    /// Bytes a bucket holds, and bytes per second it refills.
    let capacityBytes: Double
    let refillBytesPerSecond: Double
    let maximumClients: Int
    private var buckets: [[UInt8]: (tokens: Double, updated: Double)] = [:]

    init(bufferBytes: Int, bufferSeconds: Double, maximumClients: Int = 256) {
        capacityBytes = 2 * Double(bufferBytes)
        refillBytesPerSecond = Double(bufferBytes) / max(bufferSeconds, 1e-3)
        self.maximumClients = maximumClients
    }

    /// Takes `bytes` from `client`'s bucket at `now` (monotonic seconds); false, taking nothing, when
    /// the bucket holds less.
    mutating func take(_ bytes: Int, client: [UInt8], now: Double) -> Bool {
        var bucket = buckets[client] ?? (capacityBytes, now)
        bucket.tokens = min(capacityBytes, bucket.tokens + (now - bucket.updated) * refillBytesPerSecond)
        bucket.updated = now
        let granted = Double(bytes) <= bucket.tokens
        if granted { bucket.tokens -= Double(bytes) }
        if buckets[client] == nil, buckets.count >= maximumClients,
            let stalest = buckets.min(by: { $0.value.updated < $1.value.updated })?.key
        {
            buckets[stalest] = nil
        }
        buckets[client] = bucket
        return granted
    }

    /// Clients followed now.
    var clients: Int { buckets.count }
}
