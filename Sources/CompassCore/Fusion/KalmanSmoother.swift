/// The best estimate a whole recording allows: `KalmanFilter` forward, then a Rauch-Tung-Striebel
/// pass backward over the same error-state model.
///
/// Three passes. (1) The real-time filter runs as samples arrive; it supplies the earth-frame
/// specific force of every sample. (2) The filter runs again over the same samples, the same gate
/// and the same updates, except that the inclination update measures the specific force low-passed
/// in both directions of time (the causal low-pass run forward, then backward over its output). A
/// causal low-pass of the earth-frame force is off by about v(t)/tau, the velocity at that moment
/// over its time constant (0.1 m/s at 3 s is 0.2 degrees); a symmetric one has no such term: on the
/// BROAD trials, computed with the optical reference's attitude, its tilt error is 0.12 to 1.4
/// degrees RMS where the causal one's is 0.2 to 2.5. At each measurement update k the pass records
/// the propagation since update k-1 (F = [[I, G], [0, I]], process noise Q), the correction it
/// applied (Δ) and the posterior covariance P⁺. (3) The backward pass carries what later data say
/// back in time, in error-state form (corrections relative to the forward estimate, earth-frame
/// attitude and sensor-frame bias):
///
///     P⁻ₖ₊₁ = F Pₖ⁺ Fᵀ + Q,   Cₖ = Pₖ⁺ Fᵀ (P⁻ₖ₊₁)⁻¹
///     eₖ = Cₖ (eₖ₊₁ + Δₖ₊₁),   Pₖ|N = Pₖ⁺ + Cₖ (Pₖ₊₁|N − P⁻ₖ₊₁) Cₖᵀ
///
/// eₖ₊₁ + Δₖ₊₁ is the smoothed correction relative to the forward prediction at k+1 (before its
/// update). Between updates (20 ms by default) the correction is interpolated in time. A filter
/// reset (`filterReset`) ends a smoothing segment: nothing is carried across it.
///
/// The magnetic gate's decisions are the forward filter's. (Running the gate backwards in time as
/// well and using a reading only when both accept it was tried: on the BROAD trials with magnets it
/// refused long stretches of good readings and the heading got worse, 1.2 to 3.5 degrees on trial 33.)
///
/// Memory is linear in the recording: the samples (about 100 bytes each), the second pass's
/// estimates (about 90) and a record per measurement update (about 400 bytes, at most 50 per
/// second); the first pass adds 24 bytes per sample until the second starts.
public struct KalmanSmoother: Sendable {
    /// The filter: of the first pass until `finish`, then of the second (settings, gate, skipped counts).
    public private(set) var filter: KalmanFilter
    /// Every sample given, in order.
    var inputs = ChunkedStorage<(imu: ImuSample, magnetometer: MagnetometerSample?)>()
    var firstPass = InclinationRecording()
    /// A reference set from outside, for the second pass's gate too.
    var reference: (strengthMicrotesla: Double, dipDegrees: Double)?

    public init(settings: KalmanFilterSettings = .init()) {
        filter = KalmanFilter(settings: settings)
    }

    /// Sets the magnetic reference the gate compares strength and dip with (see `KalmanFilter`).
    public mutating func setMagneticReference(strengthMicrotesla: Double, dipDegrees: Double) {
        filter.setMagneticReference(strengthMicrotesla: strengthMicrotesla, dipDegrees: dipDegrees)
        reference = (strengthMicrotesla, dipDegrees)
    }

    /// Samples skipped so far, by reason.
    public var skipped: SkippedSampleCounts { filter.skipped }

    /// Samples given so far.
    public var count: Int { inputs.count }

    /// Feeds one sample. Its index (from 0, in the order given) identifies its smoothed estimate in
    /// `finish`; a sample the filter skips gets none (counted in `skipped`).
    public mutating func add(imu: ImuSample, magnetometer: MagnetometerSample? = nil) {
        firstPass.inputIndex = inputs.count
        inputs.append((imu, magnetometer))
        _ = filter.step(imu: imu, magnetometer: magnetometer, recorder: &firstPass)
    }

