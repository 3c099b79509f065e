/// What turning has shown about a disturbance fixed to the sensor (a phone or battery beside it,
/// steel in the vehicle): the part of it no check has been able to see, and the part that showed.
///
/// Such a disturbance d adds R d to the earth-frame field (R: sensor to earth). Its east component,
/// r . d with r the first row of R, turns the compass heading by about r . d / H (H the horizontal
/// field); its north and up components change strength and dip, which the gate checks. As the sensor
/// turns, r changes and so does the compass's error, which shows as the compass heading moving against
/// the gyro's. Split r = m + (r - m) with m the mean of r over the orientations the compass was trusted
/// at:
///   - m . d / H is the same at every orientation visited, so nothing can see it: its size is at most
///     |m| |d| / H. `unexposedShare` is |m|: 1 while the sensor keeps one orientation (a robot driving
///     straight, a translation), falling towards 0 as it turns through all headings.
///   - (r - m) . d / H has shown: regressing the heading innovation (the compass heading minus the
///     filter's, which the gyro carried since the last correction) on r over the trusted readings
///     estimates g = d / H, and `seenErrorRadians` is the error it implies at the latest orientation.
/// Means and sums are weighted by the angle turned, not by time, so a long rest counts as one
/// orientation and turning back and forth over the same arc adds no new orientations.
public struct SensorFixedDisturbance: Sendable, Equatable {
    var radians = 0.0
    var rowSum = Vector3.zero
    var rowRowSum = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
    var headingSum = 0.0
    var rowHeadingSum = Vector3.zero
    var meanRow = Vector3.zero
    var notesSinceRefresh = 0

    /// |m|, 0 to 1; 1 until the sensor has turned while the compass was trusted.
    public private(set) var unexposedShare = 1.0
    /// The estimated heading error per unit of the east row, g = d / H, rad.
    public private(set) var headingErrorVector = Vector3.zero
    /// The error the estimate implies at the latest trusted orientation, (r - m) . g, rad (with m and
    /// g as of the last refresh).
    public private(set) var seenErrorRadians = 0.0

    public init() {}

    /// The error the estimate implies at an orientation with east row `r`, rad.
    public func seenErrorRadians(eastRow r: Vector3) -> Double { (r - meanRow).dot(headingErrorVector) }

    /// Readings between refreshes: the regression is a 3x3 solve, too dear for every reading and
    /// changing slowly anyway.
    static let readingsPerRefresh = 16

    /// Counts one trusted reading: `eastRow` the first row of the orientation (sensor to earth),
    /// `headingInnovation` the compass heading minus the filter's (rad), reached by turning `radians`
    /// since the previous sample.
    @inline(__always)
    public mutating func noteTrusted(eastRow r: Vector3, headingInnovation c: Double, radians turned: Double) {
        seenErrorRadians = seenErrorRadians(eastRow: r)
        guard turned > 0 else { return }
        radians += turned
        rowSum += r * turned
        rowRowSum = rowRowSum + Matrix3.outer(r * turned, r)
        headingSum += c * turned
        rowHeadingSum += r * (c * turned)
        notesSinceRefresh += 1
    }

    /// Whether enough readings came since the last refresh for the next to be worth its cost.
    var refreshDue: Bool { notesSinceRefresh >= Self.readingsPerRefresh }

    /// Recomputes the share and the regression. `priorSigmaRadians` is the 1-sigma heading error a
    /// disturbance is expected to cause before anything is seen (`UnseenDisturbance`), and
    /// `noiseSigmaRadians` the compass heading's own noise per radian turned: their ratio shrinks the
    /// estimate towards zero where the orientations visited barely differ (ridge regression, the
    /// posterior mean under a Gaussian prior).
    public mutating func refresh(priorSigmaRadians: Double, noiseSigmaRadians: Double) {
        notesSinceRefresh = 0
        guard radians > 0 else { return }
        let w = 1 / radians
        let m = rowSum * w
        meanRow = m
        unexposedShare = min(m.norm, 1)
        let covariance = rowRowSum * w - Matrix3.outer(m, m)
        let crossCovariance = rowHeadingSum * w - m * (headingSum * w)
        let ratio = noiseSigmaRadians / max(priorSigmaRadians, 1e-9)
        let ridge = ratio * ratio * w
        if let inverse = covariance.addingToDiagonal(ridge).inverse {
            headingErrorVector = inverse * crossCovariance
        }
    }
}
