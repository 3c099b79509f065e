import Testing
import Foundation
import CompassCore
import WireFormat
import Bags
@testable import Pipeline

extension PipelineRunTests {
    func calibrationRun(_ name: String, file: String, log: LogCollector = LogCollector()) async throws -> [CalibrationStatusMessage] {
        PipelineSignals.requestStop(false)
        let config = try PipelineConfig.parse("""
        stages:
          sim:
            type: simulator
            scenario: figure_eight
            duration: 21
            realtime: false
            hard_iron_ut: [22, -27, 14]
          calibration:
            type: calibration
            inputs: [sim]
            online: true
            file: \(file)
          fusion:
            type: fusion
            inputs: [calibration]
          rec:
            type: record
            inputs: [fusion]
            path: \(dir)/\(name)
            topics: [calibration/status, heading]
        """, file: "t.yaml", environment: [:])
        _ = try await PipelineRunner.runAll(config, log: log.append)
        var statuses: [CalibrationStatusMessage] = []
        try BagReader(path: "\(dir)/\(name)").forEachMessage { m in
            if m.topic == "/calibration/status" { statuses.append(try CalibrationStatusMessage(cdrBytes: m.data)) }
        }
        return statuses
    }

    @Test("online calibration stage: cold start, prompt, saved file, reload, and a corrupted file refused")
    func calibrationStage() async throws {
        let file = "\(dir)/compass-calibration.json"
        let first = try await calibrationRun("cold", file: file)
        #expect(first.first!.prompt && first.first!.state != 2)
        let calibrated = try #require(first.first { $0.state == 2 }, "never calibrated")
        #expect(!calibrated.prompt && calibrated.progress == 100)
        #expect((first.last!.hardIron - Vector3(22, -27, 14)).norm < 1, "offset \(first.last!.hardIron)")
        #expect(first.last!.gyroBias.isFinite)
        #expect(FileManager.default.fileExists(atPath: file))

        // A second run starts from the saved file: calibrated, no prompt, from the first status on.
        let second = try await calibrationRun("warm", file: file)
        #expect(second.first!.state == 2 && !second.first!.prompt)

        // A corrupted file is refused with a message naming it; the stage starts uncalibrated.
        try Data("{\"version\": 1, \"hard_iron_ut\": [1, 2]".utf8).write(to: URL(fileURLWithPath: file))
        let log = LogCollector()
        let third = try await calibrationRun("corrupt", file: file, log: log)
        #expect(third.first!.state != 2 && third.first!.prompt)
        #expect(log.lines.contains { $0.contains(file) && $0.contains("refused") })
        // ... and the calibration it learns replaces the broken file.
        #expect(CalibrationFile.load(file).isSuccess)
    }
}

extension Result { var isSuccess: Bool { if case .success = self { return true } else { return false } } }
