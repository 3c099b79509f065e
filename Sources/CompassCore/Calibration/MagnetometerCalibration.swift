/// A magnetometer calibration: calibrated = softIronCorrection * (raw - hardIronOffset).
///
/// A hard-iron-only calibration has the identity as its soft-iron correction. Units: microtesla.
public struct MagnetometerCalibration: Sendable, Equatable {
    /// The hard-iron offset (the centre of the reading ellipsoid), microtesla, sensor frame.
    public var hardIronOffsetMicrotesla: Vector3
    /// The matrix that maps the centred ellipsoid back to a sphere of radius `fieldRadiusMicrotesla`.
    public var softIronCorrection: Matrix3
    /// Radius of the calibrated sphere: the local field strength as this sensor sees it, microtesla.
    public var fieldRadiusMicrotesla: Double

    public init(
        hardIronOffsetMicrotesla: Vector3, softIronCorrection: Matrix3 = .identity,
        fieldRadiusMicrotesla: Double
    ) {
        self.hardIronOffsetMicrotesla = hardIronOffsetMicrotesla
        self.softIronCorrection = softIronCorrection
        self.fieldRadiusMicrotesla = fieldRadiusMicrotesla
    }

    /// No correction; the radius is unknown (0).
    public static let uncalibrated = MagnetometerCalibration(hardIronOffsetMicrotesla: .zero, fieldRadiusMicrotesla: 0)

    /// The same calibration for readings first turned by `r` (sensor to body axes): with
    /// raw_body = r raw, r W (raw - c) = (r W r^T)(raw_body - r c), so the result is the body-axes
    /// calibrated field, the sensor-axes one turned by r.
    public func turned(by r: Matrix3) -> MagnetometerCalibration {
        MagnetometerCalibration(
            hardIronOffsetMicrotesla: r * hardIronOffsetMicrotesla,
            softIronCorrection: r * softIronCorrection * r.transposed,
            fieldRadiusMicrotesla: fieldRadiusMicrotesla)
    }

    /// Applies the calibration to a raw reading (microtesla).
    @inlinable
    public func apply(_ rawMicrotesla: Vector3) -> Vector3 {
        softIronCorrection * (rawMicrotesla - hardIronOffsetMicrotesla)
    }
}
