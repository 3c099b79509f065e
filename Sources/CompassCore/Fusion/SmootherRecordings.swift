/// What the smoother's passes record: the first pass's forces and gate decisions, the second
/// pass's measurement updates.

/// The first pass's symmetric low-pass at one update, in that pass's earth frame.
struct UpdateForce: Sendable {
    var input: Int
    var force: Vector3
    var orientation: Quaternion
}

/// One bit per input.
struct BitSet: Sendable {
    var words: [UInt64] = []
    mutating func insert(_ i: Int) {
        let w = i >> 6
        if w >= words.count { words.append(contentsOf: repeatElement(0, count: w - words.count + 1)) }
        words[w] |= 1 << UInt64(i & 63)
    }
    mutating func remove(_ i: Int) {
        let w = i >> 6
        if w < words.count { words[w] &= ~(1 << UInt64(i & 63)) }
    }
    func contains(_ i: Int) -> Bool {
        let w = i >> 6
        return w < words.count && words[w] & (1 << UInt64(i & 63)) != 0
    }
}

/// The first pass: every sample's earth-frame specific force, and the orientation at each update.
struct InclinationRecording: KalmanStepRecorder, Sendable {
    var earthForce = ChunkedStorage<Vector3>()
    /// Input index and filter orientation of each measurement update.
    var updates: [(input: Int, orientation: Quaternion)] = []
    /// Inputs at which the filter started again (the earth frame may differ across).
    var restarts: [Int] = []
    var inputIndex = 0

    mutating func started(posterior: KalmanCovariance, at timestamp: Double) { restarts.append(inputIndex) }
    mutating func measured(
        _ propagation: KalmanPropagation, correction: KalmanCorrection,
        posterior: KalmanCovariance, headingMeasured: Bool, orientation: Quaternion, at timestamp: Double
    ) { updates.append((inputIndex, orientation)) }
    mutating func reset() {}
    mutating func propagated(earthForce force: Vector3) {
        // Samples the filter skipped, or its first, have none: they hold the previous value.
        while earthForce.count < inputIndex { earthForce.append(earthForce.last ?? force) }
        earthForce.append(force)
    }
    mutating func inclinationForce(filter: Vector3, orientation: Quaternion) -> Vector3 { filter }
    /// Inputs whose magnetometer reading the gate accepted.
    var magnetometerUsed = BitSet()
    mutating func useMagnetometer(gateAccepts: Bool) -> Bool {
        if gateAccepts { magnetometerUsed.insert(inputIndex) }
        return gateAccepts
    }

    /// The earth-frame force low-passed forward then backward in time (time constant `tau` each way,
    /// restarting where the filter restarted), at each measurement update: input index -> (force in
    /// that update's earth frame, the orientation that frame belongs to). `time` gives an input's
    /// stamp; steps are clamped to `maximumStep` as the filter clamps them.
    /// Consumes the recorded forces (filtered in place).
    mutating func symmetricLowPass(tau: Double, maximumStep: Double, time: (Int) -> Double) -> [UpdateForce] {
        guard !earthForce.isEmpty else { return [] }
        var smoothed = earthForce
        earthForce = ChunkedStorage()
        var bounds = restarts.filter { $0 < smoothed.count }
        if bounds.first != 0 { bounds.insert(0, at: 0) }
        bounds.append(smoothed.count)
        var weight = LowPassWeight()
        func step(_ a: Int, _ b: Int) -> Double { min(max(abs(time(b) - time(a)), 0), maximumStep) }
        for (from, to) in zip(bounds, bounds.dropFirst()) where from < to {
            var state = smoothed[from]
            for i in from..<to {
                state += (smoothed[i] - state) * weight(i > from ? step(i - 1, i) : 0, tau: tau)
                smoothed[i] = state
            }
            for i in (from..<to).reversed() {
                state += (smoothed[i] - state) * weight(i < to - 1 ? step(i, i + 1) : 0, tau: tau)
                smoothed[i] = state
            }
        }
        return updates.filter { $0.input < smoothed.count }.map {
            UpdateForce(input: $0.input, force: smoothed[$0.input], orientation: $0.orientation)
        }
    }
}

/// One recorded event of the forward pass, and (after the backward pass) its smoothed correction.
struct SmootherRecord: Sendable {
    enum Kind: UInt8, Sendable { case start, update, segmentEnd }
    var kind: Kind
    /// Index of the forward estimate this record belongs to (the sample the event happened on).
    var sampleIndex: Int
    var timestamp: Double
    /// From the previous record to this one (updates only).
    var propagation: KalmanPropagation
    /// The forward correction Δ (updates only).
    var correctionAttitude: Vector3, correctionBias: Vector3
    var posterior: KalmanCovariance
    /// Backward pass results: the correction to the forward posterior, and the heading variance.
    var smoothedAttitude = Vector3.zero, smoothedBias = Vector3.zero
    var smoothedHeadingVariance = 0.0

