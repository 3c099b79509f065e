/// When a stage publishes its status message: on every change of what it reports, and otherwise
/// once every `intervalSeconds` of stream time. Shared by the calibration and gating stages.
struct StatusThrottle<State: Equatable> {
    let intervalSeconds: Double
    private var lastTime: Double?
    private var lastState: State?

    init(intervalSeconds: Double) { self.intervalSeconds = intervalSeconds }

    /// True when a status for `state` at stream time `t` is due (and then counts it as sent).
    mutating func due(_ state: State, at t: Double, force: Bool = false) -> Bool {
        guard force || lastState != state || t - (lastTime ?? -.infinity) >= intervalSeconds else { return false }
        lastTime = t
        lastState = state
        return true
    }
}
