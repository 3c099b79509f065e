/// One magnetometer besides the primary, as the Kalman filter keeps it: its own disturbance gate and
/// calibration state, and the readings waiting for the next IMU sample.
public struct OtherMagnetometer: Sendable {
    public let name: String
    public internal(set) var gate: MagneticDisturbanceGate
    /// False while its calibration owner says no calibration is applied: it then has no say.
    public internal(set) var calibrated = true
    /// Readings (microtesla, calibrated, body axes) not fused yet, oldest first.
    var waiting: [MagnetometerSample] = []
    var previousTime: Double?
    /// Its accepted heading innovations since the last measurement update, time-weighted (rad s, s).
    var innovationSum = 0.0, innovationSeconds = 0.0
    /// Readings that were not finite or had no strength.
    public internal(set) var invalid = 0

    init(name: String, gate settings: MagneticGateSettings) {
        self.name = name
        gate = MagneticDisturbanceGate(settings: settings)
    }
}

/// Several magnetometers: each reading is gated by its own magnetometer's gate and judged against
/// the others (`MagnetometerAgreement`); each magnetometer's accepted innovations are averaged over the
/// update interval, and the heading update takes the mean of those averages with the noise of one
/// magnetometer over the interval. Not 1/n of it: `headingNoiseDensity` is mostly what magnetometers
/// on one vehicle share (soft iron left over, the site's field, slow disturbances), which averaging
/// does not remove; their white noise it does.
extension KalmanFilter {
    /// Adds a magnetometer besides the primary (named `primaryName` in the health); returns its
    /// index for `add(_:toMagnetometer:)` (1, 2, ...). Its readings are calibrated and in body axes.
    public mutating func addMagnetometer(named name: String, primaryName: String = "primary") -> Int {
        var other = OtherMagnetometer(name: name, gate: settings.magneticGate)
        if let s = frontEnd.gate.referenceFieldMicrotesla, let d = frontEnd.gate.referenceDipDegrees,
            frontEnd.gate.dipGiven
        {
            other.gate.setReference(strengthMicrotesla: s, dipDegrees: d)
        }
        others.append(other)
        let names = [primaryName] + others.map(\.name)
        var grown = MagnetometerAgreement(names: names, settings: settings.magnetometerAgreement)
        if let old = agreement { for (i, h) in old.health.enumerated() { grown.health[i] = h } }
        agreement = grown
        return others.count
    }

    /// A reading of magnetometer `index` (from `addMagnetometer`), fused with the next IMU sample.
    public mutating func add(_ sample: MagnetometerSample, toMagnetometer index: Int) {
        precondition(index >= 1 && index <= others.count, "no magnetometer \(index)")
        others[index - 1].waiting.append(sample)
        // A stalled IMU must not let readings pile up: the newest few are what counts.
        if others[index - 1].waiting.count > 64 { others[index - 1].waiting.removeFirst(32) }
    }

    /// The calibration of magnetometer `index` changed (as `noteCalibration` for the primary). Until
    /// one is applied, its readings have no say: the primary's uncalibrated readings steer only
    /// because nothing better is known.
    public mutating func noteCalibration(_ notice: MagnetometerCalibrationNotice, magnetometer index: Int) {
        precondition(index >= 1 && index <= others.count, "no magnetometer \(index)")
        others[index - 1].calibrated = notice.calibrated
        guard notice.calibrated else { return }
        _ = others[index - 1].gate.follow(notice)
        agreement?.noteCalibration(index, radiusMicrotesla: notice.fieldStrengthMicrotesla)
    }

    /// The heading innovation of this update interval (rad) and the seconds it covers; nil when no
    /// magnetometer was used. Clears the sums. With the primary alone, exactly its time-weighted mean.
    mutating func takeHeadingInnovation() -> (innovation: Double, seconds: Double)? {
        defer {
            headingSum = 0
            headingSeconds = 0
        }
        if others.isEmpty { return headingSeconds > 0 ? (headingSum / headingSeconds, headingSeconds) : nil }
        var sum = 0.0, count = 0, seconds = 0.0
        if headingSeconds > 0 {
            sum += headingSum / headingSeconds
            count += 1
            seconds = headingSeconds
        }
        for i in others.indices where others[i].innovationSeconds > 0 {
            sum += others[i].innovationSum / others[i].innovationSeconds
            count += 1
            seconds = max(seconds, others[i].innovationSeconds)
            others[i].innovationSum = 0
            others[i].innovationSeconds = 0
        }
        return count > 0 ? (sum / Double(count), seconds) : nil
    }

    /// Gates the waiting readings of the other magnetometers against this step's attitude, each turned
    /// back to its own instant with the gyro (a reading of the previous sample, 10 ms old at 100 Hz,
    /// would otherwise lag by the angle turned since: a degree at 90 deg/s).
    /// Returns whether any of them corrected the heading.
    mutating func gateOthers(rotation r: Matrix3, headingVariance: Double, at time: Double) -> Bool {
        var anyUsed = false
        for i in others.indices {
            guard !others[i].waiting.isEmpty else { continue }
            let readings = others[i].waiting
            others[i].waiting.removeAll(keepingCapacity: true)
            for sample in readings {
                let m = sample.fieldMicrotesla
                let strength = m.norm
                guard m.isFinite, strength > 0 else {
                    others[i].invalid += 1
                    continue
                }
                let dt = others[i].previousTime.map { min(max(sample.timestamp - $0, 0), 1) } ?? 0.01
                others[i].previousTime = sample.timestamp
                // Body axes at the reading's instant to body axes now: exp(-w (now - t)) m, to first order.
                let age = min(max(time - sample.timestamp, 0), 0.1)
                guard
                    let reading = EarthFieldReading(
                        earth: r * (m - (latestRate * age).cross(m)), strengthMicrotesla: strength)
                else { continue }
                let dip = reading.dipDegrees, alpha = reading.headingInnovation
                let verdict = others[i].gate.assess(
                    strengthMicrotesla: strength, dipDegrees: dip, headingInnovation: alpha,
                    headingVariance: headingVariance, dt: dt)
                let use = agreement!.assess(
                    i + 1, innovation: alpha, gyroDeviation: others[i].gate.gyroDeviation, gateAccepts: verdict.use,
                    calibrated: others[i].calibrated, dt: dt, at: time, strengthMicrotesla: strength,
                    dipDegrees: dip, referenceStrengthMicrotesla: others[i].gate.referenceFieldMicrotesla,
                    referenceDipDegrees: others[i].gate.referenceDipDegrees)
                guard use, settings.useMagnetometer else { continue }
                let weight = max(dt, 1e-6)
                others[i].innovationSum += alpha * weight
                others[i].innovationSeconds += weight
                secondsSinceMagneticUpdate = 0
                others[i].gate.noteApplied()
                anyUsed = true
            }
        }
        return anyUsed
    }
}