    /// Runs the second and backward passes and hands every smoothed estimate to `body` with the
    /// index of its sample and the sample itself, in order. The smoother is empty afterwards.
    public mutating func finish(
        _ body: (Int, FusionOutput, ImuSample, MagnetometerSample?) throws -> Void
    ) rethrows {
        let inputs = self.inputs
        var recording = SmootherRecording(
            inclination: firstPass.symmetricLowPass(
                tau: filter.settings.accelerometerLowPassSeconds, maximumStep: filter.settings.maximumStepSeconds
            ) { inputs[$0].imu.timestamp })
        recording.magnetometerUsed = firstPass.magnetometerUsed
        firstPass = InclinationRecording()
        var second = KalmanFilter(settings: filter.settings)
        if let r = reference { second.setMagneticReference(strengthMicrotesla: r.0, dipDegrees: r.1) }
        var forward = ChunkedStorage<FusionOutput>()
        var sampleOfEstimate = ChunkedStorage<Int32>()
        for i in inputs.indices {
            recording.sampleIndex = forward.count
            recording.inputIndex = i
            if let o = second.step(imu: inputs[i].imu, magnetometer: inputs[i].magnetometer, recorder: &recording) {
                forward.append(o)
                sampleOfEstimate.append(Int32(truncatingIfNeeded: i))
            }
        }
        var records = recording.records
        let headingInSegment = recording.headingInSegment
        recording = SmootherRecording(inclination: [])
        Self.smoothBackward(&records)
        let unseen = second.unseenVarianceDegrees2
        var k = -1
        var segmentMeasuredHeading = false
        for i in forward.indices {
            while k + 1 < records.count, records[k + 1].sampleIndex <= i {
                k += 1
                if records[k].kind == .start { segmentMeasuredHeading = headingInSegment[k] ?? false }
            }
            let o = forward[i]
            let input = inputs[Int(sampleOfEstimate[i])]
            guard k >= 0, records[k].kind != .segmentEnd else {
                try body(Int(sampleOfEstimate[i]), o, input.imu, input.magnetometer)
                continue
            }
            let r = records[k]
            var attitude = r.smoothedAttitude, bias = r.smoothedBias, variance = r.smoothedHeadingVariance
            if k + 1 < records.count, records[k + 1].kind == .update {
                // Linear in time from this update's posterior to the next one's prediction.
                let next = records[k + 1]
                let span = next.timestamp - r.timestamp
                let w = span > 0 ? min(max((o.timestamp - r.timestamp) / span, 0), 1) : 0
                attitude = attitude + (next.smoothedAttitude + next.correctionAttitude - attitude) * w
                bias = bias + (next.smoothedBias + next.correctionBias - bias) * w
                variance += (next.smoothedHeadingVariance - variance) * w
            }
            var s = o
            s.orientation = (Quaternion(rotationVector: attitude) * o.orientation).renormalized
            s.gyroBias = o.gyroBias + bias
            let degrees2 = variance * degreesPerRadian * degreesPerRadian + unseen
            if segmentMeasuredHeading {
                // Every sample of the segment has seen its heading measurements, past and future.
                s.flags.remove(.initialising)
                s.headingVarianceDegrees2 = degrees2.isFinite ? degrees2 : nil
            }
            try body(Int(sampleOfEstimate[i]), s, input.imu, input.magnetometer)
        }
        self.inputs = ChunkedStorage()
        filter = second
    }

