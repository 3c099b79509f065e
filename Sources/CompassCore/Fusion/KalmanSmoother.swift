/// The best estimate a whole recording allows: `KalmanFilter` forward, then a Rauch-Tung-Striebel
/// pass backward over the same error-state model.
///
/// Three passes. (1) The real-time filter runs as samples arrive; it supplies the earth-frame
/// specific force of every sample and the gate's decisions, and records its updates, which a
/// backward pass (3, below) smooths to judge the gate's readings by. (2) The filter runs again over
/// the same samples and the same updates, with the readings that judging kept, and with the
/// inclination update measuring the specific force low-passed in both directions of time (the causal
/// low-pass run forward, then backward over its output). A
/// causal low-pass of the earth-frame force is off by about v(t)/tau, the velocity at that moment
/// over its time constant (0.1 m/s at 3 s is 0.2 degrees); a symmetric one has no such term, as
/// the velocity's rise and fall cancel. At each measurement update k a pass records
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
/// The magnetic gate's decisions are the forward filter's, less the readings the first pass's
/// smoothed heading disagrees with by more than `smootherReadingToleranceDegrees`: the causal gate
/// lets the first readings of a magnet's approach through, and the smoothed heading, which knows what
/// followed, can tell them apart. Judging them on the first pass, not on a second one with every
/// reading, saves a whole pass. A gate run backwards in time as well, using a reading only when both
/// directions accept it, refuses long stretches of good readings next to a magnet, so it is not used
/// (docs/results.md has the figures).
///
/// Memory is linear in the recording: the samples (about 100 bytes each), one pass's estimates
/// (about 90) and a record per measurement update (about 400 bytes, at most 50 per second); until
/// the second pass starts, the first also keeps 24 bytes of force per sample. The second pass refills
/// the first one's storage.
public struct KalmanSmoother: Sendable {
    /// The filter: of the first pass until `finish`, then of the second (settings, gate, skipped counts).
    public private(set) var filter: KalmanFilter
    /// Every sample given, in order.
    var inputs = ChunkedStorage<(imu: ImuSample, magnetometer: MagnetometerSample?)>()
    var firstPass = FirstPassRecording()
    /// The first pass's estimates, kept to judge the readings once it has been smoothed.
    var firstEstimates = SmoothedPass()
    /// A reference set from outside, for the second pass's gate too.
    var reference: (strengthMicrotesla: Double, dipDegrees: Double)?

    public init(settings: KalmanFilterSettings = .init()) {
        filter = KalmanFilter(settings: settings)
    }

    /// Where the last smoothed estimate's heading accuracy comes from, once `finish` has run: the
    /// disturbance as the whole recording showed it, at the last orientation (there the smoothed
    /// covariance is the filter's).
    public var headingAccuracyParts: HeadingAccuracyParts {
        filter.frontEnd.unseen.accuracyParts(
            filterSigmaDegrees: filter.reportedOwnVarianceDegrees2.squareRoot(),
            eastRow: filter.orientation.rotationMatrix.row0)
    }

    /// Sets the magnetic reference the gate compares strength and dip with (see `KalmanFilter`).
    public mutating func setMagneticReference(strengthMicrotesla: Double, dipDegrees: Double) {
        filter.setMagneticReference(strengthMicrotesla: strengthMicrotesla, dipDegrees: dipDegrees)
        reference = (strengthMicrotesla, dipDegrees)
    }

    /// Calibration changes with the index of the first sample they apply to, replayed by every pass.
    var calibrationNotices: [(inputIndex: Int, notice: MagnetometerCalibrationNotice)] = []

    /// The calibration applied to the samples added from now on changed (see `KalmanFilter`).
    public mutating func noteCalibration(_ notice: MagnetometerCalibrationNotice) {
        calibrationNotices.append((inputs.count, notice))
        filter.noteCalibration(notice)
    }

    /// Samples skipped so far, by reason.
    public var skipped: SkippedSampleCounts { filter.skipped }

    /// Samples given so far.
    public var count: Int { inputs.count }

