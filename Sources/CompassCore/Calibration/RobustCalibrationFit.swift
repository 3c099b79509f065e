/// A whole set of readings fitted at once (a recording, a guided calibration): the ellipsoid (hard and
/// soft iron) or the sphere (hard iron only), readings far off the fitted surface left out and the fit
/// repeated, and the result judged by stated limits.
public enum RobustCalibrationFit {
    /// The limits a fit is judged by.
    public struct Limits: Sendable, Equatable {
        /// Share of the 32 test directions the calibrated readings must reach (0...1).
        public var minimumCoverage: Double
        /// Share needed before an ellipsoid (soft iron) is tried at all.
        public var ellipsoidCoverage: Double
        /// Largest rms residual about the fitted surface, microtesla.
        public var maximumResidualMicrotesla: Double
        /// The fitted field strength must lie here, microtesla (the earth's field anywhere: 20 to 70).
        public var plausibleRadiusMicrotesla: ClosedRange<Double>

        public init(
            minimumCoverage: Double, ellipsoidCoverage: Double, maximumResidualMicrotesla: Double,
            plausibleRadiusMicrotesla: ClosedRange<Double>
        ) {
            self.minimumCoverage = minimumCoverage
            self.ellipsoidCoverage = ellipsoidCoverage
            self.maximumResidualMicrotesla = maximumResidualMicrotesla
            self.plausibleRadiusMicrotesla = plausibleRadiusMicrotesla
        }

        /// The online calibrator's acceptance limits.
        public init(_ online: OnlineCalibrationSettings) {
            self.init(
                minimumCoverage: online.minimumCoverage, ellipsoidCoverage: online.ellipsoidCoverage,
                maximumResidualMicrotesla: online.maximumResidualMicrotesla,
                plausibleRadiusMicrotesla: online.plausibleRadiusMicrotesla)
        }
    }

    /// Why a fit was not accepted; the numbers are those of the fit and of the limit it missed.
    public enum Refusal: Sendable, Equatable {
        /// Neither fit could be made (the sphere fit's error, when it failed).
        case noFit(CalibrationFitError?)
        /// The calibrated readings reach `coverage` of the directions, `required` needed (0...1).
        case coverage(Double, required: Double)
        /// The rms residual, microtesla, above the limit.
        case residual(Double, limit: Double)
        /// The fitted field strength, microtesla, outside the plausible range.
        case radius(Double, plausible: ClosedRange<Double>)
    }

    /// The outcome: the fit when it passed, how many readings were left out, and otherwise why not.
    public struct Outcome: Sendable {
        public var fit: CalibrationFit?
        /// The best fit found, passed or not (for showing what is wrong with it).
        public var candidate: CalibrationFit?
        public var leftOut: Int
        /// Why `fit` is nil.
        public var refusal: Refusal?
    }

    /// The ellipsoid (or sphere) fit of `readings` (raw, microtesla), with readings off the fitted
    /// surface (over 3 times the rms residual and 2 uT: a magnet passing, a steel desk) left out and
    /// the fit repeated, twice at most. Soft iron only when it cuts the residual by more than a fifth:
    /// fitted to a sphere's noise and uneven coverage, an ellipsoid skews the heading (1.5 % of
    /// anisotropy turns it by about a degree).
    public static func fit(_ readings: [Vector3], limits: Limits) -> Outcome {
        var kept = readings
        var best: CalibrationFit?
        var sphereError: CalibrationFitError?
        for _ in 0..<3 {
            var candidates: [CalibrationFit] = []
            if case .success(let e) = CalibrationFitter.fitEllipsoid(kept),
                e.directionCoverage >= limits.ellipsoidCoverage
            {
                candidates.append(e)
            }
            switch CalibrationFitter.fitSphere(kept) {
            case .success(let sphere): candidates.append(sphere)
            case .failure(let e): sphereError = e
            }
            let sphere = candidates.first { $0.model == .sphere }
            let ellipsoid = candidates.first { $0.model != .sphere }
            let chosen: CalibrationFit? =
                switch (sphere, ellipsoid) {
                case (let s?, let e?): e.rmsResidualMicrotesla < 0.8 * s.rmsResidualMicrotesla ? e : s
                case (let s?, nil): s
                case (nil, let e?): e
                case (nil, nil): nil
                }
            guard let fit = chosen else { break }
            best = fit
            let cut = max(3 * fit.rmsResidualMicrotesla, 2)
            let next = kept.filter {
                abs(fit.calibration.apply($0).norm - fit.calibration.fieldRadiusMicrotesla) <= cut
            }
            if next.count == kept.count || next.count < CalibrationFitter.minimumEllipsoidReadings { break }
            kept = next
        }
        let leftOut = readings.count - kept.count
        guard let fit = best else {
            return Outcome(fit: nil, candidate: nil, leftOut: leftOut, refusal: .noFit(sphereError))
        }
        func refused(_ why: Refusal) -> Outcome { Outcome(fit: nil, candidate: fit, leftOut: leftOut, refusal: why) }
        if fit.directionCoverage < limits.minimumCoverage {
            return refused(.coverage(fit.directionCoverage, required: limits.minimumCoverage))
        }
        if fit.rmsResidualMicrotesla > limits.maximumResidualMicrotesla {
            return refused(.residual(fit.rmsResidualMicrotesla, limit: limits.maximumResidualMicrotesla))
        }
        if !limits.plausibleRadiusMicrotesla.contains(fit.calibration.fieldRadiusMicrotesla) {
            return refused(.radius(fit.calibration.fieldRadiusMicrotesla, plausible: limits.plausibleRadiusMicrotesla))
        }
        return Outcome(fit: fit, candidate: fit, leftOut: leftOut, refusal: nil)
    }
}
