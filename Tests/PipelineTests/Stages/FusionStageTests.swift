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
        let config = try PipelineConfig.parse(
            """
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
        let with = try await headings(
            fusionSettings: "    latitude: 52.5\n    longitude: 13.4\n    date: 2026.9", name: "north")
        let declination = try WorldMagneticModel.wmm2025.elements(
            latitudeDegrees: 52.5, longitudeDegrees: 13.4, decimalYear: 2026.9
        ).declinationDegrees
        #expect(!with.isEmpty)
        for h in with {
            #expect(abs(h.declination - declination) < 1e-12)
            #expect(abs(signedDegrees(h.trueHeading - h.magneticHeading - declination)) < 1e-9)
            #expect(h.flags & HeadingMessage.flagNoPosition == 0)
        }
        let without = try await headings(fusionSettings: "", name: "nowhere")
        #expect(
            without.allSatisfy {
                $0.trueHeading.isNaN && $0.declination.isNaN && $0.flags & HeadingMessage.flagNoPosition != 0
            })
        let outside = try await headings(
            fusionSettings: "    latitude: 52.5\n    longitude: 13.4\n    date: 2031.5", name: "late")
        #expect(outside.allSatisfy { $0.trueHeading.isNaN && $0.flags & HeadingMessage.flagModelOutOfRange != 0 })
    }
}
