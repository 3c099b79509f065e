import Testing
import Foundation
import CompassCore
import WireFormat
import Bags
import MessageBus
@testable import Pipeline

/// Several magnetometers end to end: the simulator's extra magnetometers (imu/mag/NAME), a calibration
/// stage per magnetometer, and the fusion stage that gates each and fuses the ones that agree.
extension PipelineRunTests {
    struct MagnetometerRun {
        var rmsDegrees: Double
        var fusionNotes: [String]
        var logged: [String]
        var statuses: [String: Int]
    }

    /// A figure-eight run of 120 s: heading RMS error against the truth after the first 5 s, the fusion
    /// stage's notes, what was logged, and how many status messages each topic carried.
    func magnetometerRun(
        name: String, extra: [String], magnet: Vector3 = .zero, noise: Double = 0.5, filter: String = "kalman"
    ) async throws -> MagnetometerRun {
        let calibrations = extra.enumerated().map { i, mag in
            """
              cal_\(mag):
                type: calibration
                inputs: [\(i == 0 ? "sim" : "cal_" + extra[i - 1])]
                magnetometer: \(mag)
                hard_iron_ut: [10, -5, 3]
            """
        }.joined(separator: "\n")
        return try await scoredRun(
            name: name,
            stages: """
                  sim:
                    type: simulator
                    scenario: figure_eight
                    duration_s: 120
                    realtime: false
                    truth_path: \(dir)/\(name)-truth.csv
                    extra_magnetometers: [\(extra.joined(separator: ", "))]
                    extra_hard_iron_ut: [10, -5, 3]
                    magnet_ut: [\(magnet.x), \(magnet.y), \(magnet.z)]
                    magnet_start_s: 30
                    magnet_duration_s: 30
                    mag_noise_ut: \(noise)
                \(calibrations)
                  fusion:
                    type: fusion
                    filter: \(filter)
                    inputs: [\(extra.last.map { "cal_" + $0 } ?? "sim")]
                """, recorded: extra.map { "interference/status/\($0), calibration/status/\($0)" })
    }

    /// Runs `stages` (a simulator writing \(name)-truth.csv and a stage named fusion) with a record
    /// stage of the headings and the `recorded` topics, and scores it as `magnetometerRun` says.
    func scoredRun(name: String, stages: String, recorded: [String] = []) async throws -> MagnetometerRun {
        let config = try PipelineConfig.parse(
            """
            stages:
            \(stages)
              rec:
                type: record
                inputs: [fusion]
                path: \(dir)/\(name).mcap
                topics: [\((["heading"] + recorded).joined(separator: ", "))]
            """, file: "t.yaml", environment: [:])
        let logged = LockedLines()
        let reports = try await PipelineRunner.runAll(config, log: { logged.append($0) })
        var truth: [Int: Double] = [:]
        for line in try String(contentsOfFile: "\(dir)/\(name)-truth.csv", encoding: .utf8).split(separator: "\n")
            .dropFirst()
        {
            let v = line.split(separator: ",").compactMap { Double($0) }
            truth[Int((v[0] * 100).rounded())] = Quaternion(w: v[1], x: v[2], y: v[3], z: v[4]).headingDegrees
        }
        var squares = 0.0, count = 0
        var statuses: [String: Int] = [:]
        try BagReader(path: "\(dir)/\(name).mcap").forEachMessage { m in
            let topic = PipelineTopics.named(m.topic)
            guard topic == PipelineTopics.heading else {
                statuses[topic, default: 0] += 1
                return
            }
            let h = try HeadingMessage(cdrBytes: m.data)
            let t = h.header.stamp.seconds - 1_700_000_000
            guard t > 5, let expected = truth[Int((t * 100).rounded())] else { return }
            let e = signedDegrees(h.magneticHeading - expected)
            squares += e * e
            count += 1
        }
        #expect(count > 10_000)
        return MagnetometerRun(
            rmsDegrees: (squares / Double(max(count, 1))).squareRoot(),
            fusionNotes: reports.first { $0.stage == "fusion" }?.notes ?? [], logged: logged.lines, statuses: statuses)
    }

