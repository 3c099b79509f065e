#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Parameters of `CalibrationCheck`.
public struct CalibrationCheckSettings: Sendable, Equatable {
    /// A correction the readings need that turns the heading by more than this, degrees, makes them
    /// unusable as they come. Default 10: beyond what the fits' own error explains (an offset resolved
    /// to about 2 uT turns the heading by 7 degrees at a 16 uT horizontal field), so a calibrated sensor
    /// seen in a disturbed place is not taken for an uncalibrated one.
    public var maximumHeadingShiftDegrees = 10.0
    /// After a finding, a filter heading this far from the readings' corrected heading (10 s average),
    /// degrees, followed the iron: reported unusable. Default 20: the correction knows the heading to
    /// what its offset resolves (7 degrees at 2 uT over a 16 uT horizontal field), the filter to its own
    /// bound; a gate that kept the iron out leaves the two within that.
    public var maximumDisagreementDegrees = 20.0
    /// The calibrator that judges (its evidence rules: a fit must explain the readings clearly better
    /// than the readings as they come).
    public var calibration = OnlineCalibrationSettings()
    public init() {}
}

/// Judges readings that nothing calibrates (a pipeline without a calibration stage): the online
/// calibrator runs on them without its result being applied, and when it accepts a sphere, ellipsoid
/// or gyro-aided correction that would turn the readings' heading by more than
/// `maximumHeadingShiftDegrees` (RMS over the readings it holds), the
/// readings carry iron nobody removes and the heading taken from them is off by up to that much. The
/// finding stands once made; the calibrator goes on refining the correction (`latestCorrection`).
public struct CalibrationCheck: Sendable {
    public var settings: CalibrationCheckSettings
    var calibrator: OnlineCalibrator
    var previousTime: Double?

    /// What the readings were found to need.
    public struct Finding: Sendable, Equatable {
        public var fit: CalibrationFit
        /// How far the correction turns the heading, degrees: RMS over the readings held (their horizontal
        /// part as they came against corrected), or at most, from the field's move over its horizontal part.
        public var headingShiftDegrees: Double
        /// When it was found, seconds.
        public var time: Double
    }

    public private(set) var finding: Finding?

    /// The correction the readings need as the calibrator knows it now (it goes on learning after a
    /// finding, so later turning refines it); nil before any.
    public var latestCorrection: MagnetometerCalibration? { calibrator.calibration }

    public init(settings: CalibrationCheckSettings = .init()) {
        self.settings = settings
        calibrator = OnlineCalibrator(settings: settings.calibration)
    }

    /// The IMU at `time` seconds: the gyro (rad/s) and the specific force (m/s^2), sensor frame.
    public mutating func addMotion(rate: Vector3, specificForce: Vector3, time: Double) {
        defer { previousTime = time }
        guard let p = previousTime, time > p else { return }
        calibrator.addMotion(rate: rate, specificForce: specificForce, dt: min(0.1, time - p))
    }

    /// A reading as the filter receives it, microtesla, at `time` seconds. Returns the finding when this
    /// reading made it.
    public mutating func add(_ field: Vector3, time: Double) -> Finding? {
        // A gravity-aided fit leaves the offset along the vertical to a prior and accepts up to 3 degrees
        // of its own heading error: evidence enough to correct readings, not to call them wrong.
        let fit = calibrator.add(field, time: time)
        guard finding == nil, let fit, fit.model != .asIs, fit.model != .gravityAided else { return nil }
        let shift =
            headingChangeDegrees(fit.calibration)
            ?? Self.headingShiftDegrees(
                fit.calibration, dipDegrees: calibrator.calibratedDipDegrees ?? TypicalEarthField.dipDegrees)
        guard shift > settings.maximumHeadingShiftDegrees else { return nil }
        finding = Finding(fit: fit, headingShiftDegrees: shift, time: time)
        return finding
    }

    /// How much the correction turns the heading of the readings the calibrator holds, degrees RMS: for
    /// each reading with its vertical, the angle about the vertical between its horizontal part as it
    /// came and corrected. Nil with fewer than 10 such readings.
    func headingChangeDegrees(_ c: MagnetometerCalibration) -> Double? {
        var squares = 0.0, n = 0
        for r in calibrator.bins.joined() {
            guard let up = r.up else { continue }
            let corrected = c.apply(r.field)
            let a = r.field - up * r.field.dot(up), b = corrected - up * corrected.dot(up)
            guard a.norm > 1e-6, b.norm > 1e-6 else { continue }
            let angle = atan2(a.cross(b).dot(up), a.dot(b))
            squares += angle * angle
            n += 1
        }
        return n >= 10 ? (squares / Double(n)).squareRoot() * degreesPerRadian : nil
    }

    /// How far a correction can turn the heading, degrees: the offset plus the soft iron's departure
    /// from a uniform scale (Frobenius; a scale turns nothing) times the field, over the horizontal field
    /// at `dipDegrees`.
    public static func headingShiftDegrees(_ c: MagnetometerCalibration, dipDegrees: Double) -> Double {
        let s = c.softIronCorrection
        let scale = (s.m00 + s.m11 + s.m22) / 3
        let w = s - Matrix3.identity * scale
        let stretch = [w.m00, w.m01, w.m02, w.m10, w.m11, w.m12, w.m20, w.m21, w.m22].reduce(0) { $0 + $1 * $1 }
        let moved = c.hardIronOffsetMicrotesla.norm + stretch.squareRoot() * c.fieldRadiusMicrotesla
        let horizontal = max(c.fieldRadiusMicrotesla * cos(dipDegrees * radiansPerDegree), 1e-3)
        return min(1, moved / horizontal) == 1 ? 180 : asin(moved / horizontal) * degreesPerRadian
    }
}
