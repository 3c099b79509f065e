import Foundation
import CompassCore
import WireFormat
import MessageBus

/// The best direction of travel: the GPS course (from successive fixes) when moving fast and straight
/// with a good course accuracy, the compass heading when its accuracy is good, otherwise nothing.
/// Publishes gyrocompass_msgs/Heading on `direction` with `source` saying which.
final class DirectionStage: StageLogic, TransformLogic, @unchecked Sendable {
    struct Settings: DeclaredSettings {
        /// GPS course only above this speed, m/s.
        var minimumSpeedMetresPerSecond = 2.0
        /// GPS course only with an accuracy at least this good, degrees.
        var maximumCourseAccuracyDegrees = 15.0
        /// Compass heading only with an accuracy at least this good, degrees.
        var maximumCompassAccuracyDegrees = 30.0
        /// Position error assumed when a fix gives no covariance, metres.
        var defaultPositionSigmaMetres = 5.0

        static let table = SettingTable<Settings>([
            .number(
                "min_speed", \.minimumSpeedMetresPerSecond, unit: "m/s", range: 0...1000,
                "GPS course only above this speed"),
            .number(
                "max_course_accuracy_deg", \.maximumCourseAccuracyDegrees, unit: "deg", range: SettingSpec.degreesRange,
                "GPS course only with an accuracy at least this good"),
            .number(
                "max_compass_accuracy_deg", \.maximumCompassAccuracyDegrees, unit: "deg",
                range: SettingSpec.degreesRange, "compass heading only with an accuracy at least this good"),
            .number(
                "default_position_sigma_m", \.defaultPositionSigmaMetres, unit: "m", range: 0.001...100_000,
                "position error assumed when a fix gives no covariance"),
        ])
    }

    static let type = StageType(
        name: "direction", role: .transform,
        summary: "the direction of travel: GPS course when moving fast and straight, else the compass heading",
        settings: Settings.table, outputTopics: [PipelineTopics.direction], passesOn: .nothing
    ) { settings, _ in DirectionStage(settings) }

    var selector: DirectionSourceSelector
    let defaultSigma: Double
    var previousFix: (t: Double, lat: Double, lon: Double, sigma: Double)?
    var course: CourseOverGround?
    var previousCourse: Double?
    var published = (gps: 0, compass: 0, none: 0)

    init(_ settings: Settings) {
        selector = DirectionSourceSelector(
            minimumSpeedMetresPerSecond: settings.minimumSpeedMetresPerSecond,
            maximumCourseAccuracyDegrees: settings.maximumCourseAccuracyDegrees,
            maximumCompassAccuracyDegrees: settings.maximumCompassAccuracyDegrees)
        defaultSigma = settings.defaultPositionSigmaMetres
    }

    var inputHandling: InputHandling { .decoded }

    /// Fixes whose latitude, longitude or height is off the earth (see `NavSatFixMessage.isPlausiblePosition`).
    var implausibleFixes = 0

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        switch frame.topic {
        case PipelineTopics.fix:
            let f = try decoded(frame, as: NavSatFixMessage.self)
            guard f.status >= 0, f.isPlausiblePosition else {
                if f.status >= 0 { implausibleFixes += 1 }
                course = nil
                return
            }
            let t = f.header.stamp.seconds
            let sigma =
                f.positionCovarianceType > 0
                ? ((f.positionCovariance.m0 + f.positionCovariance.m4) / 2).squareRoot() : defaultSigma
            if let p = previousFix, t - p.t >= 0.5 {
                // Local flat-earth displacement: fixes are close together.
                let north = (f.latitude - p.lat) * radiansPerDegree * 6_371_000
                let east = (f.longitude - p.lon) * radiansPerDegree * 6_371_000 * cos(f.latitude * radiansPerDegree)
                let distance = (north * north + east * east).squareRoot()
                let bearing = normalizedDegrees(atan2(east, north) * degreesPerRadian)
                // Both fixes' errors across the track, plus how much the course is still turning.
                var accuracy = atan2(2 * max(sigma, p.sigma), max(distance, 1e-9)) * degreesPerRadian
                if let previous = previousCourse { accuracy = max(accuracy, abs(signedDegrees(bearing - previous))) }
                course = CourseOverGround(
                    courseDegrees: bearing, speedMetresPerSecond: distance / (t - p.t), courseAccuracyDegrees: accuracy)
                previousCourse = bearing
                previousFix = (t, f.latitude, f.longitude, sigma)
            } else if previousFix == nil {
                previousFix = (t, f.latitude, f.longitude, sigma)
            }
        case PipelineTopics.heading:
            var h = try decoded(frame, as: HeadingMessage.self)
            let compass = h.trueHeading.isFinite ? h.trueHeading : h.magneticHeading
            switch selector.choose(
                gps: course, compassHeadingDegrees: compass, compassAccuracyDegrees: h.headingAccuracy)
            {
            case .gpsCourse(let degrees, let accuracy):
                h.trueHeading = degrees
                h.magneticHeading = h.declination.isFinite ? normalizedDegrees(degrees - h.declination) : .nan
                h.headingAccuracy = accuracy
                h.source = HeadingMessage.Source.gpsCourse.rawValue
                published.gps += 1
            case .compass:
                h.source = HeadingMessage.Source.compass.rawValue
                published.compass += 1
            case .unknown:
                published.none += 1
                return
            }
            output.append(cdrFrame(h, topic: PipelineTopics.direction))
        default:
            return
        }
    }

    func finish() throws -> [WireFrame] {
        if implausibleFixes > 0 {
            notes.append("\(implausibleFixes) fix(es) with a position off the earth passed over")
        }
        notes.append("direction from GPS course \(published.gps), compass \(published.compass), none \(published.none)")
        return []
    }
}
