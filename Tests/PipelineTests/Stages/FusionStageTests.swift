import Testing
import Foundation
import CompassCore
import WireFormat
import Bags
import MessageBus
@testable import Pipeline

extension PipelineRunTests {
    func headings(fusionSettings: String, name: String) async throws -> [HeadingMessage] {
        let config = try PipelineConfig.parse(
            """
            stages:
              sim:
                type: simulator
                scenario: rest
                duration_s: 4
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

    /// The smoother's accuracy is CompassCore's test (SmootherTests); this one checks the stage: every
    /// sample's outputs, in order, at the end of the stream, smoothed rather than passed through.
    @Test("smooth: one output per sample, in order, smoothed, with an accuracy from the first sample")
    func smoothing() async throws {
        // The truth file's t is the stamp minus 1.7e9 s; keyed by microsecond.
        func key(_ seconds: Double) -> Int { Int(((seconds - 1_700_000_000) * 1e6).rounded()) }
        func run(_ smooth: Bool) async throws -> (headings: [HeadingMessage], truth: [Int: Double]) {
            let name = smooth ? "smoothed" : "forward"
            let config = try PipelineConfig.parse(
                """
                stages:
                  sim:
                    type: simulator
                    scenario: figure_eight
                    duration_s: 30
                    realtime: false
                    truth_path: \(dir)/\(name)-truth.csv
                  fusion:
                    type: fusion
                    inputs: [sim]
                    smooth: \(smooth)
                  rec:
                    type: record
                    inputs: [fusion]
                    path: \(dir)/\(name).mcap
                    topics: [heading]
                """, file: "t.yaml", environment: [:])
            _ = try await PipelineRunner.runAll(config, log: { _ in })
            var out: [HeadingMessage] = []
            try BagReader(path: "\(dir)/\(name).mcap").forEachMessage {
                out.append(try HeadingMessage(cdrBytes: $0.data))
            }
            var truth: [Int: Double] = [:]
            for line in try String(contentsOfFile: "\(dir)/\(name)-truth.csv", encoding: .utf8)
                .split(separator: "\n").dropFirst()
            {
                let v = line.split(separator: ",").compactMap { Double($0) }
                let q = Quaternion(w: v[1], x: v[2], y: v[3], z: v[4])
                truth[Int((v[0] * 1e6).rounded())] = q.headingDegrees
            }
            return (out, truth)
        }
        let forward = try await run(false), smoothed = try await run(true)
        #expect(smoothed.headings.count == forward.headings.count && forward.headings.count > 2000)
        #expect(zip(smoothed.headings, forward.headings).allSatisfy { $0.header.stamp == $1.header.stamp })
        func rms(_ r: (headings: [HeadingMessage], truth: [Int: Double])) -> Double {
            let e = r.headings.dropFirst(300).compactMap { h -> Double? in
                r.truth[key(h.header.stamp.seconds)].map { signedDegrees(h.magneticHeading - $0) }
            }
            return (e.reduce(0) { $0 + $1 * $1 } / Double(e.count)).squareRoot()
        }
        #expect(rms(smoothed) < 0.4, "smoothed \(rms(smoothed)) deg, forward \(rms(forward)) deg")
        let moved = zip(smoothed.headings, forward.headings).filter {
            abs(signedDegrees($0.magneticHeading - $1.magneticHeading)) > 0.01
        }
        #expect(moved.count > forward.headings.count / 2, "smoothing changed only \(moved.count) headings")
        // Smoothed, the first samples have seen the whole run: no initialising, an accuracy everywhere.
        #expect(smoothed.headings.allSatisfy { $0.headingAccuracy.isFinite })
        #expect(!forward.headings.first!.headingAccuracy.isFinite)
    }

    @Test(
        "the Kalman model's parameters are settings: defaults from the filter, given values reach it and its smoother")
    func kalmanParameters() throws {
        let plain = try stageLogic("fusion") as! FusionStage
        #expect(plain.settings.kalman == KalmanFilterSettings())
        let tuned =
            try stageLogic(
                "fusion", "    accelerometer_low_pass_s: 5\n    gyro_rate_noise: 0\n    sensor_latency_s: 0.01\n")
            as! FusionStage
        var expected = KalmanFilterSettings()
        expected.accelerometerLowPassSeconds = 5
        expected.gyroRateNoise = 0
        expected.sensorLatencySeconds = 0.01
        #expect(tuned.settings.kalman == expected)
        #expect(throws: PipelineConfigError.self) { try stageLogic("fusion", "    accelerometer_low_pass_s: 0\n") }
        do {
            _ = try stageLogic("fusion", "    filter: complementary\n    inclination_noise_density: 0.01\n")
            Issue.record("a Kalman parameter was accepted for the complementary filter")
        } catch {
            #expect(
                "\(error)".contains("'inclination_noise_density' of stage 's': a Kalman filter parameter"), "\(error)")
        }
    }
}
