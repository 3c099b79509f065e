import Testing
import Foundation
import CompassCore
import WireFormat
import Bags
import MessageBus
@testable import Pipeline

extension PipelineRunTests {
    /// Magnetic headings of the default scenario through calibration and fusion; `simulator` and
    /// `mount` are extra settings of those stages (no mount stage when nil).
    func mountedHeadings(simulator: String, mount: String?, name: String) async throws -> [Double] {
        PipelineSignals.requestStop(false)
        let mountStage = mount.map { "  mount:\n    type: mount\n    inputs: [sim]\n\($0)\n" } ?? ""
        let config = try PipelineConfig.parse(
            """
            stages:
              sim:
                type: simulator
                scenario: default
                duration: 30
                realtime: false
                hard_iron_ut: [12, -20, 6]
            \(simulator)
            \(mountStage)  calibration:
                type: calibration
                inputs: [\(mount == nil ? "sim" : "mount")]
                online: true
              fusion:
                type: fusion
                inputs: [calibration]
              rec:
                type: record
                inputs: [fusion]
                path: \(dir)/\(name).mcap
                topics: [heading]
            """, file: "t.yaml", environment: [:])
        _ = try await PipelineRunner.runAll(config, log: { _ in })
        var out: [Double] = []
        try BagReader(path: "\(dir)/\(name).mcap").forEachMessage {
            out.append(try HeadingMessage(cdrBytes: $0.data).magneticHeading)
        }
        return out
    }

    @Test("a mount stage with the sensors' rotations gives the headings of sensors mounted straight")
    func mountingRotationsUndone() async throws {
        let straight = try await mountedHeadings(simulator: "", mount: nil, name: "straight")
        let turned = "    imu_rotation: roll_180\n    mag_rotation: [0, 90, -90]"
        let mounted = try await mountedHeadings(
            simulator: turned, mount: "    imu_rotation: roll_180\n    mag_rotation: [0, 90, -90]", name: "mounted")
        let unmounted = try await mountedHeadings(simulator: turned, mount: nil, name: "unmounted")
        #expect(straight.count > 2000 && mounted.count == straight.count)
        func worst(_ a: [Double]) -> Double {
            zip(a, straight).map { abs(signedDegrees($0 - $1)) }.filter(\.isFinite).max() ?? .nan
        }
        #expect(worst(mounted) < 1e-6)
        #expect(worst(unmounted) > 30)  // without the stage the compass points elsewhere
    }
}

@Suite("Mount stage settings")
struct MountStageSettingsTests {
    @Test("a rotation is a known name or three angles; anything else names the problem and the nearest name")
    func rotationSetting() throws {
        func parse(_ value: String) throws -> PipelineConfig {
            try PipelineConfig.parse(
                "stages:\n  s:\n    type: simulator\n  m:\n    type: mount\n    inputs: [s]\n"
                    + "    mag_rotation: \(value)\n  c:\n    type: csv\n    inputs: [m]\n    path: x.csv\n",
                file: "m.yaml", environment: [:])
        }
        _ = try parse("roll_180_yaw_90")
        _ = try parse("[0, 90, -90]")
        #expect {
            _ = try parse("yaw90")
        } throws: { error in
            let text = "\(error)"
            return text.contains("m.yaml:7") && text.contains("'mag_rotation' of stage 'm'") && text.contains("yaw_90")
        }
        #expect(throws: PipelineConfigError.self) { _ = try parse("[0, 90]") }
        #expect(throws: PipelineConfigError.self) { _ = try parse("[0, 90, 400]") }
    }
}
