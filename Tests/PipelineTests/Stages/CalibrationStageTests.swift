import Testing
import Foundation
import CompassCore
import WireFormat
import Bags
import MessageBus
@testable import Pipeline

extension PipelineRunTests {
    func calibrationRun(_ name: String, file: String, log: LogCollector = LogCollector()) async throws
        -> [CalibrationStatusMessage]
    {
        let config = try PipelineConfig.parse(
            """
            stages:
              sim:
                type: simulator
                scenario: figure_eight
                duration_s: 21
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
        // The gyro bias is the fusion filter's state, not the calibration stage's.
        #expect(first.last!.gyroBias.x.isNaN)
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
        // ... and the file stays as it was (someone's hand edit): the calibration learned is not saved over it.
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "{\"version\": 1, \"hard_iron_ut\": [1, 2]")
        #expect(log.lines.contains { $0.contains("not overwritten") })
    }

    @Test("the calibration file keeps the motor coefficients; a file without them, or with absurd ones, has none")
    func motorCoefficientsInTheFile() throws {
        let file = temporaryPath("motor-calibration.json")
        // Points on a 48 uT sphere around (1, 2, 3): the eight corners and six faces of a cube.
        var directions = [Vector3(1, 0, 0), Vector3(-1, 0, 0), Vector3(0, 1, 0), Vector3(0, -1, 0), Vector3(0, 0, 1)]
        directions.append(Vector3(0, 0, -1))
        for x in [-1.0, 1] {
            for y in [-1.0, 1] { for z in [-1.0, 1] { directions.append(Vector3(x, y, z).normalized!) } }
        }
        let sphere = directions.map { Vector3(1, 2, 3) + $0 * 48 }
        guard case .success(let fit) = CalibrationFitter.fitSphere(sphere) else {
            Issue.record("no sphere fit")
            return
        }
        try CalibrationFile.save(fit, motor: Vector3(0.6, -0.5, 0.25), to: file)
        let loaded = try CalibrationFile.load(file).get()
        #expect(loaded.motorMicroteslaPerAmpere == Vector3(0.6, -0.5, 0.25))
        #expect((loaded.calibration.hardIronOffsetMicrotesla - Vector3(1, 2, 3)).norm < 1e-6)
        try CalibrationFile.save(fit, to: file)
        #expect(try CalibrationFile.load(file).get().motorMicroteslaPerAmpere == nil)
        try CalibrationFile.save(fit, motor: Vector3(0, 500, 0), to: file)
        #expect(try CalibrationFile.load(file).get().motorMicroteslaPerAmpere == nil)

        // A gyro-aided fit has no direction coverage: it is saved (JSON has no NaN), without one.
        var turning = fit
        turning.model = .gyroAided
        turning.directionCoverage = .nan
        try CalibrationFile.save(turning, rotation: MountingRotation.named("yaw_90"), rotationFound: "yaw_90", to: file)
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(!text.contains("coverage") && text.contains("\"mag_rotation\" : \"yaw_90\""))
        #expect(try CalibrationFile.load(file).get().magnetometerRotation?.description == "yaw_90")
        try text.replacingOccurrences(of: "\"yaw_90\"", with: "\"yaw90\"").write(
            toFile: file, atomically: true, encoding: .utf8)
        guard case .failure(let refusal) = CalibrationFile.load(file) else {
            Issue.record("a file with an unknown rotation name was accepted")
            return
        }
        #expect(refusal.reason.contains("'yaw90' is not a rotation name"))
    }
}

@Suite("One calibration file for several magnetometers")
struct SharedCalibrationFileTests {
    /// A sphere fit of radius 48 uT around `offset`.
    func fit(around offset: Vector3) throws -> CalibrationFit {
        var directions: [Vector3] = []
        for x in [-1.0, 0, 1] {
            for y in [-1.0, 0, 1] {
                for z in [-1.0, 0, 1] where x != 0 || y != 0 || z != 0 {
                    directions.append(Vector3(x, y, z).normalized!)
                }
            }
        }
        return try CalibrationFitter.fitSphere(directions.map { offset + $0 * 48 }).get()
    }

    @Test("each magnetometer's calibration is kept under its name; saving one keeps the others")
    func keyedByName() throws {
        let file = temporaryPath("shared-calibration.json")
        let primary = try fit(around: Vector3(1, 2, 3)), mast = try fit(around: Vector3(-4, 5, 6))
        guard case .failure(let none) = CalibrationFile.load(file, magnetometer: "mast") else {
            Issue.record("a missing file loaded")
            return
        }
        #expect(!none.exists)
        try CalibrationFile.save(mast, rotation: MountingRotation.named("yaw_90"), magnetometer: "mast", to: file)
        guard case .failure(let noPrimary) = CalibrationFile.load(file) else {
            Issue.record("the primary loaded from a file that holds only the mast's")
            return
        }
        #expect(!noPrimary.exists && noPrimary.reason.contains("primary"))
        try CalibrationFile.save(primary, motor: Vector3(0.5, 0, 0), to: file)
        try CalibrationFile.save(mast, rotation: MountingRotation.named("yaw_90"), magnetometer: "mast", to: file)
        let first = try CalibrationFile.load(file).get()
        #expect((first.calibration.hardIronOffsetMicrotesla - Vector3(1, 2, 3)).norm < 1e-6)
        #expect(first.motorMicroteslaPerAmpere == Vector3(0.5, 0, 0) && first.magnetometerRotation == nil)
        let second = try CalibrationFile.load(file, magnetometer: "mast").get()
        #expect((second.calibration.hardIronOffsetMicrotesla - Vector3(-4, 5, 6)).norm < 1e-6)
        #expect(second.magnetometerRotation?.description == "yaw_90" && second.motorMicroteslaPerAmpere == nil)
        guard case .failure(let other) = CalibrationFile.load(file, magnetometer: "gps") else {
            Issue.record("a magnetometer the file does not name loaded")
            return
        }
        #expect(!other.exists && other.reason.contains("'gps'"))
        // A broken entry is refused, naming the magnetometer; the others still load.
        let data = try #require(FileManager.default.contents(atPath: file))
        var root = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        root["magnetometers"] = ["mast": "garbage"]
        try JSONSerialization.data(withJSONObject: root).write(to: URL(fileURLWithPath: file))
        guard case .failure(let broken) = CalibrationFile.load(file, magnetometer: "mast") else {
            Issue.record("a broken entry loaded")
            return
        }
        #expect(broken.exists && broken.reason.contains("'mast'"))
        #expect(CalibrationFile.load(file).isSuccess)
        try CalibrationFile.save(mast, magnetometer: "gps", to: file)
        #expect(CalibrationFile.load(file, magnetometer: "gps").isSuccess)
    }

    @Test("two stages saving into one file at once both land")
    func concurrentSaves() throws {
        let file = temporaryPath("concurrent-calibration.json")
        let fits = [try fit(around: Vector3(1, 2, 3)), try fit(around: Vector3(-4, 5, 6))]
        let failures = Atomic(0)
        DispatchQueue.concurrentPerform(iterations: 2) { i in
            for _ in 0..<40 {
                do { try CalibrationFile.save(fits[i], magnetometer: i == 0 ? "" : "mast", to: file) } catch {
                    failures.add(1)
                }
            }
        }
        #expect(failures.value == 0)
        #expect(CalibrationFile.load(file).isSuccess)
        #expect(CalibrationFile.load(file, magnetometer: "mast").isSuccess)
    }

    @Test("a pipeline's calibration stages share one file: each saves and loads its own")
    func stagesShareOneFile() throws {
        let file = temporaryPath("pipeline-calibration.json")
        func run() throws -> [String] {
            let text = """
                stages:
                  sim: {type: simulator, scenario: default, seed: 4, duration_s: 60, realtime: false,
                        extra_magnetometers: [mast], extra_hard_iron_ut: [5, -8, 3]}
                  cal: {type: calibration, inputs: [sim], online: true, prompt: false, file: \(file)}
                  cal_mast: {type: calibration, inputs: [cal], magnetometer: mast, online: true, prompt: false,
                             file: \(file)}
                """
            let config = try PipelineConfig.parse(text, file: "shared.yaml", environment: [:])
            let source = try config.stage(named: "sim")!.makeLogic(log: { _ in }) as! SimulatorSource
            let cal = try config.stage(named: "cal")!.makeLogic(log: { _ in }) as! CalibrationStage
            let mast = try config.stage(named: "cal_mast")!.makeLogic(log: { _ in }) as! CalibrationStage
            _ = try processed(try processed(try emitted(by: source), by: cal), by: mast)
            return cal.notes + mast.notes
        }
        let first = try run()
        #expect(!first.contains { $0.hasPrefix("loaded the calibration") })
        let primary = try CalibrationFile.load(file).get(),
            mast = try CalibrationFile.load(file, magnetometer: "mast").get()
        #expect((primary.calibration.hardIronOffsetMicrotesla - mast.calibration.hardIronOffsetMicrotesla).norm > 3)
        let second = try run()
        #expect(second.filter { $0.hasPrefix("loaded the calibration in \(file)") }.count == 2, "\(second)")
    }
}

/// A counter several threads add to.
final class Atomic: @unchecked Sendable {
    private let lock = NSLock()
    private var count: Int
    init(_ value: Int) { count = value }
    func add(_ n: Int) { lock.withLock { count += n } }
    var value: Int { lock.withLock { count } }
}

extension Result { var isSuccess: Bool { if case .success = self { return true } else { return false } } }

@Suite("Calibration stage in place")
struct CalibrationInPlaceTests {
    @Test("calibration patches little-endian vectors in place and re-encodes big-endian ones, to the same values")
    func calibrationPatchesInPlace() throws {
        let config = try PipelineConfig.parse(
            "stages:\n  s:\n    type: simulator\n  c:\n    type: calibration\n    inputs: [s]\n    hard_iron_ut: "
                + "[10, -20, 5]\n",
            file: "t.yaml", environment: [:])
        let stage = CalibrationStage(
            CalibrationStage.Settings.table.read(config.stage(named: "c")!.settings), log: { _ in })
        let header = RosHeader(stamp: RosTime(seconds: 1_700_000_000.25), frameId: "imu_link")
        var covariance = Covariance9.zero
        covariance.m4 = 0.5
        let mag = MagneticFieldMessage(
            header: header, magneticField: Vector3(30e-6, -5e-6, 40e-6), magneticFieldCovariance: covariance)
        var out: [WireFrame] = []
        try stage.process(
            WireFrame(
                topic: PipelineTopics.magnetometer, type: MagneticFieldMessage.typeName, encoding: "cdr",
                payload: mag.cdr()), into: &out)
        let patched = try MagneticFieldMessage(cdrBytes: out[0].payload)
        #expect(patched.header == header && patched.magneticFieldCovariance == covariance)
        #expect(
            abs(patched.magneticField.x - 20e-6) < 1e-15 && abs(patched.magneticField.y - 15e-6) < 1e-15
                && abs(patched.magneticField.z - 35e-6) < 1e-15)
        // The same message in big-endian CDR, written by hand: re-encoded little endian with the same values.
        var be: [UInt8] = [0, 0, 0, 0]
        func put<T: FixedWidthInteger>(_ v: T) {
            while (be.count - 4) % MemoryLayout<T>.size != 0 { be.append(0) }
            withUnsafeBytes(of: v.bigEndian) { be += $0 }
        }
        put(header.stamp.sec)
        put(header.stamp.nanosec)
        put(UInt32(9))
        be += Array("imu_link".utf8) + [0]
        for v in [30e-6, -5e-6, 40e-6, 0, 0, 0, 0, 0.5, 0, 0, 0, 0] { put(v.bitPattern) }
        out.removeAll()
        try stage.process(
            WireFrame(
                topic: PipelineTopics.magnetometer, type: MagneticFieldMessage.typeName, encoding: "cdr", payload: be),
            into: &out)
        #expect(out[0].payload.prefix(2) == [0, 1])
        #expect(try MagneticFieldMessage(cdrBytes: out[0].payload) == patched)
    }
}
