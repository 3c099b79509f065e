import Testing
import CompassCore

@Suite("World Magnetic Model 2025")
struct WorldMagneticModelTests {
    struct Row: Sendable, CustomStringConvertible {
        let year, height, lat, lon, x, y, z, i, d: Double
        var description: String { "\(year) h=\(height) lat=\(lat) lon=\(lon)" }
    }

    /// The official WMM2025 test values (WMM2025 report; X Y Z in nT, I and D in degrees).
    static let official: [Row] = [
        Row(year: 2025.0, height: 0, lat: 80, lon: 0, x: 6521.6, y: 145.9, z: 54791.5, i: 83.21, d: 1.28),
        Row(year: 2025.0, height: 0, lat: 0, lon: 120, x: 39677.8, y: -109.6, z: -10580.2, i: -14.93, d: -0.16),
        Row(year: 2025.0, height: 0, lat: -80, lon: 240, x: 6117.5, y: 15751.9, z: -52022.5, i: -72.00, d: 68.78),
        Row(year: 2025.0, height: 100, lat: 80, lon: 0, x: 6216.0, y: 92.4, z: 52598.8, i: 83.26, d: 0.85),
        Row(year: 2025.0, height: 100, lat: 0, lon: 120, x: 37688.6, y: -96.2, z: -10152.1, i: -15.08, d: -0.15),
        Row(year: 2025.0, height: 100, lat: -80, lon: 240, x: 5907.6, y: 14780.3, z: -49540.7, i: -72.19, d: 68.21),
        Row(year: 2027.5, height: 0, lat: 80, lon: 0, x: 6500.8, y: 294.5, z: 54869.4, i: 83.24, d: 2.59),
        Row(year: 2027.5, height: 0, lat: 0, lon: 120, x: 39701.6, y: -167.4, z: -10381.8, i: -14.65, d: -0.24),
        Row(year: 2027.5, height: 0, lat: -80, lon: 240, x: 6200.7, y: 15730.3, z: -51783.7, i: -71.92, d: 68.49),
        Row(year: 2027.5, height: 100, lat: 80, lon: 0, x: 6196.7, y: 233.8, z: 52670.5, i: 83.29, d: 2.16),
        Row(year: 2027.5, height: 100, lat: 0, lon: 120, x: 37711.5, y: -148.7, z: -9969.8, i: -14.81, d: -0.23),
        Row(year: 2027.5, height: 100, lat: -80, lon: 240, x: 5984.0, y: 14760.1, z: -49317.7, i: -72.10, d: 67.93),
    ]

    @Test("every official test value matches to its rounding", arguments: official)
    func officialValues(row: Row) throws {
        let e = try WorldMagneticModel.wmm2025.elements(
            latitudeDegrees: row.lat, longitudeDegrees: row.lon,
            heightKilometres: row.height, decimalYear: row.year)
        // Half a unit of the last printed digit, plus a hair for the table's own rounding of inputs.
        #expect(abs(e.northNanotesla - row.x) <= 0.051, "X \(e.northNanotesla)")
        #expect(abs(e.eastNanotesla - row.y) <= 0.051, "Y \(e.eastNanotesla)")
        #expect(abs(e.downNanotesla - row.z) <= 0.051, "Z \(e.downNanotesla)")
        #expect(abs(e.inclinationDegrees - row.i) <= 0.0051, "I \(e.inclinationDegrees)")
        #expect(abs(e.declinationDegrees - row.d) <= 0.0051, "D \(e.declinationDegrees)")
    }

    @Test("dates outside 2025.0-2030.0 and bad positions are refused")
    func refusals() {
        let model = WorldMagneticModel.wmm2025
        #expect(
            throws: WorldMagneticModelError.dateOutsideValidity(decimalYear: 2024.9, validFrom: 2025, validUntil: 2030)
        ) {
            try model.elements(latitudeDegrees: 0, longitudeDegrees: 0, decimalYear: 2024.9)
        }
        #expect(
            throws: WorldMagneticModelError.dateOutsideValidity(decimalYear: 2030.01, validFrom: 2025, validUntil: 2030)
        ) {
            try model.elements(latitudeDegrees: 0, longitudeDegrees: 0, decimalYear: 2030.01)
        }
        #expect(throws: WorldMagneticModelError.latitudeOutOfRange(91)) {
            try model.elements(latitudeDegrees: 91, longitudeDegrees: 0, decimalYear: 2026)
        }
        #expect(throws: WorldMagneticModelError.nonFiniteInput("longitude")) {
            try model.elements(latitudeDegrees: 10, longitudeDegrees: .nan, decimalYear: 2026)
        }
        #expect(throws: WorldMagneticModelError.heightOutOfRange(kilometres: 2000)) {
            try model.elements(latitudeDegrees: 10, longitudeDegrees: 0, heightKilometres: 2000, decimalYear: 2026)
        }
    }

    @Test("the caution zone near the magnetic poles is reported; the geographic poles are finite")
    func cautionZone() throws {
        let model = WorldMagneticModel.wmm2025
        // Near the north magnetic pole (about 86 N, 140 E in 2025) H falls below 6000 nT.
        let nearPole = try model.elements(latitudeDegrees: 86, longitudeDegrees: 140, decimalYear: 2026)
        #expect(nearPole.isInCautionZone, "H = \(nearPole.horizontalNanotesla)")
        let berlin = try model.elements(latitudeDegrees: 52.5, longitudeDegrees: 13.4, decimalYear: 2026)
        #expect(!berlin.isInCautionZone)
        #expect(berlin.inclinationDegrees > 66 && berlin.inclinationDegrees < 70)
        #expect(berlin.totalNanotesla > 48000 && berlin.totalNanotesla < 52000)
        for lat in [90.0, -90.0] {
            let pole = try model.elements(latitudeDegrees: lat, longitudeDegrees: 0, decimalYear: 2026)
            #expect(pole.northNanotesla.isFinite && pole.eastNanotesla.isFinite && pole.downNanotesla.isFinite)
        }
    }

    @Test("decimal years from calendar dates and Unix time")
    func decimalYears() throws {
        #expect(decimalYear(year: 2025, month: 1, day: 1) == 2025.0)
        let mid = try #require(decimalYear(year: 2027, month: 7, day: 2, hour: 12))
        #expect(abs(mid - 2027.5) < 0.002)
        #expect(decimalYear(year: 2025, month: 2, day: 29) == nil)
        #expect(decimalYear(year: 2028, month: 2, day: 29) != nil)
        #expect(decimalYear(year: 2025, month: 13, day: 1) == nil)
        // 2026-11-30T00:00:00Z
        let unix = try #require(decimalYear(unixSeconds: 1_795_996_800))
        let civil = try #require(decimalYear(year: 2026, month: 11, day: 30))
        #expect(abs(unix - civil) < 1e-9)
        #expect(decimalYear(unixSeconds: 20454 * 86400) == 2026.0)  // 2026-01-01T00:00:00Z
        #expect(decimalYear(unixSeconds: .nan) == nil)
    }
}
