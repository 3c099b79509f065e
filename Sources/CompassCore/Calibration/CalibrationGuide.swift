/// How well a guided calibration must fit before it is saved: the rms residual about the fitted
/// surface, in the spirit of ArduPilot's COMPASS_CAL_FIT levels.
public enum CalibrationFitLevel: String, Sendable, CaseIterable {
    case strict, normal, relaxed

    /// The largest rms residual accepted, microtesla: about twice a consumer magnetometer's noise
    /// (strict), room for a little field inhomogeneity (normal), a busy room (relaxed).
    public var maximumResidualMicrotesla: Double {
        switch self {
        case .strict: 0.8
        case .normal: 1.6
        case .relaxed: 3.2
        }
    }
}

/// Settings of `CalibrationGuide`. Every value has its unit and default.
public struct CalibrationGuideSettings: Sendable, Equatable {
    /// Share of the 32 test directions the field must have been seen along before the fit can finish
    /// the calibration (0...1). Default 0.9: soft iron needs nearly the whole sphere.
    public var requiredCoverage = 0.9
    /// Readings a direction needs to count as covered. Default 5 (one is noise passing by).
    public var readingsPerDirection = 5
    /// The fit's residual limit. Default normal (1.6 uT).
    public var fitLevel = CalibrationFitLevel.normal
    /// The earth's field at the site, microtesla (the World Magnetic Model's); nil = not known, any
    /// strength in `plausibleRadiusMicrotesla` passes.
    public var expectedStrengthMicrotesla: Double? = nil
    /// How far the fitted strength may lie from the expected one, as a fraction. Default 0.15: the
    /// model's field and a building's differ by up to 10 %.
    public var strengthTolerance = 0.15
    /// The fitted field must lie here when no expected strength is known, microtesla. Default 20...70.
    public var plausibleRadiusMicrotesla: ClosedRange<Double> = 20...70
    /// Readings kept at most (the oldest are thinned out beyond). Default 20,000.
    public var maximumReadings = 20_000
    /// Seconds between fits once the coverage is reached. Default 1.
    public var fitSeconds = 1.0

    public init() {}
}

/// A calibration a person makes on purpose: the device is turned through every direction while the
/// guide shows which directions of the field have been seen, which are missing, and, once enough are,
/// the fit with its residual, strength and soft iron. It is complete when the whole-set fit
/// (`RobustCalibrationFit`) passes the stated limits.
///
/// Directions are those of the field in the sensor's axes, about the centre of the readings (the
/// hard iron, found by a sphere fit as they come in); covering direction d means having held the
/// device with its d axis along the earth's field (north and down, at the local dip).
public struct CalibrationGuide: Sendable {
    public var settings: CalibrationGuideSettings
    /// The raw readings, microtesla.
    public private(set) var readings: [Vector3] = []
    /// Where the readings are centred (the hard iron so far), microtesla; nil until they spread.
    public private(set) var centre: Vector3?
    /// Readings seen along each of the 32 test directions (`CalibrationFitter.coverageDirections`).
    public private(set) var directionCounts = [Int](repeating: 0, count: 32)
    /// The latest whole-set fit, passed or not, and why it did not pass.
    public private(set) var latest: RobustCalibrationFit.Outcome?
    /// The accepted fit: the calibration is complete.
    public private(set) var accepted: CalibrationFit?
    var lastFitTime = -Double.infinity
    var lastCentreCount = 0

    public init(settings: CalibrationGuideSettings = .init()) { self.settings = settings }

    /// The test directions, sensor axes, unit vectors.
    public static var directions: [Vector3] { CalibrationFitter.coverageDirections }

    /// Which test directions are covered.
    public var covered: [Bool] { directionCounts.map { $0 >= settings.readingsPerDirection } }

    /// Share of the directions covered, 0...1.
    public var coverage: Double { Double(coveredCount) / Double(directionCounts.count) }

    /// Directions covered, and how many the fit needs (`requiredCoverage` of them).
    public var coveredCount: Int { covered.filter { $0 }.count }
    public var neededCount: Int {
        min(directionCounts.count, Int((settings.requiredCoverage * Double(directionCounts.count) - 1e-9).rounded(.up)))
    }

