#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The geomagnetic field at a place and date, as the World Magnetic Model gives it.
public struct GeomagneticElements: Sendable, Equatable {
    /// North component X, nT (geodetic frame).
    public var northNanotesla: Double
    /// East component Y, nT.
    public var eastNanotesla: Double
    /// Down component Z, nT.
    public var downNanotesla: Double
    /// Horizontal intensity H, nT.
    public var horizontalNanotesla: Double {
        (northNanotesla * northNanotesla + eastNanotesla * eastNanotesla).squareRoot()
    }
    /// Total intensity F, nT.
    public var totalNanotesla: Double {
        (horizontalNanotesla * horizontalNanotesla + downNanotesla * downNanotesla).squareRoot()
    }
    /// Inclination (dip) I, degrees, positive downward.
    public var inclinationDegrees: Double { atan2(downNanotesla, horizontalNanotesla) * degreesPerRadian }
    /// Declination D, degrees, positive east: true heading = magnetic heading + D.
    public var declinationDegrees: Double { atan2(eastNanotesla, northNanotesla) * degreesPerRadian }
    /// The field in ENU with y = TRUE north, microtesla.
    public var enuMicrotesla: Vector3 { Vector3(eastNanotesla, northNanotesla, -downNanotesla) / 1000 }

    /// WMM's caution zone near the magnetic poles: H below 6000 nT, declination degrades.
    public var isInCautionZone: Bool { horizontalNanotesla < 6000 }
    /// WMM's unreliable zone: H below 2000 nT, declination should not be used for navigation.
    public var isInUnreliableZone: Bool { horizontalNanotesla < 2000 }
}

/// Why the model refused a query.
public enum WorldMagneticModelError: Error, Equatable, Sendable, CustomStringConvertible {
    case dateOutsideValidity(decimalYear: Double, validFrom: Double, validUntil: Double)
    case latitudeOutOfRange(Double)
    case nonFiniteInput(String)
    /// Heights beyond the model's intended use (-1 km to 850 km above the ellipsoid).
    case heightOutOfRange(kilometres: Double)

    public var description: String {
        switch self {
        case .dateOutsideValidity(let y, let a, let b): return "date \(y) is outside the model's validity \(a) to \(b)"
        case .latitudeOutOfRange(let l): return "latitude \(l) is outside -90 to 90 degrees"
        case .nonFiniteInput(let n): return "\(n) is NaN or infinite"
        case .heightOutOfRange(let h): return "height \(h) km is outside -1 km to 850 km"
        }
    }
}

/// A spherical-harmonic main-field model in the WMM form (Schmidt semi-normalised Gauss coefficients
/// with linear secular variation). Use `WorldMagneticModel.wmm2025`.
public struct WorldMagneticModel: Sendable {
    /// One coefficient row: degree n, order m, g and h in nT, their rates in nT/year.
    public struct Coefficient: Sendable, Equatable {
        public var n: Int, m: Int, g: Double, h: Double, gDot: Double, hDot: Double
        public init(n: Int, m: Int, g: Double, h: Double, gDot: Double, hDot: Double) {
            self.n = n
            self.m = m
            self.g = g
            self.h = h
            self.gDot = gDot
            self.hDot = hDot
        }
    }

    public let name: String
    /// Epoch, decimal year (start of validity).
    public let epoch: Double
    /// End of validity, decimal year.
    public let validUntil: Double
    public let maximumDegree: Int
    let coefficients: [Coefficient]

    /// WGS-84 semi-major axis, km.
    static let wgs84SemiMajorKm = 6378.137
    /// WGS-84 flattening.
    static let wgs84Flattening = 1 / 298.257223563
    /// Geomagnetic reference radius, km.
    static let referenceRadiusKm = 6371.2

    public init(name: String, epoch: Double, validUntil: Double, maximumDegree: Int, coefficients: [Coefficient]) {
        self.name = name
        self.epoch = epoch
        self.validUntil = validUntil
        self.maximumDegree = maximumDegree
        self.coefficients = coefficients
    }