    /// Feeds one sample. Its index (from 0, in the order given) identifies its smoothed estimate in
    /// `finish`; a sample the filter skips gets none (counted in `skipped`).
    public mutating func add(imu: ImuSample, magnetometer: MagnetometerSample? = nil) {
        let i = inputs.count
        firstPass.inclination.inputIndex = i
        firstPass.updates.inputIndex = i
        firstPass.updates.sampleIndex = firstEstimates.forward.count
        inputs.append((imu, magnetometer))
        if let o = filter.step(imu: imu, magnetometer: magnetometer, recorder: &firstPass) {
            firstEstimates.forward.append(o)
            firstEstimates.sampleOfEstimate.append(Int32(truncatingIfNeeded: i))
        }
    }

    /// Runs the second and backward passes and hands every smoothed estimate to `body` with the
    /// index of its sample and the sample itself, in order. The smoother is empty afterwards.
    public mutating func finish(
        _ body: (Int, FusionOutput, ImuSample, MagnetometerSample?) throws -> Void
    ) rethrows {
        let inputs = self.inputs
        let inclination = firstPass.inclination.symmetricLowPass(
            tau: filter.settings.accelerometerLowPassSeconds, maximumStep: filter.settings.maximumStepSeconds
        ) { inputs[$0].imu.timestamp }
        var kept = firstPass.inclination.magnetometerUsed
        // The first pass smoothed, to judge its readings by.
        var pass = firstEstimates
        firstEstimates = SmoothedPass()
        pass.records = firstPass.updates.records
        pass.headingInSegment = firstPass.updates.headingInSegment
        firstPass = FirstPassRecording()
        let tolerance = filter.settings.smootherReadingToleranceDegrees
        if tolerance > 0 {
            Self.smoothBackward(&pass.records)
            if let agreeing = Self.readings(kept, agreeingWith: pass, inputs: inputs, toleranceDegrees: tolerance) {
                kept = agreeing
            }
        }
        forwardPass(inclination: inclination, magnetometerUsed: kept, into: &pass)
        try pass.smoothed { i, s in try body(i, s, inputs[i].imu, inputs[i].magnetometer) }
        self.inputs = ChunkedStorage()
        filter = pass.filter
    }

    /// The second pass: the filter over every sample with the given inclination measurements and
    /// gate decisions, recorded, then smoothed backwards. A third pass, with the forces rotated by
    /// this pass's smoothed attitude, would cost a whole pass for a change within the noise.
    /// `pass` is emptied first; the storage it had is refilled.
    func forwardPass(inclination: [UpdateForce], magnetometerUsed: BitSet, into pass: inout SmoothedPass) {
        var recording = SmootherRecording(inclination: inclination)
        recording.magnetometerUsed = magnetometerUsed
        // Moved, not copied: the recording must hold the only reference, or appending would copy.
        recording.records = pass.records
        pass.records = ChunkedStorage()
        recording.records.removeAllKeepingCapacity()
        pass.forward.removeAllKeepingCapacity()
        pass.sampleOfEstimate.removeAllKeepingCapacity()
        var f = KalmanFilter(settings: filter.settings)
        if let r = reference { f.setMagneticReference(strengthMicrotesla: r.0, dipDegrees: r.1) }
        var nextNotice = 0
        for i in inputs.indices {
            while nextNotice < calibrationNotices.count && calibrationNotices[nextNotice].inputIndex <= i {
                f.noteCalibration(calibrationNotices[nextNotice].notice)
                nextNotice += 1
            }
            recording.sampleIndex = pass.forward.count
            recording.inputIndex = i
            if let o = f.step(imu: inputs[i].imu, magnetometer: inputs[i].magnetometer, recorder: &recording) {
                pass.forward.append(o)
                pass.sampleOfEstimate.append(Int32(truncatingIfNeeded: i))
            }
        }
        pass.records = recording.records
        pass.headingInSegment = recording.headingInSegment
        recording = SmootherRecording(inclination: [])  // the records' only owner is now `pass`
        Self.smoothBackward(&pass.records)
        f.frontEnd.unseen.refreshSensorFixed()  // with everything the whole recording showed
        pass.unseen = f.frontEnd.unseen
        pass.filter = f
    }