    /// Progress toward a complete calibration, percent: the coverage against the coverage required,
    /// 100 only once a fit has passed.
    public var progressPercent: Double {
        if accepted != nil { return 100 }
        return min(99, 100 * coverage / settings.requiredCoverage)
    }

    public var isComplete: Bool { accepted != nil }

    /// The limits the fit is judged by.
    public var limits: RobustCalibrationFit.Limits {
        var radius = settings.plausibleRadiusMicrotesla
        if let e = settings.expectedStrengthMicrotesla, e > 0 {
            radius = e * (1 - settings.strengthTolerance)...e * (1 + settings.strengthTolerance)
        }
        return RobustCalibrationFit.Limits(
            minimumCoverage: settings.requiredCoverage, ellipsoidCoverage: min(0.8, settings.requiredCoverage),
            maximumResidualMicrotesla: settings.fitLevel.maximumResidualMicrotesla, plausibleRadiusMicrotesla: radius)
    }

    /// One raw reading (microtesla) at `time` (seconds). Returns the accepted fit when this reading
    /// completes the calibration.
    public mutating func add(_ raw: Vector3, time: Double) -> CalibrationFit? {
        guard accepted == nil, raw.isFinite else { return nil }
        readings.append(raw)
        if readings.count > settings.maximumReadings {
            // Every other reading of the older half: the directions stay covered, memory stays bounded.
            let half = readings.count / 2
            readings = Swift.stride(from: 0, to: half, by: 2).map { readings[$0] } + readings[half...]
            lastCentreCount = 0
        }
        if let c = centre {
            count(raw, about: c)
        }
        // The centre from a sphere fit, again whenever the readings have grown by a quarter (and at 50).
        if readings.count >= 50 && readings.count >= lastCentreCount + max(50, lastCentreCount / 4) {
            recentre()
        }
        guard coverage >= settings.requiredCoverage, time - lastFitTime >= settings.fitSeconds else { return nil }
        lastFitTime = time
        let stride = max(1, readings.count / 5000)
        let sample = Swift.stride(from: 0, to: readings.count, by: stride).map { readings[$0] }
        let outcome = RobustCalibrationFit.fit(sample, limits: limits)
        latest = outcome
        accepted = outcome.fit
        return outcome.fit
    }

    mutating func recentre() {
        lastCentreCount = readings.count
        guard case .success(let sphere) = CalibrationFitter.fitSphere(readings),
            sphere.calibration.fieldRadiusMicrotesla > 5
        else { return }
        let c = sphere.calibration.hardIronOffsetMicrotesla
        if let old = centre, (old - c).norm < 1 { return }
        // A centre that moved by under a tenth of the field turns each reading's direction by under
        // 6 degrees, far less than the 35 degrees between test directions: what was covered stays
        // covered (the person's progress does not go back for a better estimate of the hard iron).
        // A larger move (the first estimates, or a new magnet) starts the count again.
        let small = centre.map { (c - $0).norm < 0.1 * sphere.calibration.fieldRadiusMicrotesla } ?? false
        let before = directionCounts
        centre = c
        directionCounts = [Int](repeating: 0, count: directionCounts.count)
        for r in readings { count(r, about: c) }
        if small { directionCounts = zip(before, directionCounts).map { max($0, $1) } }
    }

    mutating func count(_ raw: Vector3, about centre: Vector3) {
        guard let u = (raw - centre).normalized else { return }
        directionCounts[CalibrationFitter.nearestDirection(to: u)] += 1
    }

    /// The sensor axes (+x, -z, ...) nearest the directions still missing, most missing first: the
    /// faces of the device still to point along the field.
    public var missingAxes: [String] {
        let axes: [(String, Vector3)] = [
            ("+x", .unitX), ("-x", -Vector3.unitX), ("+y", .unitY), ("-y", -Vector3.unitY), ("+z", .unitZ),
            ("-z", -Vector3.unitZ),
        ]
        var missing = [Int](repeating: 0, count: axes.count)
        for (i, isCovered) in covered.enumerated() where !isCovered {
            let d = Self.directions[i]
            let nearest = axes.indices.max { axes[$0].1.dot(d) < axes[$1].1.dot(d) }!
            missing[nearest] += 1
        }
        return axes.indices.filter { missing[$0] > 0 }.sorted { missing[$0] > missing[$1] }.map { axes[$0].0 }
    }
}