    @Test("two healthy noisy magnetometers with independent noise give a heading better than one alone")
    func twoHealthyMagnetometers() async throws {
        // 2 uT per axis: a cheap magnetometer. The gain is small: the heading noise density the filter
        // assumes is mostly what magnetometers on one vehicle share, which averaging does not remove.
        let one = try await magnetometerRun(name: "one", extra: [], noise: 2)
        let two = try await magnetometerRun(name: "two", extra: ["mast"], noise: 2)
        #expect(two.rmsDegrees < one.rmsDegrees - 0.005, "two \(two.rmsDegrees) deg, one \(one.rmsDegrees) deg")
        let summary = two.fusionNotes.first { $0.hasPrefix("magnetometers: ") } ?? ""
        #expect(summary.contains("mag: 11999 reading(s)") && summary.contains("mast: 11999 reading(s)"), "\(summary)")
        // Each magnetometer's own status: interference/status/mast besides the primary's, and the
        // calibration stage's calibration/status/mast.
        #expect(two.statuses["interference/status/mast", default: 0] > 0, "\(two.statuses)")
        #expect(two.statuses["calibration/status/mast", default: 0] > 0, "\(two.statuses)")
        #expect(one.fusionNotes.allSatisfy { !$0.hasPrefix("magnetometers: ") })
    }

