#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The fits `OnlineCalibrator` tries: gyro-aided (a new hard iron while turning), gravity-aided (too
/// little of the sphere covered), and the sphere-then-ellipsoid fit refined on the geometric residuals,
/// each accepted only when it explains the readings better than the calibration in force.
extension OnlineCalibrator {
    /// The gyro-aided fit's offset, accepted when it explains the readings to the noise a sphere fit
    /// is held to and, when a calibration was accepted before, keeps its field strength and dip (a
    /// magnet attached changes the offset, not the earth's field). The soft iron is kept; the readings
    /// binned before describe the old offset and are dropped.
    mutating func tryGyroAidedFit() -> CalibrationFit? {
        defer { if gyroFit.seconds >= settings.gyroAided.windowSeconds { gyroFit.reset() } }
        let loose = ironDominates
        let residualLimit = loose ? settings.firstFitResidualMicrotesla : settings.maximumGyroAidedResidualMicrotesla
        guard let s = gyroFit.solve(minimumSpread: loose ? settings.firstFitRotationSpread : nil) else {
            largestRotationSpread = max(largestRotationSpread, gyroFit.rotationSpread ?? 0)
            return nil
        }
        largestRotationSpread = max(largestRotationSpread, s.rotationSpread)
        let strength = s.field.norm
        guard s.rmsResidualMicrotesla <= residualLimit,
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
        if calibration == nil,
            let miss = recentSphereMiss(offset: offset, radius: strength),
            miss > (loose ? residualLimit : settings.maximumResidualMicrotesla)
        {
            return nil
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
        // After a new hard iron the readings binned before describe the old offset, and directions are
        // judged from the new one.
        if calibration != nil && !refining { forgetReadings(centre: accepted.hardIronOffsetMicrotesla) }
        gyroFit.reset()
        let result = acceptGyroAided(accepted, rms: s.rmsResidualMicrotesla, readings: s.readingCount)
        gyroAidedOffset = accepted.hardIronOffsetMicrotesla
        return result
    }

    /// RMS miss of the recent raw readings from the sphere of `radius` about `offset`, microtesla; nil
    /// without readings.
    func recentSphereMiss(offset: Vector3, radius: Double) -> Double? {
        let readings = recentReadings
        guard !readings.isEmpty else { return nil }
        let squares = readings.reduce(0.0) {
            let miss = ($1 - offset).norm - radius
            return $0 + miss * miss
        }
        return (squares / Double(readings.count)).squareRoot()
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
        guard let current = calibration, state != .degraded, !jointFitInForce, readings.count > 1 else {
            return readings
        }
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