    /// The backward recursion over the records, in place: each record gets its smoothed correction
    /// and heading variance.
    static func smoothBackward(_ records: inout ChunkedStorage<SmootherRecord>) {
        var smoothed: KalmanCovariance? = nil
        var k = records.count - 1
        while k >= 0 {
            defer { k -= 1 }
            guard records[k].kind != .segmentEnd else {
                smoothed = nil
                continue
            }
            let posterior = records[k].posterior
            guard let later = smoothed, k + 1 < records.count, records[k + 1].kind == .update else {
                // The last record of a segment: the forward estimate is already the smoothed one.
                records[k].setSmoothed(attitude: .zero, bias: .zero, covariance: posterior)
                smoothed = posterior
                continue
            }
            let next = records[k + 1]
            let step = SmootherStep(posterior: posterior, propagation: next.propagation)
            let target = (next.smoothedAttitude + next.correctionAttitude, next.smoothedBias + next.correctionBias)
            guard let gain = step.gain else {
                records[k].setSmoothed(attitude: .zero, bias: .zero, covariance: posterior)
                smoothed = posterior
                continue
            }
            let e = gain.apply(target)
            let covariance = step.smoothedCovariance(gain: gain, later: later)
            records[k].setSmoothed(attitude: e.attitude, bias: e.bias, covariance: covariance)
            smoothed = covariance
        }
    }
}

/// What `KalmanFilter.step` tells a recorder.
protocol KalmanStepRecorder {
    /// The filter started (or started again after a reset) with this covariance.
    mutating func started(posterior: KalmanCovariance, at timestamp: Double)
    /// A measurement update: the propagation since the previous record, the correction applied and
    /// the covariance after it.
    mutating func measured(
        _ propagation: KalmanPropagation, correction: (attitude: Vector3, bias: Vector3),
        posterior: KalmanCovariance, headingMeasured: Bool, orientation: Quaternion, at timestamp: Double)
    /// The state became non-finite and the filter starts again: nothing carries across.
    mutating func reset()
    /// Each sample's specific force in the earth frame (the filter's orientation), m/s^2.
    mutating func propagated(earthForce: Vector3)
    /// The low-passed earth-frame specific force the inclination update measures: the filter's own
    /// causal one, or one the recorder knows better. `orientation` is the filter's at this update.
    mutating func inclinationForce(filter: Vector3, orientation: Quaternion) -> Vector3
    /// Whether the magnetometer reading is used: the gate's verdict, or a decision made earlier.
    mutating func useMagnetometer(gateAccepts: Bool) -> Bool
}

/// The recorder of the plain filter.
struct NoStepRecorder: KalmanStepRecorder {
    @inline(__always) mutating func started(posterior: KalmanCovariance, at timestamp: Double) {}
    @inline(__always) mutating func measured(
        _ propagation: KalmanPropagation, correction: (attitude: Vector3, bias: Vector3),
        posterior: KalmanCovariance, headingMeasured: Bool, orientation: Quaternion, at timestamp: Double
    ) {}
    @inline(__always) mutating func reset() {}
    @inline(__always) mutating func propagated(earthForce: Vector3) {}
    @inline(__always) mutating func inclinationForce(filter: Vector3, orientation: Quaternion) -> Vector3 { filter }
    @inline(__always) mutating func useMagnetometer(gateAccepts: Bool) -> Bool { gateAccepts }
}

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
    var lastInput = -1

    mutating func started(posterior: KalmanCovariance, at timestamp: Double) { restarts.append(inputIndex) }
    mutating func measured(
        _ propagation: KalmanPropagation, correction: (attitude: Vector3, bias: Vector3),
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

/// The covariance of the error state as three 3x3 blocks: attitude (rad^2), attitude-bias
/// (rad^2/s), bias (rad^2/s^2).
struct KalmanCovariance: Sendable {
    var attitude: Matrix3, cross: Matrix3, bias: Matrix3
}

/// The propagation over one measurement interval: F = [[I, G], [0, I]], Q = diag(attitude noise,
/// bias noise) (rad^2 and rad^2/s^2 per axis).
struct KalmanPropagation: Sendable {
    var g: Matrix3
    var attitudeNoise: Double, biasNoise: Double
    static let none = KalmanPropagation(g: Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0), attitudeNoise: 0, biasNoise: 0)
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
    var headingMeasured: Bool
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
                correctionAttitude: .zero, correctionBias: .zero, posterior: posterior, headingMeasured: false))
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
        _ propagation: KalmanPropagation, correction: (attitude: Vector3, bias: Vector3),
        posterior: KalmanCovariance, headingMeasured: Bool, orientation: Quaternion, at timestamp: Double
    ) {
        if headingMeasured { headingInSegment[segmentStart] = true }
        records.append(
            SmootherRecord(
                kind: .update, sampleIndex: sampleIndex, timestamp: timestamp, propagation: propagation,
                correctionAttitude: correction.attitude, correctionBias: correction.bias, posterior: posterior,
                headingMeasured: headingMeasured))
    }

    mutating func reset() {
        // The sample that failed is reported by the fresh filter: it belongs to no segment.
        records.append(
            SmootherRecord(
                kind: .segmentEnd, sampleIndex: sampleIndex, timestamp: 0, propagation: .none,
                correctionAttitude: .zero, correctionBias: .zero,
                posterior: KalmanCovariance(attitude: .identity, cross: .identity, bias: .identity),
                headingMeasured: false))
    }
}