    mutating func setSmoothed(attitude: Vector3, bias: Vector3, covariance: KalmanCovariance) {
        smoothedAttitude = attitude
        smoothedBias = bias
        smoothedHeadingVariance = covariance.attitude.m22
    }
}

/// Collects the forward pass's records.
struct SmootherRecording: KalmanStepRecorder, Sendable {
    /// The first pass's symmetric low-pass at each update, in order (see `InclinationRecording`).
    var inclination: [UpdateForce]
    var nextInclination = 0
    /// Index of the input being fed.
    var inputIndex = 0
    var records = ChunkedStorage<SmootherRecord>()
    /// Index of the sample being fed (set by the smoother before each step).
    var sampleIndex = 0
    /// Per segment (by the index of its start record): whether any update measured heading.
    var headingInSegment: [Int: Bool] = [:]
    var segmentStart = -1

    mutating func started(posterior: KalmanCovariance, at timestamp: Double) {
        segmentStart = records.count
        headingInSegment[segmentStart] = false
        records.append(
            SmootherRecord(
                kind: .start, sampleIndex: sampleIndex, timestamp: timestamp, propagation: .none,
                correctionAttitude: .zero, correctionBias: .zero, posterior: posterior))
    }

    mutating func propagated(earthForce: Vector3) {}

    /// The first pass's gate decisions: the inputs whose magnetometer reading it used.
    var magnetometerUsed = BitSet()
    mutating func useMagnetometer(gateAccepts: Bool) -> Bool { magnetometerUsed.contains(inputIndex) }

    /// The symmetric low-pass at this update, carried from the first pass's earth frame into this
    /// pass's (the two differ by the small rotation between their orientations).
    mutating func inclinationForce(filter: Vector3, orientation: Quaternion) -> Vector3 {
        while nextInclination < inclination.count, inclination[nextInclination].input < inputIndex {
            nextInclination += 1
        }
        guard nextInclination < inclination.count, inclination[nextInclination].input == inputIndex else {
            return filter
        }
        let first = inclination[nextInclination]
        return orientation.rotate(first.orientation.inverseRotate(first.force))
    }

    mutating func measured(
        _ propagation: KalmanPropagation, correction: KalmanCorrection,
        posterior: KalmanCovariance, headingMeasured: Bool, orientation: Quaternion, at timestamp: Double
    ) {
        if headingMeasured { headingInSegment[segmentStart] = true }
        records.append(
            SmootherRecord(
                kind: .update, sampleIndex: sampleIndex, timestamp: timestamp, propagation: propagation,
                correctionAttitude: correction.attitude, correctionBias: correction.bias, posterior: posterior))
    }

    mutating func reset() {
        // The sample that failed is reported by the fresh filter: it belongs to no segment.
        records.append(
            SmootherRecord(
                kind: .segmentEnd, sampleIndex: sampleIndex, timestamp: 0, propagation: .none,
                correctionAttitude: .zero, correctionBias: .zero,
                posterior: KalmanCovariance(attitude: .identity, cross: .identity, bias: .identity)))
    }
}

/// The first pass records both: the forces and gate decisions the last pass needs, and the updates
/// a backward pass needs, so the readings can be judged on its smoothed attitude.
struct FirstPassRecording: KalmanStepRecorder, Sendable {
    var inclination = InclinationRecording()
    var updates = SmootherRecording(inclination: [])

    mutating func started(posterior: KalmanCovariance, at timestamp: Double) {
        inclination.started(posterior: posterior, at: timestamp)
        updates.started(posterior: posterior, at: timestamp)
    }
    mutating func measured(
        _ propagation: KalmanPropagation, correction: KalmanCorrection,
        posterior: KalmanCovariance, headingMeasured: Bool, orientation: Quaternion, at timestamp: Double
    ) {
        inclination.measured(
            propagation, correction: correction, posterior: posterior, headingMeasured: headingMeasured,
            orientation: orientation, at: timestamp)
        updates.measured(
            propagation, correction: correction, posterior: posterior, headingMeasured: headingMeasured,
            orientation: orientation, at: timestamp)
    }
    mutating func reset() { updates.reset() }
    mutating func propagated(earthForce force: Vector3) { inclination.propagated(earthForce: force) }
    mutating func inclinationForce(filter: Vector3, orientation: Quaternion) -> Vector3 {
        inclination.inclinationForce(filter: filter, orientation: orientation)
    }
    mutating func useMagnetometer(gateAccepts: Bool) -> Bool { inclination.useMagnetometer(gateAccepts: gateAccepts) }
}