    /// The field at a WGS-84 position and date.
    /// - Parameters:
    ///   - latitudeDegrees: geodetic latitude, -90...90.
    ///   - longitudeDegrees: longitude, any value (east positive).
    ///   - heightKilometres: height above the WGS-84 ellipsoid, km (-1...850).
    ///   - decimalYear: e.g. 2027.5; must lie within the model's validity.
    public func elements(
        latitudeDegrees: Double, longitudeDegrees: Double, heightKilometres: Double = 0,
        decimalYear: Double
    ) throws(WorldMagneticModelError) -> GeomagneticElements {
        guard latitudeDegrees.isFinite else { throw .nonFiniteInput("latitude") }
        guard longitudeDegrees.isFinite else { throw .nonFiniteInput("longitude") }
        guard heightKilometres.isFinite else { throw .nonFiniteInput("height") }
        guard decimalYear.isFinite else { throw .nonFiniteInput("date") }
        guard abs(latitudeDegrees) <= 90 else { throw .latitudeOutOfRange(latitudeDegrees) }
        guard heightKilometres >= -1, heightKilometres <= 850 else {
            throw .heightOutOfRange(kilometres: heightKilometres)
        }
        guard decimalYear >= epoch, decimalYear <= validUntil else {
            throw .dateOutsideValidity(decimalYear: decimalYear, validFrom: epoch, validUntil: validUntil)
        }
        // At the geographic poles the east component's 1/cos(latitude) is singular; its limit is taken
        // by evaluating a hair (1e-7 degrees, about 1 cm) away.
        let lat = Swift.max(-90 + 1e-7, Swift.min(90 - 1e-7, latitudeDegrees)) * radiansPerDegree
        let lon = longitudeDegrees * radiansPerDegree

        // Geodetic to geocentric spherical coordinates.
        let e2 = Self.wgs84Flattening * (2 - Self.wgs84Flattening)
        let sinLat = sin(lat), cosLat = cos(lat)
        let rc = Self.wgs84SemiMajorKm / (1 - e2 * sinLat * sinLat).squareRoot()
        let p = (rc + heightKilometres) * cosLat
        let zc = (rc * (1 - e2) + heightKilometres) * sinLat
        let r = (p * p + zc * zc).squareRoot()
        let latC = asin(zc / r)

        let nMax = maximumDegree
        let size = nMax + 1
        let dt = decimalYear - epoch
        var g = [Double](repeating: 0, count: size * size)
        var h = [Double](repeating: 0, count: size * size)
        for c in coefficients where c.n <= nMax {
            g[c.n * size + c.m] = c.g + dt * c.gDot
            h[c.n * size + c.m] = c.h + dt * c.hDot
        }

        // Schmidt semi-normalised associated Legendre functions of cos(colatitude) and their colatitude
        // derivatives, by the standard Gauss-normalised recursion followed by the Schmidt factors.
        let ct = sin(latC)  // cos(colatitude)
        let st = cos(latC)  // sin(colatitude)
        let (pnm, dp) = Self.legendre(cosColatitude: ct, sinColatitude: st, maximumDegree: nMax)
        let schmidt = Self.schmidtFactors(maximumDegree: nMax)

        var bNorth = 0.0, bEast = 0.0, bDown = 0.0  // geocentric X', Y', Z'
        let ratio = Self.referenceRadiusKm / r
        var ar = ratio * ratio
        for n in 1...nMax {
            ar *= ratio  // (a/r)^(n+2)
            for m in 0...n {
                let i = n * size + m
                let gs = g[i] * schmidt[i], hs = h[i] * schmidt[i]
                let cm = cos(Double(m) * lon), sm = sin(Double(m) * lon)
                let gh = gs * cm + hs * sm
                bNorth += ar * gh * dp[i]
                bEast += ar * Double(m) * (gs * sm - hs * cm) * pnm[i]
                bDown -= ar * Double(n + 1) * gh * pnm[i]
            }
        }
        bEast /= st
        // Rotate from geocentric to geodetic.
        let psi = latC - lat
        let x = bNorth * cos(psi) - bDown * sin(psi)
        let z = bNorth * sin(psi) + bDown * cos(psi)
        return GeomagneticElements(northNanotesla: x, eastNanotesla: bEast, downNanotesla: z)
    }

