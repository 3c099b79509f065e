/// What turning has shown about a disturbance fixed to the sensor (a phone or battery beside it,
/// steel in the vehicle), and what it has not.
///
/// Such a disturbance d adds R d to the earth-frame field (R: sensor to earth, rows r_E, r_N, r_U for
/// east, north, up). Its east component turns the compass heading by about r_E . g, with g = d / H
/// (H the horizontal field). The filter's heading follows the compass by a share of each innovation,
/// so its own error is f . g, with f the east row averaged the same way (`followedEastRow`). Every
/// trusted reading is evidence on g, in three earth axes:
///   - east: the heading innovation (compass minus filter) is (r_E - f) . g;
///   - north and up: the earth-frame field is the true field plus R d, so as the sensor turns, these
///     components move by r_N . d and r_U . d less their values elsewhere. This exposes the part of
///     the error common to every orientation visited, which no innovation shows: turning about the
///     vertical moves r_N by -r_E times the angle, so the strength seen across an arc changes by the
///     very error the heading hides.
/// Each axis carries an unknown constant (the true field, the filter's other errors), so each is
/// centred. Under a Gaussian prior on g (`UnseenDisturbance`, the same on every axis), the posterior
/// mean `estimate` and covariance `covariance` bound the error at any orientation: |f . mean| as a
/// bias, plus f^T covariance f as what is still unknown. Before the sensor turns that is the prior's.
///
/// Two things keep the evidence honest:
///   - Sums are weighted by the angle turned, then counted as `independentReadings` readings spread
///     as the orientations are: a long rest is one orientation, and vibrating about one orientation or
///     sweeping the same arc again adds no evidence.
///   - Where the fit leaves residuals larger than the noise allows (a field that varies from place to
///     place, tilt and lag errors of fast motion), the evidence is discounted by that ratio
///     (`inconsistency`): the model does not explain what was seen, so it is believed less.
public struct SensorFixedDisturbance: Sendable, Equatable {
    /// Angle-weighted sums for one earth axis: of its row of R, of the row's outer product (symmetric,
    /// so six sums: xx, yy, zz, xy, xz, yz), of the axis's value, and of the row times the value.
    struct AxisSums: Sendable, Equatable {
        var row = Vector3.zero
        var rowRowDiagonal = Vector3.zero
        var rowRowOffDiagonal = Vector3.zero
        var value = 0.0
        var rowValue = Vector3.zero
        var valueValue = 0.0

        @inline(__always)
        mutating func add(row r: Vector3, value v: Double, weight w: Double) {
            let rw = r * w
            row += rw
            rowRowDiagonal += Vector3(rw.x * r.x, rw.y * r.y, rw.z * r.z)
            rowRowOffDiagonal += Vector3(rw.x * r.y, rw.x * r.z, rw.y * r.z)
            value += v * w
            rowValue += rw * v
            valueValue += v * v * w
        }

        /// The centred normal equations' matrix and right-hand side, times the total weight.
        func centred(totalWeight w: Double) -> (matrix: Matrix3, vector: Vector3, squares: Double) {
            let d = rowRowDiagonal, o = rowRowOffDiagonal
            let rowRow = Matrix3(d.x, o.x, o.y, o.x, d.y, o.z, o.y, o.z, d.z)
            return (
                rowRow - Matrix3.outer(row, row * (1 / w)), rowValue - row * (value / w),
                valueValue - value * value / w
            )
        }
    }

    var radians = 0.0
    var east = AxisSums()
    var north = AxisSums()
    var up = AxisSums()
    /// Angle-weighted sum of the horizontal field, uT rad: H for the north and up axes.
    var horizontalSum = 0.0
    var notesSinceRefresh = 0

    /// Posterior mean of g = d / H, rad per unit of the east row.
    public private(set) var estimate = Vector3.zero
    /// Posterior covariance of g, rad^2; nil until the first refresh sets the prior.
    public private(set) var covariance: Matrix3?
    /// How much larger than the noise the residuals of the fit are (1: as expected, or smaller).
    public private(set) var inconsistency = 1.0

    public init() {}

    /// The variance to report for the error at an orientation with east row `r` (the filter's
    /// followed row), rad^2; nil before the first refresh. A known bias b and an unknown part of
    /// standard deviation s are bounded at 95 % by |b| + 1.96 s, so the variance reported is
    /// (|b| / 1.96 + s)^2: 1.96 times its root is that bound. (Adding b^2 as variance would bound the
    /// bias at 1.96 |b|.)
    @inline(__always)
    public func reportedVarianceRadians2(eastRow r: Vector3) -> Double? {
        guard let p = covariance else { return nil }
        let sigma = abs(r.dot(estimate)) / 1.96 + r.dot(p * r).squareRoot()
        return sigma * sigma
    }