/// One backward step's matrices, in 3x3 blocks (S = P⁻ₖ₊₁, L = Pₖ⁺ Fᵀ, gain C = L S⁻¹).
struct SmootherStep {
    let posterior: KalmanCovariance
    let g: Matrix3
    /// The prediction P⁻ₖ₊₁ = F Pₖ⁺ Fᵀ + Q.
    let s11: Matrix3, s12: Matrix3, s22: Matrix3
    /// L = Pₖ⁺ Fᵀ = [[A + X Gᵀ, X], [Xᵀ + B Gᵀ, B]].
    let l11: Matrix3, l12: Matrix3, l21: Matrix3, l22: Matrix3

    init(posterior p: KalmanCovariance, propagation: KalmanPropagation) {
        posterior = p
        g = propagation.g
        let gt = g.transposed
        let xt = p.cross.transposed
        l11 = p.attitude + p.cross * gt
        l12 = p.cross
        l21 = xt + p.bias * gt
        l22 = p.bias
        s11 = (l11 + g * l21).addingToDiagonal(propagation.attitudeNoise)
        s12 = p.cross + g * p.bias
        s22 = p.bias.addingToDiagonal(propagation.biasNoise)
    }

    /// The gain blocks by the block inverse of S (Schur complement on the bias block); nil when S is
    /// singular.
    var gain: SmootherGain? {
        guard let d = s22.inverse else { return nil }
        let s21 = s12.transposed
        let dS21 = d * s21
        guard let m = (s11 - s12 * dS21).inverse else { return nil }
        let s12d = s12 * d
        let c11 = (l11 - l12 * dS21) * m
        let c21 = (l21 - l22 * dS21) * m
        let c12 = l12 * d - c11 * s12d
        let c22 = l22 * d - c21 * s12d
        return SmootherGain(c11: c11, c12: c12, c21: c21, c22: c22)
    }

    /// Pₖ|N = Pₖ⁺ + C (Pₖ₊₁|N − P⁻ₖ₊₁) Cᵀ.
    func smoothedCovariance(gain c: SmootherGain, later: KalmanCovariance) -> KalmanCovariance {
        let da = later.attitude - s11, dx = later.cross - s12, db = later.bias - s22
        let dxt = dx.transposed
        let t11 = c.c11 * da + c.c12 * dxt, t12 = c.c11 * dx + c.c12 * db
        let t21 = c.c21 * da + c.c22 * dxt, t22 = c.c21 * dx + c.c22 * db
        let c11t = c.c11.transposed, c12t = c.c12.transposed
        let c21t = c.c21.transposed, c22t = c.c22.transposed
        return KalmanCovariance(
            attitude: posterior.attitude + t11 * c11t + t12 * c12t,
            cross: posterior.cross + t11 * c21t + t12 * c22t,
            bias: posterior.bias + t21 * c21t + t22 * c22t)
    }
}

/// The smoother gain C in 3x3 blocks.
struct SmootherGain {
    let c11: Matrix3, c12: Matrix3, c21: Matrix3, c22: Matrix3

    func apply(_ e: (attitude: Vector3, bias: Vector3)) -> (attitude: Vector3, bias: Vector3) {
        (c11 * e.attitude + c12 * e.bias, c21 * e.attitude + c22 * e.bias)
    }
}
