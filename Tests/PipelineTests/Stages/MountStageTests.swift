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
        let mountStage = mount.map { "  mount:\n    type: mount\n    inputs: [sim]\n\($0)\n" } ?? ""
        let config = try PipelineConfig.parse(
            """
            stages:
              sim:
                type: simulator
                scenario: default
                duration_s: 30
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
        // The same mounting told as a robot tells it: static transforms, resolved per frame_id.
        let fromTF = try await mountedHeadings(
            simulator: turned + "\n    publish_tf: true", mount: "    imu_rotation: tf\n    mag_rotation: tf",
            name: "tf")
        #expect(fromTF.count == straight.count && worst(fromTF) < 1e-6)
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
        _ = try parse("tf")
        #expect {
            _ = try parse("auto")
        } throws: { "\($0)".contains("detect_rotation: true") }
    }

    /// A magnetometer message in `frame` with field (1, 2, 3) uT.
    static func magnetometer(_ frame: String) -> WireFrame {
        cdrFrame(
            MagneticFieldMessage(
                header: RosHeader(stamp: RosTime(seconds: 1), frameId: frame), magneticField: Vector3(1, 2, 3) * 1e-6,
                magneticFieldCovariance: .zero), topic: PipelineTopics.magnetometer)
    }

    static func transforms(_ links: [(parent: String, child: String, rpyDegrees: (Double, Double, Double))])
        -> WireFrame
    {
        cdrFrame(
            TFMessage(
                transforms: links.map { link in
                    TFMessage.Transform(
                        header: RosHeader(stamp: RosTime(seconds: 0), frameId: link.parent), childFrameId: link.child,
                        translation: Vector3(0.1, 0, 0.3),
                        rotation: Quaternion(
                            rotationMatrix: MountingRotation.rollPitchYaw(
                                degrees: link.rpyDegrees.0, link.rpyDegrees.1, link.rpyDegrees.2
                            ).matrix))
                }), topic: PipelineTopics.tfStatic)
    }

    @Test(
        "tf: the chain of static transforms from the message's frame up to base_frame; unknown frames held and counted")
    func rotationFromTransformChain() throws {
        let stage = try stageLogic("mount", "    mag_rotation: tf\n    base_frame: base_link\n") as! MountStage
        let out = try processed(
            [
                Self.magnetometer("mag_link"),  // before any transform: held back
                Self.transforms([("base_link", "mast", (0, 0, 90)), ("mast", "mag_link", (180, 0, 0))]),
                Self.magnetometer("mag_link"), Self.magnetometer("elsewhere"),
            ], by: stage)
        let fields = try out.filter { $0.topic == PipelineTopics.magnetometer }.map {
            try MagneticFieldMessage(cdrBytes: $0.payload)
        }
        #expect(fields.count == 1 && fields[0].header.frameId == "base_link")
        // Roll 180 about the mast's x, then yaw 90 into the base: (1, 2, 3) -> (1, -2, -3) -> (2, 1, -3).
        #expect((fields[0].magneticField * 1e6 - Vector3(2, 1, -3)).norm < 1e-9, "\(fields[0].magneticField)")
        #expect(!out.contains { $0.topic == PipelineTopics.tfStatic })  // used here: the messages carry it
        #expect(stage.losses == 2, "\(stage.notes)")
        #expect(
            stage.notes.contains { $0.hasPrefix("tf_static: mag_link to base_link is [180, 0, 90] deg") },
            "\(stage.notes)")
        #expect(stage.notes.contains { $0.contains("no transform from elsewhere to base_link arrived; 1 message(s)") })
    }
}
