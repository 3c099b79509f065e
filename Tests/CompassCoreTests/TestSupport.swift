import CompassCore
import IMUSimulator
#if canImport(Glibc)
    import Glibc
#endif

/// The earth field used across the foundation tests: 48 uT dipping 66 degrees, ENU, y magnetic north.
let testEarthField = Vector3(0, 48 * cos(66 * radiansPerDegree), -48 * sin(66 * radiansPerDegree))
let gravityUp = Vector3(0, 0, standardGravity)

/// What a perfect sensor at `orientation` reads: (field, specific force) in the sensor frame.
func idealReadings(_ orientation: Quaternion, earthField: Vector3 = testEarthField) -> (field: Vector3, force: Vector3)
{
    (orientation.inverseRotate(earthField), orientation.inverseRotate(gravityUp))
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let s = values.sorted()
    let idx = min(s.count - 1, max(0, Int((p / 100 * Double(s.count - 1)).rounded())))
    return s[idx]
}

/// `count` random attitudes (uniform heading, tilt up to `maxTiltDegrees` in a random direction).
func randomAttitudes(count: Int, maxTiltDegrees: Double, seed: UInt64) -> [Quaternion] {
    var rng = SeededGenerator(seed: seed)
    return (0..<count).map { _ in
        let heading = rng.nextUniform() * 360
        let tilt = maxTiltDegrees * rng.nextUniform().squareRoot()
        let direction = rng.nextUniform() * 2 * Double.pi
        return Quaternion(
            headingDegrees: heading, pitchDegrees: tilt * cos(direction), rollDegrees: tilt * sin(direction))
    }
}

func _sinForTest(_ x: Double) -> Double { sin(x) }
func _cosForTest(_ x: Double) -> Double { cos(x) }
func _acosForTest(_ x: Double) -> Double { acos(x) }

/// Feeds `samples` to the calibrator as a stage does: the motion since the previous sample, then the
/// magnetometer reading; `each` sees every sample with the fit that reading made accepted, if any, and
/// the calibrator after it.
func feed(
    _ c: inout OnlineCalibrator, _ samples: [SimulatedSample],
    each: (SimulatedSample, CalibrationFit?, OnlineCalibrator) -> Void = { _, _, _ in }
) {
    var previous: Double?
    for x in samples {
        let t = x.imu.timestamp
        if let p = previous { c.addMotion(rate: x.imu.angularVelocity, specificForce: x.imu.specificForce, dt: t - p) }
        previous = t
        let fit = c.add(x.magnetometer.fieldMicrotesla, time: t)
        each(x, fit, c)
    }
}
