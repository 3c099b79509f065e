import Testing
import Foundation
import CompassCore
import WireFormat
import Bags
import MessageBus
@testable import Pipeline

extension PipelineRunTests {
    func headings(fusionSettings: String, name: String) async throws -> [HeadingMessage] {
        PipelineSignals.requestStop(false)
        let config = try PipelineConfig.parse("""
        stages:
          sim:
            type: simulator
            scenario: rest
            duration: 4
            realtime: false
          fusion:
            type: fusion
            inputs: [sim]
        \(fusionSettings)
          rec:
            type: record
            inputs: [fusion]
            path: \(dir)/\(name)
            topics: [heading]
        """, file: "t.yaml", environment: [:])
        _ = try await PipelineRunner.runAll(config, log: { _ in })
        var out: [HeadingMessage] = []
        try BagReader(path: "\(dir)/\(name)").forEachMessage { out.append(try HeadingMessage(cdrBytes: $0.data)) }
        return out
    }

    @Test("true heading = magnetic heading + the WMM declination at the configured position and date")
    func trueNorth() async throws {
        let with = try await headings(fusionSettings: "    latitude: 52.5\n    longitude: 13.4\n    date: 2026.9", name: "north")
        let declination = try WorldMagneticModel.wmm2025.elements(latitudeDegrees: 52.5, longitudeDegrees: 13.4, decimalYear: 2026.9).declinationDegrees
        #expect(!with.isEmpty)
        for h in with {
            #expect(abs(h.declination - declination) < 1e-12)
            #expect(abs(signedDegrees(h.trueHeading - h.magneticHeading - declination)) < 1e-9)
            #expect(h.flags & HeadingMessage.flagNoPosition == 0)
        }
        let without = try await headings(fusionSettings: "", name: "nowhere")
        #expect(without.allSatisfy { $0.trueHeading.isNaN && $0.declination.isNaN && $0.flags & HeadingMessage.flagNoPosition != 0 })
        let outside = try await headings(fusionSettings: "    latitude: 52.5\n    longitude: 13.4\n    date: 2031.5", name: "late")
        #expect(outside.allSatisfy { $0.trueHeading.isNaN && $0.flags & HeadingMessage.flagModelOutOfRange != 0 })
    }

    @Test("the direction stage: GPS course when fast, straight and accurate; compass when accurate; else nothing")
    func directionStage() throws {
        let stage = DirectionStage(.init(try PipelineConfig.parse("stages:\n  d:\n    type: direction\n    inputs: [d2]\n  d2:\n    type: simulator\n",
                                                           file: "t.yaml", environment: [:]).stage(named: "d")!.settings))
        func fix(_ t: Double, metresEast: Double) -> WireFrame {
            let lat = 52.5, lon = 13.4 + metresEast / (6_371_000 * cos(52.5 * radiansPerDegree)) * degreesPerRadian
            let m = NavSatFixMessage(header: RosHeader(stamp: RosTime(seconds: t), frameId: "gps"), status: 0, service: 1, latitude: lat,
                                     longitude: lon, altitude: 30, positionCovariance: [0.25, 0, 0, 0, 0.25, 0, 0, 0, 1], positionCovarianceType: 2)
            return WireFrame(topic: PipelineTopics.fix, type: NavSatFixMessage.typeName, encoding: "cdr", payload: m.cdr())
        }
        func heading(_ t: Double, accuracy: Double) -> WireFrame {
            let h = HeadingMessage(header: RosHeader(stamp: RosTime(seconds: t), frameId: "imu_link"), magneticHeading: 80, trueHeading: 84,
                                   headingAccuracy: accuracy, declination: 4, orientation: Quaternion.identity, magneticField: .zero, source: 0, flags: 0)
            return WireFrame(topic: PipelineTopics.heading, type: HeadingMessage.typeName, encoding: "cdr", payload: h.cdr())
        }
        func direction(_ frames: [WireFrame]) throws -> HeadingMessage? {
            var out: [WireFrame] = []
            for f in frames { try stage.process(f, into: &out) }
            return try out.last.map { try HeadingMessage(cdrBytes: $0.payload) }
        }
        // Moving east at 5 m/s with 0.5 m position errors: the GPS course, 90 degrees true.
        let fast = try #require(try direction([fix(0, metresEast: 0), fix(1, metresEast: 5), fix(2, metresEast: 10), heading(2, accuracy: 5)]))
        #expect(fast.source == HeadingMessage.Source.gpsCourse.rawValue && abs(fast.trueHeading - 90) < 0.01 && abs(fast.magneticHeading - 86) < 0.01)
        // Slow (1 m/s): the compass's true heading.
        let slow = try #require(try direction([fix(3, metresEast: 11), fix(4, metresEast: 12), heading(4, accuracy: 5)]))
        #expect(slow.source == HeadingMessage.Source.compass.rawValue && slow.trueHeading == 84)
        // Slow and a poor compass: nothing.
        #expect(try direction([heading(4.1, accuracy: 45)]) == nil)
    }
}
