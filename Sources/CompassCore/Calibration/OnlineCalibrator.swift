#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A binned raw reading (microtesla) with its time and, when the motion is known, the vertical
/// (unit, sensor frame) at that time.
struct BinnedReading: Sendable {
    var field: Vector3
    var time: Double
    var up: Vector3?
}

/// Hard- and soft-iron calibration learned from normal motion: readings are kept per direction (so
/// coverage, not count, decides), fitted as a sphere and then an ellipsoid, refined by
/// Levenberg-Marquardt on the geometric residuals, and accepted only when the fit is good and the
/// field strength plausible. A later fit replaces the current one only if it is at least as good.
public struct OnlineCalibrator: Sendable {
    /// Where the calibrator is, as calibration/status's `state` carries it.
    public enum State: UInt8, Sendable { case uncalibrated = 0, collecting = 1, calibrated = 2, degraded = 3 }

    public var settings: OnlineCalibrationSettings
    public internal(set) var calibration: MagnetometerCalibration?
    public internal(set) var fit: CalibrationFit? { didSet { jointFitInForce = false } }
    /// True while the calibration in force is the joint gyro-aided fit's (`GyroAidedWindows`): an
    /// offset without soft iron, which a sphere or ellipsoid fit then judges against all the readings.
    public internal(set) var jointFitInForce = false
    /// The gyro's bias the latest joint fit found with the offset, rad/s, sensor frame.
    public internal(set) var gyroBiasEstimate: Vector3?
    public internal(set) var state: State = .uncalibrated
    /// Readings per direction bin (raw, microtesla) with their times.
    var bins: [[BinnedReading]] = Array(repeating: [], count: 32)
    /// The vertical from the gyro and the accelerometer (`addMotion`), for the gravity-aided fit.
    var vertical = VerticalTracker()
    /// Gravity-aided fits accepted.
    public internal(set) var gravityAidedFits = 0
    var latestTime = -Double.infinity
    var nextSlot: [Int] = Array(repeating: 0, count: 32)
    var meanSum = Vector3.zero, meanCount = 0.0
    /// The centre directions are measured from: the latest sphere fit's, else the mean reading.
    var centreEstimate: Vector3?
    var lastFitTime: Double?
    var residualLowPass = 0.0
    var degradedSince: Double?
    /// Low-passed square of the strength's change from one reading to the next, uT^2.
    var strengthStepSquares: Double?
    var previousStrength: (value: Double, time: Double)?
    /// The readings' noise, microtesla: the change of |m| from one reading to the next over sqrt(2) (the
    /// strength does not change as the device turns; a field in the world changes it slowly). Infinite
    /// until readings 0.2 s apart or closer were seen.
    public var strengthNoise: Double { strengthStepSquares.map { ($0 / 2).squareRoot() } ?? .infinity }
    /// True while new readings miss the accepted calibration (the gyro-aided fit then runs).
    public internal(set) var misfitting = false
    var gyroFit = GyroAidedHardIronFit()
    /// The finished gyro-aided windows, solved together while the sensor's iron dominates the raw
    /// readings (`ironDominates`).
    var gyroWindows = GyroAidedWindows()
    /// True when, at the latest fit attempt, the recent raw readings' median strength was more than twice
    /// the strongest earth field: the sensor's own iron dominates them (a phone's hard iron).
    public internal(set) var ironDominates = false
    /// The most turning a gyro-aided window had seen at any attempt to fit it
    /// (`GyroAidedHardIronFit.rotationSpread`): why no gyro-aided fit came, when none did.
    public internal(set) var largestRotationSpread = 0.0
    /// The latest specific force, m/s^2, sensor frame (for the dip).
    var latestForce: Vector3?
    /// The dip seen with the accepted calibration while it fits, degrees (low-passed).
    public internal(set) var calibratedDipDegrees: Double?
    /// Gyro-aided fits accepted.
    public internal(set) var gyroAidedFits = 0
    /// The offset of the latest gyro-aided fit, microtesla.
    var gyroAidedOffset: Vector3?
    /// After a new hard iron, the offsets of the windows since (their mean is applied, each window's
    /// error being independent), until `settings.gyroAidedRefinements` windows agree.
    var changeOffsets: [Vector3] = []

    public init(settings: OnlineCalibrationSettings = .init(), initial: MagnetometerCalibration? = nil) {
        self.settings = settings
        if let initial {
            calibration = initial
            state = .calibrated
        }
        gyroFit = GyroAidedHardIronFit(settings: settings.gyroAided)
    }