    /// The magnetometer readings of `used` whose heading, seen with the smoothed attitude, is within
    /// `toleranceDegrees` of the smoothed heading; nil when all are.
    static func readings(
        _ used: BitSet, agreeingWith pass: SmoothedPass,
        inputs: ChunkedStorage<(imu: ImuSample, magnetometer: MagnetometerSample?)>,
        toleranceDegrees: Double
    ) -> BitSet? {
        var kept = used
        var removed = 0
        let tolerance = toleranceDegrees / degreesPerRadian
        // `used` holds only samples whose reading the gate judged.
        pass.smoothed(wanted: { used.contains($0) }) { i, s in
            guard let m = inputs[i].magnetometer else { return }
            // As the filter's heading update sees it: the clockwise angle of the horizontal field from +y.
            let earth = s.orientation.rotationMatrix * m.fieldMicrotesla
            if abs(atan2Small(earth.x, earth.y)) > tolerance {
                kept.remove(i)
                removed += 1
            }
        }
        return removed > 0 ? kept : nil
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

/// One forward pass, recorded and smoothed: what `finish` turns into estimates.
struct SmoothedPass {
    var forward = ChunkedStorage<FusionOutput>()
    var sampleOfEstimate = ChunkedStorage<Int32>()
    var records = ChunkedStorage<SmootherRecord>()
    var headingInSegment: [Int: Bool] = [:]
    /// The unseen disturbance as the whole recording showed it.
    var unseen = UnseenDisturbance.Variance()
    var filter = KalmanFilter()

    /// Every smoothed estimate with the index of its sample, in order; only those `wanted` says.
    func smoothed(wanted: (Int) -> Bool = { _ in true }, _ body: (Int, FusionOutput) throws -> Void) rethrows {
        var k = -1
        var segmentMeasuredHeading = false
        for i in forward.indices {
            while k + 1 < records.count, records[k + 1].sampleIndex <= i {
                k += 1
                if records[k].kind == .start { segmentMeasuredHeading = headingInSegment[k] ?? false }
            }
            let input = Int(sampleOfEstimate[i])
            guard wanted(input) else { continue }
            let o = forward[i]
            guard k >= 0, records[k].kind != .segmentEnd else {
                try body(input, o)
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
            if segmentMeasuredHeading {
                // Every sample of the segment has seen its heading measurements, past and future.
                // Uncalibrated readings: as wide as the forward pass said, which counts how far they can
                // turn the compass (the smoothed state cannot know better), and 180 degrees when it said
                // nothing.
                let uncalibrated = s.flags.contains(.magnetometerUncalibrated)
                let forward = o.headingVarianceDegrees2 ?? .infinity
                let unbounded = forward >= MagnetometerCalibrationNotice.uncalibratedVarianceDegrees2
                var degrees2 =
                    MagnetometerCalibrationNotice.ownVarianceDegrees2(
                        variance * degreesPerRadian * degreesPerRadian,
                        uncalibratedBoundRadians: uncalibrated && unbounded ? .pi : nil)
                    + unseen.degrees2(eastRow: s.orientation.rotationMatrix.row0)
                if uncalibrated && !unbounded { degrees2 = max(degrees2, forward) }
                s.flags.remove(.initialising)
                s.headingVarianceDegrees2 = degrees2.isFinite ? degrees2 : nil
            }
            try body(input, s)
        }
    }
}

/// The smoother as the pipeline holds any filter: `update` keeps the sample and returns nil (its
/// estimate comes from `finish`, after the whole recording); what it reports meanwhile (orientation,
/// bias, gate) is its forward pass's. It takes no GNSS and fuses one magnetometer.
extension KalmanSmoother: OrientationFilter {
    public mutating func update(imu: ImuSample, magnetometer: MagnetometerSample?) -> FusionOutput? {
        add(imu: imu, magnetometer: magnetometer)
        return nil
    }
    public var gyroBias: Vector3 { filter.gyroBias }
    public var orientation: Quaternion { filter.orientation }
    public var magneticGate: MagneticDisturbanceGate { filter.magneticGate }
}
