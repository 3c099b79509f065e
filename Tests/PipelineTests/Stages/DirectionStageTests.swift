import Testing
import Foundation
import CompassCore
import WireFormat
import MessageBus
@testable import Pipeline

@Suite("Direction stage")
struct DirectionStageTests {
    @Test("the direction stage: GPS course when fast, straight and accurate; compass when accurate; else nothing")
    func directionStage() throws {
        let stage = DirectionStage(
            DirectionStage.Settings.table.read(
                try PipelineConfig.parse(
                    "stages:\n  d:\n    type: direction\n    inputs: [d2]\n  d2:\n    type: simulator\n",
                    file: "t.yaml", environment: [:]
                ).stage(named: "d")!.settings))
        func fix(_ t: Double, metresEast: Double) -> WireFrame {
            let lat = 52.5, lon = 13.4 + metresEast / (6_371_000 * cos(52.5 * radiansPerDegree)) * degreesPerRadian
            let m = NavSatFixMessage(
                header: RosHeader(stamp: RosTime(seconds: t), frameId: "gps"), status: 0, service: 1, latitude: lat,
                longitude: lon, altitude: 30, positionCovariance: [0.25, 0, 0, 0, 0.25, 0, 0, 0, 1],
                positionCovarianceType: 2)
            return WireFrame(
                topic: PipelineTopics.fix, type: NavSatFixMessage.typeName, encoding: "cdr", payload: m.cdr())
        }
        func heading(_ t: Double, accuracy: Double) -> WireFrame {
            let h = HeadingMessage(
                header: RosHeader(stamp: RosTime(seconds: t), frameId: "imu_link"), magneticHeading: 80,
                trueHeading: 84,
                headingAccuracy: accuracy, declination: 4, orientation: Quaternion.identity, magneticField: .zero,
                source: 0, flags: 0)
            return WireFrame(
                topic: PipelineTopics.heading, type: HeadingMessage.typeName, encoding: "cdr", payload: h.cdr())
        }
        func direction(_ frames: [WireFrame]) throws -> HeadingMessage? {
            var out: [WireFrame] = []
            for f in frames { try stage.process(f, into: &out) }
            return try out.last.map { try HeadingMessage(cdrBytes: $0.payload) }
        }
        // Moving east at 5 m/s with 0.5 m position errors: the GPS course, 90 degrees true.
        let fast = try #require(
            try direction([
                fix(0, metresEast: 0), fix(1, metresEast: 5), fix(2, metresEast: 10), heading(2, accuracy: 5),
            ]))
        #expect(
            fast.source == HeadingMessage.Source.gpsCourse.rawValue && abs(fast.trueHeading - 90) < 0.01
                && abs(fast.magneticHeading - 86) < 0.01)
        // Slow (1 m/s): the compass's true heading.
        let slow = try #require(
            try direction([fix(3, metresEast: 11), fix(4, metresEast: 12), heading(4, accuracy: 5)]))
        #expect(slow.source == HeadingMessage.Source.compass.rawValue && slow.trueHeading == 84)
        // Slow and a poor compass: nothing.
        #expect(try direction([heading(4.1, accuracy: 45)]) == nil)
    }
}
