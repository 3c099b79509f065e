import Testing
import Foundation
import WireFormat

@Suite("gyrocompass_msgs .msg files")
struct MessageFileTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
        .appendingPathComponent("Sources/WireFormat/gyrocompass_msgs/msg")

    /// Lines without comments, blank lines or trailing space.
    static func significant(_ text: String) -> [String] {
        text.split(separator: "\n").map { line in
            String(line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
                .trimmingCharacters(in: .whitespaces)
        }.filter { !$0.isEmpty }
    }

    @Test(
        "the embedded definitions are the files",
        arguments: [
            ("Heading", HeadingMessage.definitionText), ("CalibrationStatus", MessageDefinitions.calibrationStatusText),
            ("InterferenceStatus", MessageDefinitions.interferenceStatusText),
        ])
    func embeddedMatchesFile(_ name: String, _ embedded: String) throws {
        let file = try String(contentsOf: Self.folder.appendingPathComponent("\(name).msg"), encoding: .utf8)
        #expect(Self.significant(file) == Self.significant(embedded))
        // And each parses as a schema with its dependencies.
        _ = try MessageSchema(
            name: "gyrocompass_msgs/msg/\(name)",
            text: MessageDefinitions.definition(for: "gyrocompass_msgs/msg/\(name)")!)
    }

    @Test("status messages round-trip")
    func statusRoundTrip() throws {
        let h = RosHeader(stamp: RosTime(sec: 5, nanosec: 6), frameId: "imu_link")
        let c = CalibrationStatusMessage(
            header: h, state: 2, prompt: false, progress: 100, coverage: 0.8, rmsResidual: 0.4, fieldStrength: 47.9,
            hardIron: .init(22, -27, 14), softIron: Covariance9([1, 0, 0, 0, 1, 0, 0, 0, 1]),
            gyroBias: .init(0.01, 0, -0.02))
        #expect(try CalibrationStatusMessage(cdrBytes: c.cdr()) == c)
        let i = InterferenceStatusMessage(
            header: h, disturbed: true, flags: 128, samplesAssessed: 100, samplesFlagged: 7, disturbedPeriods: 2,
            disturbedSeconds: 1.5, expectedStrength: 48, expectedDip: 66)
        #expect(try InterferenceStatusMessage(cdrBytes: i.cdr()) == i)
        #expect(try jsonFromCDR(type: CalibrationStatusMessage.typeName, c.cdr())!.contains("\"prompt\":false"))
    }
}

@Suite("gyrocompass_msgs as a ROS 2 interface package")
struct InterfacePackageTests {
    static let package = MessageFileTests.folder.deletingLastPathComponent()

    @Test func cmakeGeneratesEveryMessageFileAndNothingElse() throws {
        let cmake = try String(contentsOf: Self.package.appendingPathComponent("CMakeLists.txt"), encoding: .utf8)
        let listed = Set(cmake.split(separator: "\"").filter { $0.hasPrefix("msg/") }.map { String($0.dropFirst(4)) })
        let files = Set(try FileManager.default.contentsOfDirectory(atPath: MessageFileTests.folder.path))
        #expect(listed == files.filter { $0.hasSuffix(".msg") })
        #expect(cmake.contains("project(gyrocompass_msgs)"))
    }

    @Test func packageDeclaresWhatTheMessagesUse() throws {
        let xml = try String(contentsOf: Self.package.appendingPathComponent("package.xml"), encoding: .utf8)
        #expect(xml.contains("<name>gyrocompass_msgs</name>"))
        #expect(xml.contains("<member_of_group>rosidl_interface_packages</member_of_group>"))
        // Every package a field type comes from is a dependency, in package.xml and CMakeLists.txt.
        let cmake = try String(contentsOf: Self.package.appendingPathComponent("CMakeLists.txt"), encoding: .utf8)
        var used: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(atPath: MessageFileTests.folder.path) {
            let text = try String(contentsOf: MessageFileTests.folder.appendingPathComponent(file), encoding: .utf8)
            for line in MessageFileTests.significant(text) {
                let type = line.split(separator: " ").first.map(String.init) ?? ""
                if let slash = type.firstIndex(of: "/") { used.insert(String(type[..<slash])) }
            }
        }
        #expect(!used.isEmpty)
        for dependency in used {
            #expect(xml.contains("<depend>\(dependency)</depend>"), "package.xml lacks \(dependency)")
            #expect(cmake.contains("find_package(\(dependency) REQUIRED)"), "CMakeLists.txt lacks \(dependency)")
        }
    }
}