    /// Feeds the gyro (rad/s) and the specific force (m/s^2), sensor frame, over `dt` seconds, for
    /// the gyro-aided fit. Without it only the sphere and ellipsoid fits run.
    public mutating func addMotion(rate: Vector3, specificForce: Vector3, dt: Double) {
        guard rate.isFinite, specificForce.isFinite, dt > 0 else { return }
        latestForce = specificForce
        gyroFit.rotate(rate: rate, specificForce: specificForce, dt: dt)
        vertical.update(
            rate: rate, specificForce: specificForce, dt: dt,
            timeConstant: settings.gravityAided.verticalTimeConstantSeconds)
    }

    /// True while the gyro-aided fit collects readings.
    var wantsGyroFit: Bool {
        latestForce != nil
            && (calibration == nil || misfitting || refinesJointly
                || (!changeOffsets.isEmpty && changeOffsets.count < settings.gyroAidedRefinements))
    }

    /// True while the joint gyro-aided fit refines the calibration in force (one of its own) as the
    /// motion goes on.
    var refinesJointly: Bool { ironDominates && !misfitting && jointFitInForce }

    /// Fraction of direction bins holding recent readings (0...1). Zero while the recent readings hardly
    /// spread (RMS distance from their mean below 5 uT): around a resting cluster, noise points every way.
    public var coverage: Double {
        let oldest = latestTime - settings.maximumReadingAgeSeconds
        let recent = recentReadings
        guard recent.count > 1 else { return 0 }
        let mean = recent.reduce(Vector3.zero, +) / Double(recent.count)
        let spread = (recent.reduce(0.0) { $0 + ($1 - mean).squaredNorm } / Double(recent.count)).squareRoot()
        guard spread >= 5 else { return 0 }
        return Double(bins.filter { $0.contains { $0.time >= oldest } }.count) / Double(bins.count)
    }

    /// The binned readings not older than `maximumReadingAgeSeconds`, raw, microtesla.
    var recentReadings: [Vector3] {
        let oldest = latestTime - settings.maximumReadingAgeSeconds
        return bins.flatMap { $0.filter { $0.time >= oldest }.map(\.field) }
    }

    /// Progress toward the first (or next) accepted calibration, percent.
    public var progressPercent: Double {
        state == .calibrated ? 100 : min(100, 100 * coverage / settings.minimumCoverage)
    }

    /// True when the user should make the figure-eight motion.
    public var needsMotion: Bool { state == .uncalibrated || state == .collecting || state == .degraded }

    /// Feeds a raw reading (microtesla) at `time` (seconds). Returns the newly accepted fit, if any.
    public mutating func add(_ raw: Vector3, time: Double) -> CalibrationFit? {
        guard raw.isFinite else { return nil }
        latestTime = time
        let strength = raw.norm
        if let p = previousStrength, time > p.time, time - p.time <= 0.2 {
            let step = (strength - p.value) * (strength - p.value)
            // About 500 steps: seconds at any magnetometer rate, so a magnet's approach hardly counts.
            strengthStepSquares = strengthStepSquares.map { $0 + (step - $0) * 0.002 } ?? step
        }
        previousStrength = (strength, time)
        bin(raw, time: time)
        trackDegradation(raw, time: time)
        if state == .uncalibrated { state = .collecting }
        if wantsGyroFit {
            gyroFit.add((calibration?.softIronCorrection ?? .identity) * raw, time: time)
            gyroFit.keepsReadings = jointly
            if jointly, gyroFit.seconds >= settings.firstFitWindowSeconds {
                if let w = gyroFit.window { gyroWindows.append(w) }
                gyroFit.reset()
            }
        } else if gyroFit.startTime != nil {
            gyroFit.reset()
        }
        guard time - (lastFitTime ?? -.infinity) >= settings.refitSeconds else { return nil }
        lastFitTime = time
        ironDominates = rawStrengthIronDominated
        if !jointly { gyroWindows.removeAll() }
        if jointly, let fit = tryJointGyroAidedFit() { return fit }
        if wantsGyroFit, !jointly, let fit = tryGyroAidedFit() { return fit }
        // Directions are judged from the sphere the recent readings describe, not from their mean
        // (after a long rest the mean is a point on the sphere).
        if case .success(let sphere) = CalibrationFitter.fitSphere(recentReadings),
            settings.plausibleRadiusMicrotesla.contains(sphere.calibration.fieldRadiusMicrotesla),
            sphere.directionCoverage >= 0.5
        {
            let centre = sphere.calibration.hardIronOffsetMicrotesla
            if centreEstimate.map({ ($0 - centre).norm > 1 }) ?? true {
                centreEstimate = centre
                rebin(around: centre)
            }
        }
        let covered = coverage >= settings.minimumCoverage
        if covered, let fit = tryFit() { return fit }
        // Readings that cover the sphere are the sphere and ellipsoid fits' (which see soft iron too);
        // an accepted gravity-aided fit is refined by its own kind.
        guard !covered || fit?.model == .gravityAided else { return nil }
        return tryGravityAidedFit()
    }

