import Foundation
import CompassCore

/// The World Magnetic Model at one position, cached per day: the fusion stage's one look-up for the
/// declination and the expected field.
struct MagneticModelLookup {
    struct Position: Equatable {
        var latitudeDegrees: Double
        var longitudeDegrees: Double
        var heightKilometres: Double
    }

    private var cacheKey: (latitude: Double, longitude: Double, day: Int)?
    private var cached: Result<GeomagneticElements, WorldMagneticModelError>?

    /// The model's elements at `position` on `decimalYear` (cached while the day stays the same).
    mutating func elements(at position: Position, decimalYear year: Double) -> Result<
        GeomagneticElements, WorldMagneticModelError
    > {
        let key = (position.latitudeDegrees, position.longitudeDegrees, Int(year * 365))
        if let k = cacheKey, k == key, let cached { return cached }
        cacheKey = key
        let result = Result { () throws(WorldMagneticModelError) in
            try WorldMagneticModel.wmm2025.elements(
                latitudeDegrees: position.latitudeDegrees, longitudeDegrees: position.longitudeDegrees,
                heightKilometres: position.heightKilometres, decimalYear: year)
        }
        cached = result
        return result
    }
}