    @Test("a magnet near one magnetometer: the other outvotes it and the heading stays as good as with it alone")
    func magnetNearOneMagnetometer() async throws {
        // 8.9 uT turning with the vehicle, faded in over 5 s from 30 s, gone after 65 s.
        let magnet = Vector3(8, 4, 0)
        let clean = try await magnetometerRun(name: "clean", extra: [])
        let disturbedAlone = try await magnetometerRun(name: "magnet-alone", extra: [], magnet: magnet)
        let both = try await magnetometerRun(name: "magnet-both", extra: ["mast"], magnet: magnet)
        #expect(
            disturbedAlone.rmsDegrees > clean.rmsDegrees + 0.05, "the magnet must matter: \(disturbedAlone.rmsDegrees)")
        #expect(
            both.rmsDegrees < clean.rmsDegrees + 0.1,
            "both \(both.rmsDegrees) deg, the clean one alone \(clean.rmsDegrees) deg")
        let summary = both.fusionNotes.first { $0.hasPrefix("magnetometers: ") } ?? ""
        #expect(!summary.contains("mag: 11999 reading(s), used 100.0 %"), "\(summary)")
        #expect(both.logged.contains { $0.contains("magnetometer mag outvoted") }, "\(both.logged)")
    }

    @Test("a mast compass mounted yaw_90: the mount stage's extra_mag_rotations turns it into the body's axes")
    func mountedExtraMagnetometer() async throws {
        func run(_ rotations: String) async throws -> (notes: [String], mount: [String]) {
            let config = try PipelineConfig.parse(
                """
                stages:
                  sim: {type: simulator, scenario: figure_eight, duration_s: 30, realtime: false,
                        extra_magnetometers: [mast], extra_mag_rotation: yaw_90}
                  mount: {type: mount, inputs: [sim], extra_mag_rotations: [\(rotations)]}
                  fusion: {type: fusion, inputs: [mount]}
                """, file: "t.yaml", environment: [:])
            let reports = try await PipelineRunner.runAll(config, log: { _ in })
            return (
                reports.first { $0.stage == "fusion" }?.notes ?? [], reports.first { $0.stage == "mount" }?.notes ?? []
            )
        }
        func mastUsed(_ notes: [String]) -> Double? {
            guard let line = notes.first(where: { $0.hasPrefix("magnetometers: ") }),
                let range = line.range(of: #"mast: \d+ reading\(s\), used ([0-9.]+) %"#, options: .regularExpression)
            else { return nil }
            return Double(line[range].split(separator: " ")[4])
        }
        let turned = try await run("mast=yaw_90")
        #expect(
            turned.mount.contains { $0.hasPrefix("magnetometer mast: 3000 sample(s) turned by yaw_90") },
            "\(turned.mount)")
        let straight = try await run("mast=none")
        let used = try #require(mastUsed(turned.notes)), unturned = try #require(mastUsed(straight.notes))
        #expect(used > 90, "\(turned.notes)")
        #expect(unturned < 50, "a compass turned 90 degrees must not steer: \(straight.notes)")
        // Refused at its line: not NAME=ROTATION.
        #expect {
            _ = try PipelineConfig.parse(
                "stages:\n  sim: {type: simulator, duration_s: 1}\n"
                    + "  mount: {type: mount, inputs: [sim], extra_mag_rotations: [mast]}\n",
                file: "t.yaml", environment: [:])
        } throws: { error in
            "\(error)".contains("t.yaml:3:") && "\(error)".contains("'mast' is not NAME=ROTATION")
        }
    }

    @Test("a source's magnetometers list with rotations runs as the explicit mount stage it stands for")
    func magnetometerListShorthand() async throws {
        let bag = "\(dir)/shorthand.mcap"
        _ = try await PipelineRunner.runAll(
            try PipelineConfig.parse(
                """
                stages:
                  sim: {type: simulator, scenario: figure_eight, duration_s: 30, realtime: false,
                        extra_magnetometers: [mast=yaw_90]}
                  record: {type: record, inputs: [sim], path: \(bag), topics: [imu/data_raw, imu/mag, imu/mag/mast]}
                """, file: "rec.yaml", environment: [:]), log: { _ in })
        func run(_ name: String, _ source: String) async throws -> (csv: String, reports: [StageReport]) {
            let config = try PipelineConfig.parse(
                """
                stages:
                \(source)
                  fusion: {type: fusion, inputs: [sensors]}
                  out: {type: csv, inputs: [fusion], path: \(dir)/\(name).csv}
                """, file: "\(name).yaml", environment: [:])
            let reports = try await PipelineRunner.runAll(config, log: { _ in })
            return (try String(contentsOfFile: "\(dir)/\(name).csv", encoding: .utf8), reports)
        }
        let shorthand = try await run(
            "list",
            """
              sensors:
                type: bag
                path: \(bag)
                progress: false
                magnetometers:
                  - {topic: /imu/mag}
                  - {name: mast, topic: /imu/mag/mast, rotation: yaw_90}
            """)
        let explicit = try await run(
            "explicit",
            """
              raw: {type: bag, path: \(bag), progress: false, mag_topic: /imu/mag,
                    extra_magnetometers: [mast=/imu/mag/mast]}
              sensors: {type: mount, inputs: [raw], extra_mag_rotations: [mast=yaw_90]}
            """)
        let unturned = try await run(
            "unturned",
            """
              sensors: {type: bag, path: \(bag), progress: false, mag_topic: /imu/mag,
                        extra_magnetometers: [mast=/imu/mag/mast]}
            """)
        #expect(shorthand.csv.split(separator: "\n").count > 2000)
        #expect(shorthand.csv == explicit.csv, "the shorthand must run exactly what it stands for")
        #expect(shorthand.csv != unturned.csv, "the rotation must matter")
        let mount = try #require(shorthand.reports.first { $0.stage == "sensors_mount" })
        #expect(
            mount.notes.contains { $0.hasPrefix("magnetometer mast: 3000 sample(s) turned by yaw_90") },
            "\(mount.notes)")
    }

    @Test("the magnetometers list expands at load time and refuses what it cannot mean, at its line")
    func magnetometerListChecks() throws {
        let base = """
            stages:
              sensors:
                type: ros2_source
                imu_rotation: roll_180
                magnetometers:
                  - {topic: imu/mag, current_topic: battery}
                  - {name: mast, topic: mast/mag, rotation: [0, 0, -90]}
              fusion: {type: fusion, inputs: [sensors]}
              out: {type: stdout, inputs: [fusion]}
            """
        let config = try PipelineConfig.parse(base, file: "t.yaml", environment: [:])
        #expect(config.stages.map(\.name) == ["sensors", "sensors_mount", "fusion", "out"])
        #expect(config.stage(named: "fusion")?.inputs == ["sensors_mount"])
        let mount = try #require(config.stage(named: "sensors_mount")).settings
        #expect(mount.string("imu_rotation") == "roll_180")
        #expect(mount.list("extra_mag_rotations") == ["mast=0,0,-90"])
        let source = try #require(config.stage(named: "sensors")).settings
        #expect(source.list("extra_magnetometers") == ["mast=mast/mag"])
        #expect(source.string("current_topic") == "battery")
        let refused: [(String, String, String)] = [
            ("rotation: [0, 0, -90]", "rotation: yaw_91", "t.yaml:7:"),
            ("{name: mast, topic: mast/mag", "{topic: mast/mag", "needs a 'name'"),
            ("{topic: imu/mag,", "{name: fc, topic: imu/mag,", "the first magnetometer is the primary"),
            ("topic: mast/mag", "topic: imu/mag", "imu/mag is already read as another magnetometer"),
            ("rotation: [0, 0, -90]", "rotation: auto", "detect_rotation: true"),
            ("rotation: [0, 0, -90]", "current_topic: amps", "differs from 'battery'"),
            ("rotation: [0, 0, -90]", "rotaton: yaw_90", "did you mean 'rotation'"),
            ("    imu_rotation: roll_180\n", "    imu_rotation: roll_180\n    mag_topic: x\n", "not both"),
        ]
        for (from, to, says) in refused {
            #expect(base.contains(from), "the case must change the file: \(from)")
            #expect {
                _ = try PipelineConfig.parse(
                    base.replacingOccurrences(of: from, with: to), file: "t.yaml", environment: [:])
            } throws: { error in
                "\(error)".contains(says)
            }
        }
        #expect {
            _ = try PipelineConfig.parse(
                base + "\n  sensors_mount: {type: stdout, inputs: [fusion]}", file: "t.yaml", environment: [:])
        } throws: { "\($0)".contains("already has a stage of that name") }
    }

    @Test("three magnetometers, one mounted yaw_90, one near the motors: the median outvotes the motors' one")
    func threeMagnetometersOneNearTheMotors() async throws {
        // Each extra magnetometer's own hard iron: the first's turned into the body by its yaw_90 mounting,
        // the second's the first's turned 120 degrees about z (the simulator's rule).
        let h = Vector3(6, -4, 2)
        let mast = MountingRotation.named("yaw_90")!.matrix * h
        let gps = Quaternion(rotationVector: Vector3(0, 0, 2 * Double.pi / 3)).rotate(h)
        func stages(_ name: String, motorAmperes: Double, extras: Bool) -> String {
            let sim = """
                  sim: {type: simulator, scenario: figure_eight, duration_s: 120, realtime: false,
                        truth_path: \(dir)/\(name)-truth.csv, motor_current_a: \(motorAmperes),
                        motor_field_ut_per_a: [0.4, 0.2, 0]\(extras ? ", extra_magnetometers: [mast=yaw_90, gps]" : ""),
                        extra_hard_iron_ut: [\(h.x), \(h.y), \(h.z)]}
                """
            guard extras else { return sim + "\n  fusion: {type: fusion, inputs: [sim]}" }
            return sim + """

                  mount: {type: mount, inputs: [sim], extra_mag_rotations: [mast=yaw_90]}
                  cal_mast: {type: calibration, inputs: [mount], magnetometer: mast,
                             hard_iron_ut: [\(mast.x), \(mast.y), \(mast.z)]}
                  cal_gps: {type: calibration, inputs: [cal_mast], magnetometer: gps,
                            hard_iron_ut: [\(gps.x), \(gps.y), \(gps.z)]}
                  fusion: {type: fusion, inputs: [cal_gps]}
                """
        }
        let healthy = try await scoredRun(
            name: "three-healthy", stages: stages("three-healthy", motorAmperes: 0, extras: true))
        let alone = try await scoredRun(
            name: "motors-alone", stages: stages("motors-alone", motorAmperes: 30, extras: false))
        let three = try await scoredRun(
            name: "three-motors", stages: stages("three-motors", motorAmperes: 30, extras: true))
        #expect(alone.rmsDegrees > 3, "the motors' field must matter: \(alone.rmsDegrees)")
        #expect(three.rmsDegrees < healthy.rmsDegrees + 0.1, "three \(three.rmsDegrees), healthy \(healthy.rmsDegrees)")
        let summary = three.fusionNotes.first { $0.hasPrefix("magnetometers: ") } ?? ""
        #expect(
            summary.contains("mast: 11999 reading(s), used 100.0 %")
                && summary.contains("gps: 11999 reading(s), used 100.0 %"), "\(summary)")
        #expect(!summary.contains("mag: 11999 reading(s), used 100.0 %"), "\(summary)")
    }

    @Test("the report lists each magnetometer's share of readings left out")
    func reportNamesEachMagnetometer() async throws {
        let config = try PipelineConfig.parse(
            """
            stages:
              sim: {type: simulator, scenario: figure_eight, duration_s: 60, realtime: false,
                    extra_magnetometers: [mast], magnet_ut: [8, 4, 0], magnet_start_s: 20, magnet_duration_s: 20}
              fusion: {type: fusion, inputs: [sim]}
              report: {type: report, inputs: [fusion], path: \(dir)/two.html}
            """, file: "t.yaml", environment: [:])
        _ = try await PipelineRunner.runAll(config, log: { _ in })
        let html = try String(contentsOfFile: "\(dir)/two.html", encoding: .utf8)
        let row = try #require(
            html.range(of: #"magnetometer readings left out</th><td>[^<]*"#, options: .regularExpression))
        let text = String(html[row])
        #expect(text.contains("mag: ") && text.contains("mast: 0.0 % of"), "\(text)")
    }

    @Test("only the kalman filter fuses several magnetometers: the complementary filter says what it left out")
    func complementaryFilterLeavesExtraMagnetometersOut() async throws {
        let run = try await magnetometerRun(name: "complementary", extra: ["mast"], filter: "complementary")
        #expect(
            run.fusionNotes.contains {
                $0.contains("12000 reading(s) of magnetometer mast not used: only the kalman filter fuses several")
            }, "\(run.fusionNotes)")
    }

    @Test("a magnetometer name that cannot be part of a topic is refused, naming it")
    func badMagnetometerName() throws {
        #expect {
            _ = try PipelineConfig.parse(
                """
                stages:
                  sim: {type: simulator, duration_s: 1, realtime: false, extra_magnetometers: [mast/2]}
                  fusion: {type: fusion, inputs: [sim]}
                """, file: "t.yaml", environment: [:])
        } throws: { error in
            "\(error)".contains("t.yaml:2:") && "\(error)".contains("'mast/2' is not a magnetometer name")
        }
        #expect {
            _ = try PipelineConfig.parse(
                "stages:\n  bag: {type: bag, path: x.mcap, extra_magnetometers: [mast]}\n", file: "t.yaml",
                environment: [:])
        } throws: { error in
            "\(error)".contains("'mast' is not NAME=TOPIC")
        }
    }
}

/// Log lines collected from stage threads.
final class LockedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    func append(_ line: String) { lock.withLock { stored.append(line) } }
    var lines: [String] { lock.withLock { stored } }
}