    /// The error the estimate implies at an orientation with east row `r`, rad.
    public func seenErrorRadians(eastRow r: Vector3) -> Double { r.dot(estimate) }

    /// The posterior standard deviation of the error at an orientation with east row `r`, rad: what
    /// turning has not yet shown.
    public func unseenSigmaRadians(eastRow r: Vector3) -> Double? {
        covariance.map { r.dot($0 * r).squareRoot() }
    }

    /// How many independent readings the trusted ones are worth, spread as the orientations visited
    /// are. The compass's systematic errors (residual tilt, soft iron, the filter's lag) vary smoothly
    /// with orientation, so readings a fraction of a radian apart share them: sweeping one arc again,
    /// or vibrating about one orientation, adds no evidence. About one per radian of a full turn.
    static let independentReadings = 6.0

    /// Readings between refreshes: the regression is a 3x3 solve, too dear for every reading and
    /// changing slowly anyway.
    static let readingsPerRefresh = 16

    /// Counts one trusted reading: `rotation` the orientation (sensor to earth), `earthField` the
    /// reading in the earth frame (uT; east, north, up), `headingInnovation` the compass heading minus
    /// the filter's (rad), `followedEastRow` the row the filter's heading error follows, reached by
    /// turning `radians` since the previous sample.
    @inline(__always)
    public mutating func noteTrusted(
        rotation: Matrix3, earthField b: Vector3, headingInnovation c: Double, followedEastRow f: Vector3,
        radians turned: Double
    ) {
        guard turned > 0 else { return }
        radians += turned
        east.add(row: rotation.row0 - f, value: c, weight: turned)
        north.add(row: rotation.row1, value: b.y, weight: turned)
        up.add(row: rotation.row2, value: b.z, weight: turned)
        horizontalSum += (b.x * b.x + b.y * b.y).squareRoot() * turned
        notesSinceRefresh += 1
    }

    /// Whether enough readings came since the last refresh for the next to be worth its cost.
    var refreshDue: Bool { notesSinceRefresh >= Self.readingsPerRefresh }

    /// Recomputes the posterior. `priorSigmaRadians` is the 1-sigma heading error a disturbance is
    /// expected to cause before anything is seen (`UnseenDisturbance`), per axis of g;
    /// `headingNoiseRadians` the heading innovation's noise per root radian turned, and
    /// `fieldNoiseRadians` that of the north and up components in units of H.
    public mutating func refresh(priorSigmaRadians: Double, headingNoiseRadians: Double, fieldNoiseRadians: Double) {
        notesSinceRefresh = 0
        let priorPrecision = 1 / max(priorSigmaRadians * priorSigmaRadians, 1e-18)
        guard radians > 0, horizontalSum > 0 else {
            estimate = .zero
            covariance = Matrix3(1, 0, 0, 0, 1, 0, 0, 0, 1) * (1 / priorPrecision)
            return
        }
        let h = horizontalSum / radians
        let e = east.centred(totalWeight: radians)
        let n = north.centred(totalWeight: radians)
        let u = up.centred(totalWeight: radians)
        // Spread of the orientations (per unit weight) times the readings' worth of independent ones.
        let count = Self.independentReadings / radians
        let headingWeight = count / (headingNoiseRadians * headingNoiseRadians)
        let fieldWeight = count / (fieldNoiseRadians * fieldNoiseRadians)
        let dataPrecision = e.matrix * headingWeight + (n.matrix + u.matrix) * fieldWeight
        let dataInformation = e.vector * headingWeight + (n.vector + u.vector) * (fieldWeight / h)
        guard let first = dataPrecision.addingToDiagonal(priorPrecision).inverse, first.isFinite else { return }
        // Does a disturbance fixed to the sensor explain what was seen? Where the residuals are larger
        // than the noise allows (a field that varies from place to place, a disturbance that comes and
        // goes), the evidence is worth less by that ratio (the Birge ratio of least squares).
        let g = first * dataInformation
        let squares = e.squares * headingWeight + (n.squares + u.squares) * (fieldWeight / (h * h))
        let chiSquare = max(squares - 2 * g.dot(dataInformation) + g.dot(dataPrecision * g), 0)
        let expected = 3 * (Self.independentReadings - 1) - 3
        inconsistency = max(chiSquare / expected, 1)
        guard let p = (dataPrecision * (1 / inconsistency)).addingToDiagonal(priorPrecision).inverse, p.isFinite
        else { return }
        covariance = p
        estimate = p * (dataInformation * (1 / inconsistency))
    }
}