    mutating func insert(_ raw: Vector3, time: Double, centre: Vector3) {
        place(BinnedReading(field: raw, time: time, up: vertical.up), centre: centre)
    }

    /// Puts a reading into the bin of its direction from `centre`, replacing the bin's oldest when full.
    mutating func place(_ reading: BinnedReading, centre: Vector3) {
        guard let u = (reading.field - centre).normalized else { return }
        let best = CalibrationFitter.nearestDirection(to: u)
        if bins[best].count < settings.readingsPerBin {
            bins[best].append(reading)
        } else {
            bins[best][nextSlot[best]] = reading
            nextSlot[best] = (nextSlot[best] + 1) % settings.readingsPerBin
        }
    }

    /// Sorts the recent readings into bins again, by direction from `centre`.
    mutating func rebin(around centre: Vector3) {
        let oldest = latestTime - settings.maximumReadingAgeSeconds
        let recent = bins.flatMap { $0 }.filter { $0.time >= oldest }.sorted { $0.time < $1.time }
        bins = Array(repeating: [], count: bins.count)
        nextSlot = Array(repeating: 0, count: bins.count)
        for r in recent { place(r, centre: centre) }
    }

    mutating func trackDegradation(_ raw: Vector3, time: Double) {
        // A loaded calibration without its radius is judged once a fit gives one.
        guard let cal = calibration, cal.fieldRadiusMicrotesla > 0 else { return }
        let calibrated = cal.apply(raw)
        let miss = abs(calibrated.norm - cal.fieldRadiusMicrotesla)
        residualLowPass += (miss - residualLowPass) * 0.02
        let limit = max(settings.degradedResidualMicrotesla, 3 * (fit?.rmsResidualMicrotesla ?? 0))
        misfitting = residualLowPass > limit
        if !misfitting, let up = latestForce?.normalized, let direction = calibrated.normalized {
            let dip = -asin(min(1, max(-1, up.dot(direction)))) * degreesPerRadian
            calibratedDipDegrees = calibratedDipDegrees.map { $0 + (dip - $0) * 0.002 } ?? dip
        }
        if misfitting {
            if degradedSince == nil { degradedSince = time }
            if time - degradedSince! >= settings.degradedSeconds && state == .calibrated {
                // The readings collected so far describe a sensor that has changed: start afresh.
                state = .degraded
                forgetReadings(centre: nil)
            }
        } else {
            degradedSince = nil
            if state == .degraded { state = .calibrated }
        }
    }

    /// A reading from before the calibrator started (raw, microtesla, in time order and before any
    /// `add`): binned for the next fit, never used for the gyro-aided fit (its motion is not known)
    /// nor fitted at once. Readings held back until a magnetometer's mounting was known come this way.
    public mutating func addEarlier(_ raw: Vector3, time: Double) {
        guard raw.isFinite else { return }
        bin(raw, time: time)
        if state == .uncalibrated { state = .collecting }
    }

    /// Counts a reading into the mean and bins it by direction about the best centre known.
    mutating func bin(_ raw: Vector3, time: Double) {
        meanSum += raw
        meanCount += 1
        insert(raw, time: time, centre: centreEstimate ?? calibration?.hardIronOffsetMicrotesla ?? meanSum / meanCount)
    }

    /// The readings from now on are corrected differently (the motors' field is removed from them now):
    /// those collected so far no longer describe the same sensor and are dropped; the accepted
    /// calibration stands until a new fit replaces it.
    public mutating func discardReadings() {
        forgetReadings(centre: centreEstimate)
        gyroFit.reset()
    }

    /// Drops every binned reading (they describe a sensor that has changed); directions are judged from
    /// `centre` until a sphere fit gives one.
    mutating func forgetReadings(centre: Vector3?) {
        gyroWindows.removeAll()
        bins = Array(repeating: [], count: bins.count)
        nextSlot = Array(repeating: 0, count: bins.count)
        meanSum = .zero
        meanCount = 0
        centreEstimate = centre
    }

}
