#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Parameters of `OnlineCalibrator`.
public struct OnlineCalibrationSettings: Sendable, Equatable {
    /// Readings kept per direction bin (32 bins over the sphere); older ones are replaced. Default 8.
    public var readingsPerBin = 8
    /// Fraction of the 32 direction bins that must hold readings before a fit is tried. Default 0.6.
    public var minimumCoverage = 0.6
    /// Coverage from which the ellipsoid (soft-iron) fit is tried instead of the sphere alone. Default 0.8.
    public var ellipsoidCoverage = 0.8
    /// A fit is accepted only when its RMS residual is at most this, microtesla. Default 2.
    public var maximumResidualMicrotesla = 2.0
    /// Plausible field strengths, microtesla (the earth's field is 22-67 uT everywhere). Default 20...70.
    public var plausibleRadiusMicrotesla: ClosedRange<Double> = 20...70
    /// Readings older than this are not used, seconds: a fit describes the sensor as it is now (a magnet
    /// attached or removed changes it). Default 30.
    public var maximumReadingAgeSeconds = 30.0
    /// Seconds between fit attempts. Default 0.5.
    public var refitSeconds = 0.5
    /// The calibration is declared degraded when new readings miss its sphere by more than
    /// max(this, 3 x the fit's RMS) microtesla on average for `degradedSeconds`. Default 3.
    public var degradedResidualMicrotesla = 3.0
    /// See `degradedResidualMicrotesla`. Default 5.
    public var degradedSeconds = 5.0
    /// The gyro-aided hard-iron fit, tried while no calibration is accepted or the readings miss the
    /// current one (see `degradedResidualMicrotesla`).
    public var gyroAided = GyroAidedFitSettings()
    /// A new hard iron leaves the earth's field as it was: a gyro-aided fit whose field strength
    /// differs from the accepted calibration's radius by more than this fraction is an external
    /// disturbance, not a new hard iron. Default 0.1 (the gate's strength tolerance).
    public var maximumStrengthChange = 0.1
    /// Likewise for the dip against the dip seen with the accepted calibration, degrees. Default 5.
    public var maximumDipChangeDegrees = 5.0
    /// A gyro-aided fit is accepted only when its RMS residual per axis is at most this, microtesla:
    /// about twice the per-axis noise of a consumer magnetometer (0.6 uT measured at rest on the
    /// BROAD sensor), leaving room for a degree of gyro integration error. Fast turning (a gyro scale
    /// error) and a field that changes with position both raise it. Default 1.25.
    public var maximumGyroAidedResidualMicrotesla = 1.25
    /// What a gyro-aided offset can resolve, microtesla (its error on real recordings is about 1 uT;
    /// 2 uT turn the heading by 7 degrees at a 16 uT horizontal field). A first gyro-aided fit whose
    /// offset is smaller finds the readings calibrated already and applies none; a sphere or
    /// ellipsoid fit whose offset differs from the latest gyro-aided one by more is refused (fitted to
    /// part of the sphere it can wander, the gyro-aided one cannot). Default 2.
    public var maximumOffsetDisagreementMicrotesla = 2.0
    /// Gyro-aided windows averaged after a new hard iron. Default 8.
    public var gyroAidedRefinements = 8
    /// The gravity-aided fit (`GravityAidedHardIronFit`), tried while the readings cover too little of
    /// the sphere for the sphere and ellipsoid fits (a device turned about the vertical).
    public var gravityAided = GravityAidedFitSettings()
    /// Largest ratio of the soft-iron correction's eigenvalues a fit may have: the soft iron of a phone's
    /// or a robot's own parts stretches the field by a few percent, by a fifth either way at most (1.2
    /// against 0.85: 1.4); a correction that stretches one axis by more than 1.6 times another is an
    /// ellipsoid fitted to too little of the sphere (or to a field fixed in the world), not soft iron
    /// (such fits on the simulator's walker reach 2.9 to 3.9). Default 1.6.
    public var maximumSoftIronAnisotropy = 1.6
    /// A fit replaces the calibration in force (or none) only when it explains the same readings with
    /// at most this share of that calibration's RMS residual (each given its own best field strength):
    /// evidence that it is better, not a description of other readings. Default 0.9.
    public var requiredResidualRatio = 0.9
    /// A refit replaces an accepted calibration only with an RMS residual within this multiple of the
    /// readings' noise (`OnlineCalibrator.strengthNoise`) or within the accepted fit's own. Default 1.5.
    public var noiseMultiple = 1.5
    public init() {}
}

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
    public enum State: UInt8, Sendable { case uncalibrated = 0, collecting = 1, calibrated = 2, degraded = 3 }

    public var settings: OnlineCalibrationSettings
    public private(set) var calibration: MagnetometerCalibration?
    public private(set) var fit: CalibrationFit?
    public private(set) var state: State = .uncalibrated
    /// Readings per direction bin (raw, microtesla) with their times.
    var bins: [[BinnedReading]] = Array(repeating: [], count: 32)
    /// The vertical from the gyro and the accelerometer (`addMotion`), for the gravity-aided fit.
    var vertical = VerticalTracker()
    /// Gravity-aided fits accepted.
    public private(set) var gravityAidedFits = 0
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
    public private(set) var misfitting = false
    var gyroFit = GyroAidedHardIronFit()
    /// The most turning a gyro-aided window had seen at any attempt to fit it
    /// (`GyroAidedHardIronFit.rotationSpread`): why no gyro-aided fit came, when none did.
    public private(set) var largestRotationSpread = 0.0
    /// The latest specific force, m/s^2, sensor frame (for the dip).
    var latestForce: Vector3?
    /// The dip seen with the accepted calibration while it fits, degrees (low-passed).
    public private(set) var calibratedDipDegrees: Double?
    /// Gyro-aided fits accepted.
    public private(set) var gyroAidedFits = 0
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
            && (calibration == nil || misfitting
                || (!changeOffsets.isEmpty && changeOffsets.count < settings.gyroAidedRefinements))
    }

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
        } else if gyroFit.startTime != nil {
            gyroFit.reset()
        }
        guard time - (lastFitTime ?? -.infinity) >= settings.refitSeconds else { return nil }
        lastFitTime = time
        if wantsGyroFit, let fit = tryGyroAidedFit() { return fit }
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

    /// The gyro-aided fit's offset, accepted when it explains the readings to the noise a sphere fit
    /// is held to and, when a calibration was accepted before, keeps its field strength and dip (a
    /// magnet attached changes the offset, not the earth's field). The soft iron is kept; the readings
    /// binned before describe the old offset and are dropped.
    mutating func tryGyroAidedFit() -> CalibrationFit? {
        defer { if gyroFit.seconds >= settings.gyroAided.windowSeconds { gyroFit.reset() } }
        guard let s = gyroFit.solve() else {
            largestRotationSpread = max(largestRotationSpread, gyroFit.rotationSpread ?? 0)
            return nil
        }
        largestRotationSpread = max(largestRotationSpread, s.rotationSpread)
        let strength = s.field.norm
        guard s.rmsResidualMicrotesla <= settings.maximumGyroAidedResidualMicrotesla,
            settings.plausibleRadiusMicrotesla.contains(strength)
        else { return nil }
        if let previous = calibration {
            guard abs(strength / previous.fieldRadiusMicrotesla - 1) <= settings.maximumStrengthChange else {
                return nil
            }
            if let dip = calibratedDipDegrees, let seen = s.dipDegrees,
                abs(seen - dip) > settings.maximumDipChangeDegrees
            {
                return nil
            }
        }
        let softIron = calibration?.softIronCorrection ?? .identity
        guard let inverse = softIron.inverse else { return nil }
        var offset = inverse * s.correctedOffset
        // A first fit assumes no soft iron: the readings seen so far must lie on its sphere as a sphere
        // fit's must (soft iron stretches them into an ellipsoid the fit cannot see in a few seconds).
        if calibration == nil {
            let readings = recentReadings
            let squares = readings.reduce(0.0) {
                let miss = ($1 - offset).norm - strength
                return $0 + miss * miss
            }
            guard
                readings.isEmpty
                    || (squares / Double(readings.count)).squareRoot() <= settings.maximumResidualMicrotesla
            else { return nil }
        }
        let refining = !misfitting && !changeOffsets.isEmpty
        if refining {
            // A further window after a new hard iron: it must agree with the change, then the mean applies.
            guard let current = calibration,
                (offset - current.hardIronOffsetMicrotesla).norm <= 2 * settings.maximumOffsetDisagreementMicrotesla
            else { return nil }
            changeOffsets.append(offset)
            offset = changeOffsets.reduce(Vector3.zero, +) / Double(changeOffsets.count)
        } else if calibration == nil && offset.norm <= settings.maximumOffsetDisagreementMicrotesla {
            offset = .zero  // the readings are calibrated already, as far as the fit can tell
            changeOffsets = []
        } else {
            changeOffsets = [offset]
        }
        let accepted = MagnetometerCalibration(
            hardIronOffsetMicrotesla: offset, softIronCorrection: softIron,
            fieldRadiusMicrotesla: calibration?.fieldRadiusMicrotesla ?? strength)
        let result = CalibrationFit(
            model: .gyroAided, calibration: accepted, rmsResidualMicrotesla: s.rmsResidualMicrotesla,
            meanResultantLength: .nan, directionCoverage: .nan, readingCount: s.readingCount)
        // After a new hard iron the readings binned before describe the old offset, and directions are
        // judged from the new one.
        if calibration != nil && !refining { forgetReadings(centre: accepted.hardIronOffsetMicrotesla) }
        calibration = accepted
        fit = result
        state = .calibrated
        residualLowPass = 0
        degradedSince = nil
        misfitting = false
        gyroAidedFits += 1
        gyroAidedOffset = accepted.hardIronOffsetMicrotesla
        gyroFit.reset()
        return result
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
        bins = Array(repeating: [], count: bins.count)
        nextSlot = Array(repeating: 0, count: bins.count)
        meanSum = .zero
        meanCount = 0
        centreEstimate = centre
    }

    /// The gravity-aided fit on the recent readings that have a vertical, accepted when it explains them
    /// within its residual limit, the horizontal field turned round, the strength is plausible, and it
    /// explains them better than the calibration in force (or none). The soft iron is kept.
    mutating func tryGravityAidedFit() -> CalibrationFit? {
        let limits = settings.gravityAided
        let oldest = latestTime - settings.maximumReadingAgeSeconds
        let softIron = calibration?.softIronCorrection ?? .identity
        let binned = bins.flatMap { $0 }
        let readings = binned.compactMap { r -> GravityAidedHardIronFit.Reading? in
            guard r.time >= oldest, let up = r.up else { return nil }
            return GravityAidedHardIronFit.Reading(field: softIron * r.field, up: up)
        }
        guard readings.count >= limits.minimumReadings, let inverse = softIron.inverse else { return nil }
        // Only for readings the calibration in force (or none) plainly does not explain, or to refine an
        // earlier gravity-aided fit: readings already within the noise of a sphere leave nothing for five
        // more unknowns to find but noise.
        let inForceResidual = Self.gravityResidual(
            of: calibration ?? .uncalibrated, readings: binned, since: oldest,
            plausible: settings.plausibleRadiusMicrotesla)
        // Readings no correction explains within that limit, while none is in force, are fitted too: only a
        // fit that explains them clearly better is taken, else they are taken as calibrated already.
        let noneExplains = calibration == nil && inForceResidual <= limits.maximumResidualMicrotesla
        guard inForceResidual > limits.maximumResidualMicrotesla || fit?.model == .gravityAided || noneExplains else {
            return nil
        }
        let start = calibration.map { softIron * $0.hardIronOffsetMicrotesla }
        guard let s = GravityAidedHardIronFit.robustFit(readings, start: start, settings: limits),
            s.rmsResidualMicrotesla <= limits.maximumResidualMicrotesla,
            s.horizontalResultant <= limits.maximumHorizontalResultant,
            s.headingSigmaDegrees <= limits.maximumHeadingSigmaDegrees,
            s.arcDegrees >= limits.minimumArcDegrees,
            settings.plausibleRadiusMicrotesla.contains(s.strengthMicrotesla)
        else { return nil }
        // Readings that surround the fitted centre (the device turned over) are the sphere and ellipsoid
        // fits' to judge: they see soft iron, which over a turn in every direction this fit would take
        // for noise and trim away.
        let directions = Set(
            readings.compactMap { ($0.field - s.correctedOffset).normalized }.map(
                CalibrationFitter.nearestDirection(to:)))
        guard Double(directions.count) / Double(bins.count) < settings.minimumCoverage else { return nil }
        // A new hard iron leaves the earth's field as it was (as for a gyro-aided fit): a fit that changes
        // the strength or the dip seen with the calibration in force took in a field fixed in the world.
        // An earlier gravity-aided fit knew the strength only as well as its prior: refined freely.
        if let current = calibration, fit?.model != .asIs, fit?.model != .gravityAided {
            let radius = current.fieldRadiusMicrotesla
            if radius > 0, abs(s.strengthMicrotesla / radius - 1) > settings.maximumStrengthChange { return nil }
            if let dip = calibratedDipDegrees, abs(s.dipDegrees - dip) > settings.maximumDipChangeDegrees { return nil }
        }
        let candidate = MagnetometerCalibration(
            hardIronOffsetMicrotesla: inverse * s.correctedOffset, softIronCorrection: softIron,
            fieldRadiusMicrotesla: s.strengthMicrotesla)
        let candidateResidual = Self.gravityResidual(
            of: candidate, readings: binned, since: oldest, plausible: settings.plausibleRadiusMicrotesla)
        // An offset within what such a fit resolves (`maximumOffsetDisagreementMicrotesla`) finds the
        // readings calibrated already, as a first gyro-aided fit does.
        let resolved = s.correctedOffset.norm > settings.maximumOffsetDisagreementMicrotesla
        guard candidateResidual <= settings.requiredResidualRatio * inForceResidual, resolved || !noneExplains else {
            guard noneExplains else { return nil }
            let strength = finiteMedian(readings.map(\.field.norm))
            return acceptAsIs(
                CalibrationFit(
                    model: .asIs,
                    calibration: MagnetometerCalibration(
                        hardIronOffsetMicrotesla: .zero, fieldRadiusMicrotesla: strength),
                    rmsResidualMicrotesla: inForceResidual, meanResultantLength: s.horizontalResultant,
                    directionCoverage: coverage, readingCount: readings.count))
        }
        let result = CalibrationFit(
            model: .gravityAided, calibration: candidate, rmsResidualMicrotesla: s.rmsResidualMicrotesla,
            meanResultantLength: s.horizontalResultant, directionCoverage: coverage, readingCount: s.readingCount)
        calibration = candidate
        fit = result
        state = .calibrated
        residualLowPass = 0
        degradedSince = nil
        misfitting = false
        gravityAidedFits += 1
        if centreEstimate.map({ ($0 - candidate.hardIronOffsetMicrotesla).norm > 1 }) ?? true {
            centreEstimate = candidate.hardIronOffsetMicrotesla
            rebin(around: candidate.hardIronOffsetMicrotesla)
        }
        return result
    }

    /// RMS residual of a calibration on readings with their verticals, as the gravity-aided fit measures
    /// its own: |calibrated| about its median and the vertical component about its median, microtesla.
    /// Infinite when the mean strength is outside `plausible`: readings that are no earth field are
    /// explained by nothing (raw readings carrying hundreds of microtesla of hard iron, however steady).
    static func gravityResidual(
        of cal: MagnetometerCalibration, readings: [BinnedReading], since oldest: Double,
        plausible: ClosedRange<Double>
    ) -> Double {
        var strengths: [Double] = [], verticals: [Double] = []
        for r in readings where r.time >= oldest {
            guard let up = r.up else { continue }
            let m = cal.apply(r.field)
            strengths.append(m.norm)
            verticals.append(m.dot(up))
        }
        guard strengths.count > 1 else { return .infinity }
        let strength = finiteMedian(strengths), vertical = finiteMedian(verticals)
        guard plausible.contains(strength) else { return .infinity }
        // A robust scale: a magnet passed by weighs on neither calibration's score.
        let misses = zip(strengths, verticals).map { s, v in
            (((s - strength) * (s - strength) + (v - vertical) * (v - vertical)) / 2).squareRoot()
        }
        return robustScale(misses)
    }

    mutating func tryFit() -> CalibrationFit? {
        let readings = explainedReadings(recentReadings)
        var candidates: [CalibrationFit] = []
        if case .success(let s) = CalibrationFitter.fitSphere(readings) { candidates.append(s) }
        if coverage >= settings.ellipsoidCoverage, case .success(let e) = CalibrationFitter.fitEllipsoid(readings) {
            candidates.append(refined(e, readings))
        }
        // Soft iron found once stays: with less coverage than a fresh ellipsoid needs, the accepted one is
        // refined from where it is (a sphere cannot describe the readings any more).
        if let current = calibration, current.softIronCorrection != .identity,
            case .success(let assessed) = CalibrationFitter.assess(
                current, model: .ellipsoid, readings: readings, settings: .init())
        {
            candidates.append(refined(assessed, readings))
        }
        // An ellipsoid's nine unknowns need the readings to cover the sphere about its own centre (the bins
        // are about the best centre known, which before a first fit is the mean reading: a patch of the
        // sphere can fill them, and an ellipsoid through that patch fits it to the noise).
        func acceptable(_ f: CalibrationFit) -> Bool {
            f.rmsResidualMicrotesla <= settings.maximumResidualMicrotesla
                && settings.plausibleRadiusMicrotesla.contains(f.calibration.fieldRadiusMicrotesla)
                && Self.plausibleSoftIron(f.calibration.softIronCorrection, settings.maximumSoftIronAnisotropy)
                && (f.model != .ellipsoid || f.directionCoverage >= settings.minimumCoverage)
        }
        let best = candidates.filter(acceptable).min(by: { $0.rmsResidualMicrotesla < $1.rmsResidualMicrotesla })
        // No correction is a calibration too: while none is in force (or the readings were found calibrated
        // already), a fit must explain the same readings clearly better than the readings as they come.
        if calibration == nil || fit?.model == .asIs, let asIs = Self.asIsFit(readings), acceptable(asIs),
            best.map({ Self.relativeResidual($0) > settings.requiredResidualRatio * Self.relativeResidual(asIs) })
                ?? true
        {
            return calibration == nil ? acceptAsIs(asIs) : nil
        }
        guard let best else { return nil }
        // A gyro-aided offset assumes no soft iron; an ellipsoid fitted to most directions knows better.
        if let g = gyroAidedOffset,
            best.model != .ellipsoid || best.directionCoverage < settings.ellipsoidCoverage,
            (best.calibration.hardIronOffsetMicrotesla - g).norm > settings.maximumOffsetDisagreementMicrotesla
        {
            return nil
        }
        // The earth's field keeps its angle to gravity however the device turns: a fit whose calibrated
        // readings do not (a degenerate ellipsoid through part of the sphere, a field fixed in the world
        // taken in) is refused unless the calibration in force keeps that angle no better.
        let oldest = latestTime - settings.maximumReadingAgeSeconds
        let withVertical = bins.flatMap { $0 }
        // Without verticals both are infinite and the check passes.
        let candidateVertical = Self.gravityResidual(
            of: best.calibration, readings: withVertical, since: oldest, plausible: settings.plausibleRadiusMicrotesla)
        let inForceVertical = Self.gravityResidual(
            of: calibration ?? .uncalibrated, readings: withVertical, since: oldest,
            plausible: settings.plausibleRadiusMicrotesla)
        guard candidateVertical <= max(settings.gravityAided.maximumResidualMicrotesla, inForceVertical) else {
            return nil
        }
        // A calibration given (a file, fixed values) is replaced only by a fit that explains the same
        // readings clearly better, each about its own field strength; one learned here is refined by any
        // that is no worse there (its readings cover more of the sphere by now). Either way the fit must
        // explain them to the noise of the readings or as well as the accepted fit did: a residual above
        // both describes a field that is not the sensor's (steel walked along bends the readings, which a
        // fit then takes in). A degraded calibration no longer describes the sensor.
        if let current = calibration, state != .degraded {
            let ratio = fit == nil ? settings.requiredResidualRatio : 1
            guard let inForce = Self.assessed(current, readings),
                Self.relativeResidual(best) <= ratio * Self.relativeResidual(inForce),
                best.rmsResidualMicrotesla
                    <= max(settings.noiseMultiple * strengthNoise, 1.05 * (fit?.rmsResidualMicrotesla ?? 0))
            else { return nil }
        }
        calibration = best.calibration
        fit = best
        state = .calibrated
        residualLowPass = 0
        degradedSince = nil
        return best
    }

    /// The readings a refit of the calibration in force learns from: those it explains within
    /// max(3 uT, 3 robust sigma) of its own strength. The others saw a field it does not describe: one
    /// fixed in the world (a magnet passed, steel walked along), or a sensor that changed, which shows
    /// as the calibration degrading (then every reading counts, and the gyro-aided fit runs).
    func explainedReadings(_ readings: [Vector3]) -> [Vector3] {
        guard let current = calibration, state != .degraded, readings.count > 1 else { return readings }
        let strengths = readings.map { current.apply($0).norm }
        let strength = finiteMedian(strengths)
        let misses = strengths.map { abs($0 - strength) }
        let limit = max(settings.gravityAided.maximumResidualMicrotesla, 3 * robustScale(misses))
        return zip(readings, misses).filter { $0.1 <= limit }.map(\.0)
    }

    /// The readings as they come, assessed as a calibration: no correction, the radius their median
    /// strength. Nil when they are one-sided.
    static func asIsFit(_ readings: [Vector3]) -> CalibrationFit? {
        assessed(MagnetometerCalibration(hardIronOffsetMicrotesla: .zero, fieldRadiusMicrotesla: 0), readings)
            .map {
                var f = $0
                f.model = .asIs
                return f
            }
    }

    /// RMS residual over the fit's radius: what fits of different scale are compared by (an ellipsoid's
    /// correction and radius can shrink together, shrinking the residual in microtesla with them).
    static func relativeResidual(_ f: CalibrationFit) -> Double {
        f.rmsResidualMicrotesla / f.calibration.fieldRadiusMicrotesla
    }

    /// A calibration assessed on readings about its own best field strength (the median calibrated
    /// strength), as a sphere. Nil when the calibrated readings are one-sided.
    static func assessed(_ cal: MagnetometerCalibration, _ readings: [Vector3]) -> CalibrationFit? {
        let strength = finiteMedian(readings.map { cal.apply($0).norm })
        var sized = cal
        sized.fieldRadiusMicrotesla = strength
        guard strength > 0,
            case .success(let f) = CalibrationFitter.assess(
                sized, model: .sphere, readings: readings, settings: .init())
        else { return nil }
        return f
    }

    /// Takes the readings as calibrated already: no correction, with the evidence in `asIs`.
    mutating func acceptAsIs(_ asIs: CalibrationFit) -> CalibrationFit {
        calibration = asIs.calibration
        fit = asIs
        state = .calibrated
        residualLowPass = 0
        degradedSince = nil
        misfitting = false
        return asIs
    }

    /// True when the soft-iron correction is symmetric positive definite with eigenvalues within
    /// `anisotropy` of each other.
    static func plausibleSoftIron(_ w: Matrix3, _ anisotropy: Double) -> Bool {
        if w == .identity { return true }
        guard let eigen = SymmetricEigen3(w) else { return false }
        let low = eigen.values.x, high = eigen.values.z
        return low > 0 && high <= anisotropy * low
    }

    /// Levenberg-Marquardt on r_i = |W (m_i - c)| - R over the centre and the symmetric W (9
    /// parameters, R held), from the algebraic ellipsoid fit. Falls back to the input if no step helps.
    func refined(_ start: CalibrationFit, _ readings: [Vector3]) -> CalibrationFit {
        let radius = start.calibration.fieldRadiusMicrotesla
        func unpack(_ p: [Double]) -> MagnetometerCalibration {
            MagnetometerCalibration(
                hardIronOffsetMicrotesla: Vector3(p[0], p[1], p[2]),
                softIronCorrection: Matrix3(p[3], p[6], p[7], p[6], p[4], p[8], p[7], p[8], p[5]),
                fieldRadiusMicrotesla: radius)
        }
        func residuals(_ p: [Double]) -> [Double] {
            let c = unpack(p)
            return readings.map { c.apply($0).norm - radius }
        }
        let c0 = start.calibration.hardIronOffsetMicrotesla, w0 = start.calibration.softIronCorrection
        var p = [c0.x, c0.y, c0.z, w0.m00, w0.m11, w0.m22, w0.m01, w0.m02, w0.m12]
        var r = residuals(p)
        var cost = r.reduce(0) { $0 + $1 * $1 }
        var lambda = 1e-3
        for _ in 0..<20 {
            // Numerical Jacobian (9 columns), then the damped step from an augmented least-squares problem.
            var jacobian = [Double](repeating: 0, count: (readings.count + 9) * 9)
            for j in 0..<9 {
                var q = p
                let h = 1e-6 * max(1, abs(p[j]))
                q[j] += h
                let rj = residuals(q)
                for i in 0..<readings.count { jacobian[i * 9 + j] = (rj[i] - r[i]) / h }
            }
            for j in 0..<9 { jacobian[(readings.count + j) * 9 + j] = lambda.squareRoot() }
            let rhs = r.map { -$0 } + [Double](repeating: 0, count: 9)
            guard
                case .success(let step) = LeastSquares.solve(
                    rowMajor: jacobian, unknowns: 9, rhs: rhs, minimumConditioning: 1e-14)
            else { break }
            let trial = zip(p, step.x).map(+)
            let rt = residuals(trial)
            let trialCost = rt.reduce(0) { $0 + $1 * $1 }
            if trialCost < cost {
                p = trial
                r = rt
                let improvement = cost - trialCost
                cost = trialCost
                lambda = max(1e-9, lambda / 5)
                if improvement < 1e-10 * cost { break }
            } else {
                lambda *= 10
                if lambda > 1e6 { break }
            }
        }
        guard cost.isFinite, cost < start.rmsResidualMicrotesla * start.rmsResidualMicrotesla * Double(readings.count)
        else { return start }
        if case .success(let assessed) = CalibrationFitter.assess(
            unpack(p), model: .ellipsoid, readings: readings, settings: .init())
        {
            return assessed
        }
        return start
    }
}