    /// The associated Legendre functions of cos(colatitude) up to `maximumDegree` and their colatitude
    /// derivatives, Gauss-normalised (the Schmidt factors are applied by the caller), row-major by
    /// degree n and order m in arrays of (n + 1)^2.
    static func legendre(cosColatitude ct: Double, sinColatitude st: Double, maximumDegree nMax: Int) -> (
        p: [Double], dp: [Double]
    ) {
        let size = nMax + 1
        var pnm = [Double](repeating: 0, count: size * size)
        var dp = [Double](repeating: 0, count: size * size)
        pnm[0] = 1
        for n in 1...nMax {
            for m in 0...n {
                let i = n * size + m
                if n == m {
                    pnm[i] = st * pnm[(n - 1) * size + m - 1]
                    dp[i] = st * dp[(n - 1) * size + m - 1] + ct * pnm[(n - 1) * size + m - 1]
                } else if n == 1 {
                    pnm[i] = ct * pnm[m]
                    dp[i] = ct * dp[m] - st * pnm[m]
                } else {
                    let k = m > n - 2 ? 0.0 : Double((n - 1) * (n - 1) - m * m) / Double((2 * n - 1) * (2 * n - 3))
                    let p2 = m > n - 2 ? 0.0 : pnm[(n - 2) * size + m]
                    let d2 = m > n - 2 ? 0.0 : dp[(n - 2) * size + m]
                    pnm[i] = ct * pnm[(n - 1) * size + m] - k * p2
                    dp[i] = ct * dp[(n - 1) * size + m] - st * pnm[(n - 1) * size + m] - k * d2
                }
            }
        }
        return (pnm, dp)
    }

    /// Schmidt semi-normalisation factors up to `maximumDegree`, laid out as `legendre`'s.
    static func schmidtFactors(maximumDegree nMax: Int) -> [Double] {
        let size = nMax + 1
        // Schmidt factors: S(n,0) = S(n-1,0)(2n-1)/n; S(n,m) = S(n,m-1) sqrt((n-m+1)(1+delta(m,1))/(n+m)).
        var schmidt = [Double](repeating: 0, count: size * size)
        schmidt[0] = 1
        for n in 1...nMax {
            schmidt[n * size] = schmidt[(n - 1) * size] * Double(2 * n - 1) / Double(n)
            for m in 1...n {
                let delta = m == 1 ? 2.0 : 1.0
                schmidt[n * size + m] =
                    schmidt[n * size + m - 1] * (Double(n - m + 1) * delta / Double(n + m)).squareRoot()
            }
        }
        return schmidt
    }
}

/// Decimal year from a calendar date (proleptic Gregorian, UTC): 2027-07-02 -> about 2027.5.
public func decimalYear(year: Int, month: Int, day: Int, hour: Double = 0) -> Double? {
    guard (1...12).contains(month), day >= 1 else { return nil }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    let monthDays = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    guard day <= monthDays[month - 1], hour >= 0, hour < 24 else { return nil }
    let dayOfYear = monthDays.prefix(month - 1).reduce(0, +) + day - 1
    return Double(year) + (Double(dayOfYear) + hour / 24) / Double(leap ? 366 : 365)
}

/// Decimal year from seconds since the Unix epoch (UTC).
public func decimalYear(unixSeconds: Double) -> Double? {
    guard unixSeconds.isFinite else { return nil }
    // Civil-from-days (H. Hinnant's algorithm) for the calendar year, then the fraction within it.
    let days = Int((unixSeconds / 86400).rounded(.down))
    let z = days + 719468
    let era = (z >= 0 ? z : z - 146096) / 146097
    let doe = z - era * 146097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let month = mp < 10 ? mp + 3 : mp - 9
    let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
    let startOfYear = daysFromCivil(year: year)
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    return Double(year) + (unixSeconds / 86400 - Double(startOfYear)) / Double(leap ? 366 : 365)
}

/// Days from 1970-01-01 to 1 January of `year`.
func daysFromCivil(year: Int) -> Int {
    let y = year - 1  // January counts as month 13 of the previous year in this algorithm
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let doy = 306  // March 1 .. January 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146097 + doe - 719468
}
