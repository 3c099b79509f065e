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

    /// The outcome: the fit when it passed, how many readings were left out, and otherwise why not.
    public struct Outcome: Sendable {
        public var fit: CalibrationFit?
        /// The best fit found, passed or not (for showing what is wrong with it).
        public var candidate: CalibrationFit?
        public var leftOut: Int
        public var problem: String
    }

    /// The ellipsoid (or sphere) fit of `readings` (raw, microtesla), with readings off the fitted
    /// surface (over 3 times the rms residual and 2 uT: a magnet passing, a steel desk) left out and
    /// the fit repeated, twice at most. Soft iron only when it cuts the residual by more than a fifth:
    /// fitted to a sphere's noise and uneven coverage, an ellipsoid skews the heading (1.5 % of
    /// anisotropy turns it by about a degree).
    public static func fit(_ readings: [Vector3], limits: Limits) -> Outcome {
        var kept = readings
        var best: CalibrationFit?
        var problem = "no fit"
        for _ in 0..<3 {
            var candidates: [CalibrationFit] = []
            if case .success(let e) = CalibrationFitter.fitEllipsoid(kept),
                e.directionCoverage >= limits.ellipsoidCoverage
            {
                candidates.append(e)
            }
            switch CalibrationFitter.fitSphere(kept) {
            case .success(let sphere): candidates.append(sphere)
            case .failure(let e): problem = "the sphere fit failed: \(e)"
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
        guard let fit = best else { return Outcome(fit: nil, candidate: nil, leftOut: leftOut, problem: problem) }
        func refused(_ why: String) -> Outcome { Outcome(fit: nil, candidate: fit, leftOut: leftOut, problem: why) }
        if fit.directionCoverage < limits.minimumCoverage {
            return refused(
                "the readings cover \(text(100 * fit.directionCoverage)) % of the directions; "
                    + "\(text(100 * limits.minimumCoverage)) % is needed (turn the device through all of them)")
        }
        if fit.rmsResidualMicrotesla > limits.maximumResidualMicrotesla {
            return refused(
                "rms residual \(text(fit.rmsResidualMicrotesla, 2)) uT exceeds "
                    + "\(text(limits.maximumResidualMicrotesla, 1)) uT: the field was disturbed for much of the time")
        }
        if !limits.plausibleRadiusMicrotesla.contains(fit.calibration.fieldRadiusMicrotesla) {
            return refused(
                "the fitted field, \(text(fit.calibration.fieldRadiusMicrotesla, 1)) uT, is outside "
                    + "\(text(limits.plausibleRadiusMicrotesla.lowerBound)) to "
                    + "\(text(limits.plausibleRadiusMicrotesla.upperBound)) uT")
        }
        return Outcome(fit: fit, candidate: fit, leftOut: leftOut, problem: "")
    }

    /// A number with `digits` decimals (CompassCore has no formatter of its own).
    static func text(_ x: Double, _ digits: Int = 0) -> String {
        guard x.isFinite else { return "\(x)" }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let rounded = (abs(x) * scale).rounded() / scale
        var s = "\(Int(rounded))"
        if digits > 0 {
            var fraction = Int(((rounded - rounded.rounded(.down)) * scale).rounded())
            var f = ""
            for _ in 0..<digits {
                f = "\(fraction % 10)" + f
                fraction /= 10
            }
            s += "." + f
        }
        return (x < 0 && rounded != 0 ? "-" : "") + s
    }
}
