import CompassCore
import IMUSimulator
import Testing

#if canImport(Glibc)
    import Glibc
#endif

typealias FusionFilter = OrientationFilter

struct Step {
    let sample: SimulatedSample
    let output: FusionOutput
}

func run<F: FusionFilter>(_ filter: inout F, _ scenario: SimulationScenario) -> [Step] {
    IMUSimulator.samples(scenario).compactMap { s in
        filter.update(imu: s.imu, magnetometer: s.magnetometer).map { Step(sample: s, output: $0) }
    }
}

/// Signed heading error in degrees (estimate minus truth), nil when undefined.
func headingError(_ step: Step) -> Double? {
    guard let h = step.output.orientation.headingDegrees, let t = step.sample.trueHeadingDegrees else { return nil }
    return signedDegrees(h - t)
}

/// Inclination error in degrees: the angle between the estimated and true up directions.
func inclinationError(_ step: Step) -> Double {
    let estUp = step.output.orientation.inverseRotate(.unitZ)
    let trueUp = step.sample.trueOrientation.inverseRotate(.unitZ)
    return acosClamped(estUp.dot(trueUp)) * degreesPerRadian
}

func acosClamped(_ x: Double) -> Double { _acosForTest(max(-1, min(1, x))) }

func makeScenario(
    _ motion: [MotionSegment], seed: UInt64 = 3, heading: Double = 30, pitch: Double = 0,
    bias: Vector3 = .zero, disturbances: [ScheduledDisturbance] = []
) -> SimulationScenario {
    var s = SimulationScenario()
    s.seed = seed
    s.sampleRateHz = 100
    s.startHeadingDegrees = heading
    s.startPitchDegrees = pitch
    s.motion = motion
    s.disturbances = disturbances
    s.sensors.gyroInitialBias = bias
    return s
}

@Suite("Fusion filters on the simulator")
struct FusionTests {
    @Test("gyro bias converges at rest (both filters)")
    func biasAtRest() {
        let bias = Vector3(0.01, -0.02, 0.005)
        let scenario = makeScenario([.rest(seconds: 60)], bias: bias)
        var kf = KalmanFilter()
        var cf = ComplementaryFilter()
        let k = run(&kf, scenario), c = run(&cf, scenario)
        let kError = (kf.gyroBias - IMUSimulator.samples(scenario).last!.trueGyroBias).norm
        let cError = (cf.gyroBias - IMUSimulator.samples(scenario).last!.trueGyroBias).norm
        #expect(kError < 0.001, "Kalman bias error \(kError) rad/s")
        #expect(cError < 0.001, "complementary bias error \(cError) rad/s")
        #expect(k.last!.output.flags.contains(.atRest) && c.last!.output.flags.contains(.atRest))
    }

    @Test("gyro bias converges in motion, with no rest at all (Kalman)")
    func biasInMotion() {
        let bias = Vector3(0.015, -0.01, 0.02)
        var motion: [MotionSegment] = []
        for _ in 0..<6 {
            motion += [
                .turn(degreesPerSecond: 40, seconds: 5), .walking(seconds: 10, stepsPerSecond: 1.8),
                .rotate(sensorAxis: Vector3(1, 0.3, 0), degreesPerSecond: 30, seconds: 4),
                .turn(degreesPerSecond: -25, seconds: 6), .figureEight(seconds: 8),
            ]
        }
        let scenario = makeScenario(motion, bias: bias)
        var kf = KalmanFilter()
        let steps = run(&kf, scenario)
        #expect(!steps.contains { $0.output.flags.contains(.atRest) }, "the scenario must contain no rest")
        let error = (kf.gyroBias - steps.last!.sample.trueGyroBias).norm
        #expect(error < 0.002, "bias error after \(scenario.duration) s of motion: \(error) rad/s (initial 0.027)")
        let late = steps.suffix(3000).compactMap(headingError).map { abs($0) }
        #expect(late.max()! < 3, "heading error late in the run: \(late.max()!) deg")
    }

    @Test("a magnet held near for 10 s moves the heading by less than 2 degrees (both filters)")
    func magnetNearby() {
        // 25 uT pointing east in the world: the raw compass swings by tens of degrees.
        let magnet = ScheduledDisturbance(
            startSeconds: 30, durationSeconds: 10, fieldMicrotesla: Vector3(25, 0, 0), frame: .world, rampSeconds: 1)
        let scenario = makeScenario(
            [.rest(seconds: 25), .turn(degreesPerSecond: 6, seconds: 20), .rest(seconds: 15)], disturbances: [magnet])
        let raw = IMUSimulator.samples(scenario).filter { $0.isDisturbed }.map { s in
            abs(
                signedDegrees(
                    TiltCompensatedCompass.headingDegrees(
                        field: s.magnetometer.fieldMicrotesla, specificForce: s.imu.specificForce)! - s
                        .trueHeadingDegrees!))
        }
        #expect(raw.max()! > 20)
        var kf = KalmanFilter()
        var cf = ComplementaryFilter()
        for (name, steps) in [("Kalman", run(&kf, scenario)), ("complementary", run(&cf, scenario))] {
            let errors = steps.filter { $0.sample.imu.timestamp > 20 }.compactMap(headingError).map(abs)
            #expect(errors.max()! < 2, "\(name): worst heading error \(errors.max()!) deg")
            #expect(
                steps.contains { $0.output.flags.contains(.magnetometerRejected) }, "\(name) never rejected the magnet")
        }
    }

    @Test("a plausible disturbance that keeps strength and dip is caught by gyro consistency (both filters)")
    func plausibleDisturbance() {
        // (-1.5 north, 8 east) uT: turns the compass by 24 degrees at heading 30, pitch 10.
        let plausible = ScheduledDisturbance(
            startSeconds: 30, durationSeconds: 30, fieldMicrotesla: Vector3(8, -1.5, 0), frame: .world, rampSeconds: 0.5
        )
        let scenario = makeScenario([.rest(seconds: 80)], pitch: 10, disturbances: [plausible])
        let check = InterferenceCheck(expectedStrengthMicrotesla: 48, expectedDipDegrees: 66)
        let disturbed = IMUSimulator.samples(makeScenario([.rest(seconds: 40)], pitch: 10, disturbances: [plausible]))
            .last!
        #expect(
            check.assess(
                fieldMicrotesla: disturbed.trueEarthFieldMicrotesla
                    + disturbed.trueOrientation.inverseRotate(Vector3(8, -1.5, 0)),
                specificForce: disturbed.imu.specificForce
            ).isClean, "strength/dip alone let it through")
        var kf = KalmanFilter()
        var cf = ComplementaryFilter()
        for (name, steps) in [("Kalman", run(&kf, scenario)), ("complementary", run(&cf, scenario))] {
            let errors = steps.filter { $0.sample.imu.timestamp > 20 }.compactMap(headingError).map(abs)
            #expect(errors.max()! < 2, "\(name): worst heading error \(errors.max()!) deg")
            let flagged = steps.filter { $0.output.flags.contains(.magneticGyroInconsistent) }
            #expect(!flagged.isEmpty, "\(name): no gyro-inconsistency flag")
            if let first = flagged.first {
                #expect(first.sample.imu.timestamp < 31.5, "\(name): flagged at \(first.sample.imu.timestamp) s")
            }
            #expect(
                !steps.filter { $0.sample.imu.timestamp > 45 && $0.sample.imu.timestamp < 60 }.contains {
                    $0.output.flags.contains(.magneticStrengthDisturbed)
                        || $0.output.flags.contains(.magneticDipDisturbed)
                })
        }
    }

    @Test("a heading started wrong (next to steel) is taken back once the compass is steady (Kalman)")
    func startedNextToSteel() {
        // The plausible field (24 degrees of heading, strength and dip kept) from the start for 8 s: the
        // heading starts from it. When it goes, the compass turns back while the gyro says nothing
        // turned; within the first seconds of agreement that is the start's heading being wrong.
        let steel = ScheduledDisturbance(
            startSeconds: 0, durationSeconds: 8, fieldMicrotesla: Vector3(8, -1.5, 0), frame: .world, rampSeconds: 0.5)
        let scenario = makeScenario([.rest(seconds: 40)], pitch: 10, disturbances: [steel])
        var settings = KalmanFilterSettings()
        var adopting = KalmanFilter(settings: settings)
        settings.magneticGate.startupSeconds = 0
        var holding = KalmanFilter(settings: settings)
        func worstAfter25(_ steps: [Step]) -> Double {
            steps.filter { $0.sample.imu.timestamp - scenario.startTime > 25 }.compactMap(headingError).map(abs).max()!
        }
        let adopted = run(&adopting, scenario), held = run(&holding, scenario)
        print(
            "started next to steel: worst error after 25 s \(worstAfter25(adopted)) (without adoption "
                + "\(worstAfter25(held)))")
        #expect(worstAfter25(adopted) < 2)
        #expect(worstAfter25(held) > 10)
        #expect(adopted.contains { $0.output.flags.contains(.magneticReferenceChanged) })
    }

    @Test("impacts of 5 g do not tilt the estimate by more than 1 degree (both filters)")
    func impacts() {
        let scenario = makeScenario(
            [.rest(seconds: 20), .impacts(seconds: 30, peakG: 5, intervalSeconds: 0.5), .rest(seconds: 5)], pitch: 15)
        var kf = KalmanFilter()
        var cf = ComplementaryFilter()
        for (name, steps) in [("Kalman", run(&kf, scenario)), ("complementary", run(&cf, scenario))] {
            let worst = steps.filter { $0.sample.imu.timestamp > 15 }.map(inclinationError).max()!
            #expect(worst < 1, "\(name): worst inclination error \(worst) deg")
        }
    }

    @Test("NaN, infinite, zero and backwards samples are skipped and counted, never poisoning the state")
    func badSamples() {
        let good = IMUSimulator.samples(makeScenario([.rest(seconds: 5), .turn(degreesPerSecond: 20, seconds: 5)]))
        func check<F: FusionFilter>(_ filter: inout F, _ name: String) {
            var outputs: [FusionOutput] = []
            for (i, s) in good.enumerated() {
                if let o = filter.update(imu: s.imu, magnetometer: s.magnetometer) { outputs.append(o) }
                guard i % 50 == 25 else { continue }
                let t = s.imu.timestamp
                let bad: [(ImuSample, MagnetometerSample?)] = [
                    (
                        ImuSample(
                            timestamp: t + 0.001, angularVelocity: Vector3(.nan, 0, 0),
                            specificForce: s.imu.specificForce), nil
                    ),
                    (
                        ImuSample(
                            timestamp: t + 0.001, angularVelocity: .zero, specificForce: Vector3(0, .infinity, 0)), nil
                    ),
                    (ImuSample(timestamp: t + 0.001, angularVelocity: .zero, specificForce: .zero), nil),
                    (ImuSample(timestamp: t - 1, angularVelocity: .zero, specificForce: s.imu.specificForce), nil),
                    (ImuSample(timestamp: t, angularVelocity: .zero, specificForce: s.imu.specificForce), nil),
                    (ImuSample(timestamp: .nan, angularVelocity: .zero, specificForce: s.imu.specificForce), nil),
                ]
                for (imu, mag) in bad {
                    #expect(filter.update(imu: imu, magnetometer: mag) == nil, "\(name) accepted \(imu)")
                }
            }
            let rounds = good.indices.filter { $0 % 50 == 25 }.count
            let k = filter.skipped
            #expect(
                k.nonFiniteImu == 3 * rounds && k.zeroSpecificForce == rounds && k.timestampNotIncreasing == 2 * rounds,
                "\(name): \(k)")
            #expect(outputs.count == good.count)
            #expect(
                outputs.allSatisfy {
                    $0.orientation.isFinite && $0.gyroBias.isFinite && ($0.headingDegrees?.isFinite ?? true)
                })
            #expect(abs(headingError(Step(sample: good.last!, output: outputs.last!))!) < 2)
        }
        var kf = KalmanFilter()
        var cf = ComplementaryFilter()
        check(&kf, "Kalman")
        check(&cf, "complementary")
        // A bad magnetometer alone is counted and the IMU part still used.
        var k2 = KalmanFilter()
        _ = k2.update(imu: good[0].imu, magnetometer: good[0].magnetometer)
        let o = k2.update(
            imu: good[1].imu,
            magnetometer: MagnetometerSample(timestamp: good[1].imu.timestamp, fieldMicrotesla: Vector3(0, .nan, 1)))
        #expect(o != nil && k2.skipped.nonFiniteMagnetometer == 1)
        _ = k2.update(
            imu: good[2].imu, magnetometer: MagnetometerSample(timestamp: good[2].imu.timestamp, fieldMicrotesla: .zero)
        )
        #expect(k2.skipped.zeroMagneticField == 1)
    }

    @Test("flags explain the state: initialising, at rest, gyro only")
    func flags() {
        // 30 s at rest with the magnetometer, then 120 s of turning without it.
        let scenario = makeScenario(
            [.rest(seconds: 30), .turn(degreesPerSecond: 20, seconds: 120)], bias: Vector3(0, 0, 0.004))
        var kf = KalmanFilter()
        var outputs: [FusionOutput] = []
        for (i, s) in IMUSimulator.samples(scenario).enumerated() {
            if let o = kf.update(imu: s.imu, magnetometer: i < 3000 ? s.magnetometer : nil) { outputs.append(o) }
        }
        #expect(outputs.first!.flags.contains(.initialising))
        #expect(outputs.first!.headingAccuracyDegrees == nil)
        #expect(!outputs[2900].flags.contains(.initialising) && outputs[2900].flags.contains(.atRest))
        #expect(outputs[2900].headingAccuracyDegrees != nil)
        #expect(outputs.last!.flags.contains(.gyroOnly) && !outputs.last!.flags.contains(.atRest))
        // Without the compass the uncertainty grows.
        #expect(
            outputs.last!.headingAccuracyDegrees! > outputs[2900].headingAccuracyDegrees! + 0.5,
            "accuracy \(outputs[2900].headingAccuracyDegrees!) -> \(outputs.last!.headingAccuracyDegrees!)")
        #expect(FusionFlags([.atRest, .gyroOnly]).description == "at_rest|gyro_only")
    }

    @Test("the complementary filter never snaps: heading corrections are rate bounded")
    func boundedCorrection() {
        // Level and still with a perfect gyro; after 20 s the field turns by 40 degrees for good (a
        // new homogeneous field). Any heading change is the filter's correction.
        var settings = ComplementaryFilterSettings()
        settings.maximumHeadingCorrectionDegreesPerSecond = 2
        var cf = ComplementaryFilter(settings: settings)
        var s = makeScenario([.rest(seconds: 400)])
        s.sensors = .ideal
        let turned = Quaternion(axis: .unitZ, angleRadians: 40 * radiansPerDegree)
        var previous: Double?
        var worstStep = 0.0
        var last: FusionOutput?
        for x in IMUSimulator.samples(s) {
            var mag = x.magnetometer
            if x.imu.timestamp >= 20 {
                mag.fieldMicrotesla = x.trueOrientation.inverseRotate(turned.rotate(s.earthFieldENU))
            }
            guard let o = cf.update(imu: x.imu, magnetometer: mag), let h = o.headingDegrees else { continue }
            if let p = previous, x.imu.timestamp > 2 { worstStep = max(worstStep, abs(signedDegrees(h - p))) }
            previous = h
            last = o
        }
        #expect(worstStep <= 2 * 0.01 + 1e-9, "largest heading step \(worstStep) deg in 10 ms")
        // It did eventually accept the new field.
        // The field turned 40 degrees counter-clockwise, so the device now reads 30 + 40.
        #expect(abs(signedDegrees(last!.headingDegrees! - 70)) < 1, "final heading \(last!.headingDegrees!)")
    }

    @Test("sensor-latency compensation predicts the reported orientation ahead by rate x latency")
    func latencyPrediction() {
        var s = makeScenario([.rest(seconds: 3), .turn(degreesPerSecond: 50, seconds: 2)])
        s.sensors = .ideal
        for kind in FilterKind.allCases {
            var plain = kind.make()
            var predicted = kind.make(CommonFilterOptions(sensorLatencySeconds: 0.02))
            var last: (FusionOutput, FusionOutput)?
            for x in IMUSimulator.samples(s) {
                if let a = plain.update(imu: x.imu, magnetometer: x.magnetometer),
                    let b = predicted.update(imu: x.imu, magnetometer: x.magnetometer)
                {
                    last = (a, b)
                }
            }
            // Turning at 50 deg/s: 20 ms ahead is 1 degree further round.
            let turned = signedDegrees(last!.1.headingDegrees! - last!.0.headingDegrees!)
            #expect(abs(turned - 1.0) < 0.02, "\(kind): predicted \(turned) deg ahead")
        }
    }

    @Test("the reference offset makes a chosen direction zero (both filters)")
    func referenceOffset() {
        let scenario = makeScenario([.rest(seconds: 5)], heading: 75)
        var ks = KalmanFilterSettings()
        ks.referenceOffsetDegrees = 75
        var cs = ComplementaryFilterSettings()
        cs.referenceOffsetDegrees = 75
        var kf = KalmanFilter(settings: ks)
        var cf = ComplementaryFilter(settings: cs)
        for steps in [run(&kf, scenario), run(&cf, scenario)] {
            let h = steps.last!.output.headingDegrees!
            #expect(abs(signedDegrees(h)) < 1.5, "heading \(h)")
        }
    }

    @Test("the Kalman filter's heading accuracy covers the true error honestly in simulation")
    func honestAccuracy() {
        var motion: [MotionSegment] = [.rest(seconds: 20)]
        for _ in 0..<4 {
            motion += [
                .turn(degreesPerSecond: 30, seconds: 6), .walking(seconds: 15, stepsPerSecond: 1.8), .rest(seconds: 5),
                .moveTo(headingDegrees: 200, pitchDegrees: 20, rollDegrees: -10, seconds: 3), .figureEight(seconds: 6),
            ]
        }
        let magnet = ScheduledDisturbance(
            startSeconds: 60, durationSeconds: 15, fieldMicrotesla: Vector3(0, 15, 10), frame: .world)
        let scenario = makeScenario(motion, bias: Vector3(0.005, 0.003, -0.004), disturbances: [magnet])
        var kf = KalmanFilter()
        let steps = run(&kf, scenario).filter { $0.output.headingAccuracyDegrees != nil }
        let covered = steps.filter { abs(headingError($0) ?? 0) <= $0.output.headingAccuracyDegrees! }.count
        let coverage = Double(covered) / Double(steps.count)
        let median = percentile(steps.map { $0.output.headingAccuracyDegrees! }, 50)
        print("simulated coverage \(coverage), median accuracy \(median) deg")
        #expect(coverage >= 0.9 && coverage <= 1)
        // The default 3-degree floor is for real indoor fields; the simulator's is homogeneous.
        #expect(median < 8, "accuracy so loose it says nothing: median \(median) deg")
    }
}

@Suite("Heading accuracy: a disturbance fixed to the sensor")
struct SensorFixedDisturbanceAccuracyTests {
    /// 1.2 uT along the sensor's x axis from the first sample: 2.5 % of the field, inside every
    /// strength and dip tolerance, so no check catches it and the gate learns its reference with it.
    static let phone = ScheduledDisturbance(
        startSeconds: 0, durationSeconds: 1e9, fieldMicrotesla: Vector3(1.2, 0, 0), frame: .sensor)

    /// Walking straight for a minute, then five full turns, then at rest at `endHeading`.
    static func phases<F: FusionFilter>(_ filter: inout F, endHeading: Double) -> (straight: [Step], turned: [Step]) {
        let motion: [MotionSegment] =
            [.rest(seconds: 20), .walking(seconds: 60, stepsPerSecond: 1.8)]
            + Array(repeating: .turn(degreesPerSecond: 30, seconds: 12), count: 5)
            + [.moveTo(headingDegrees: endHeading, pitchDegrees: 0, rollDegrees: 0, seconds: 4), .rest(seconds: 20)]
        let steps = run(&filter, makeScenario(motion, heading: 90, disturbances: [phone]))
            .filter { $0.output.headingAccuracyDegrees != nil }
        return (
            steps.filter { $0.output.timestamp > 30 && $0.output.timestamp < 80 },
            steps.filter { $0.output.timestamp > 144 }
        )
    }

    static func coverage(_ steps: [Step]) -> Double {
        let covered = steps.filter { abs(headingError($0) ?? 0) <= $0.output.headingAccuracyDegrees! }
        return Double(covered.count) / Double(steps.count)
    }

    static func medianBound(_ steps: [Step]) -> Double {
        percentile(steps.map { $0.output.headingAccuracyDegrees! }, 50)
    }

    @Test(
        "the bound covers it while the sensor keeps its heading, and after turning has shown it (both filters)",
        arguments: [0.0, 90, 180, 270])
    func coveredBeforeAndAfterTurning(endHeading: Double) {
        var kf = KalmanFilter()
        var cf = ComplementaryFilter()
        let runs = [
            ("kalman", Self.phases(&kf, endHeading: endHeading)),
            ("complementary", Self.phases(&cf, endHeading: endHeading)),
        ]
        for (name, p) in runs {
            let straight = Self.coverage(p.straight), turned = Self.coverage(p.turned)
            print(
                "\(name) ending at \(endHeading): straight coverage \(straight) bound \(Self.medianBound(p.straight)),"
                    + " turned coverage \(turned) bound \(Self.medianBound(p.turned))")
            #expect(straight >= 0.95, "\(name)")
            #expect(turned >= 0.95, "\(name)")
        }
    }

    @Test("the accuracy's parts add up to the reported bound and show what turning exposed (both filters)")
    func accuracyPartsExplainTheBound() {
        func check<F: FusionFilter>(_ name: String, _ make: () -> F) {
            // Straight on: nothing exposed, the disturbance's part is the prior's.
            var straight = make()
            let walked = run(
                &straight,
                makeScenario(
                    [.rest(seconds: 20), .walking(seconds: 60, stepsPerSecond: 1.8)], disturbances: [Self.phone]))
            let before = straight.headingAccuracyParts
            #expect(abs(before.boundDegrees - walked.last!.output.headingAccuracyDegrees!) < 1e-9, "\(name)")
            #expect(
                before.disturbanceUnknownSigmaDegrees > 0.9 * before.disturbancePriorSigmaDegrees, "\(name) \(before)")
            // Five full turns show most of it.
            var turning = make()
            let turned = Self.phases(&turning, endHeading: 0).turned
            let after = turning.headingAccuracyParts
            print("\(name): straight \(before); turned \(after)")
            #expect(abs(after.boundDegrees - turned.last!.output.headingAccuracyDegrees!) < 1e-9, "\(name)")
            #expect(after.disturbanceUnknownSigmaDegrees < 0.5 * after.disturbancePriorSigmaDegrees, "\(name) \(after)")
            #expect(after.turnedRadians > 5 * 2 * Double.pi * 0.9, "\(name) \(after)")
            #expect(after.filterSigmaDegrees > 0 && after.fitInconsistency >= 1, "\(name) \(after)")
        }
        check("kalman") { KalmanFilter() }
        check("complementary") { ComplementaryFilter() }
    }

    /// Readings of a level sensor at `yawRadians`, the field 20 uT north and 43 down, plus `disturbance`
    /// fixed to the sensor: what the filter would note, heading innovation against the true heading.
    static func noteLevel(
        _ sensorFixed: inout SensorFixedDisturbance, yawRadians: Double, turned: Double, disturbance: Vector3
    ) {
        let rotation = Quaternion(rollRadians: 0, pitchRadians: 0, yawRadians: yawRadians).rotationMatrix
        let earth = Vector3(0, 20, -43) + rotation * disturbance
        sensorFixed.noteTrusted(
            rotation: rotation, earthField: earth, headingInnovation: atan2(earth.x, earth.y), followedEastRow: .zero,
            radians: turned)
    }

    static let prior = 0.06, headingNoise = 0.017, fieldNoise = 0.04

    @Test("turning through all headings exposes it: what is left unseen falls from the prior to near 0")
    func turningExposes() {
        var sensorFixed = SensorFixedDisturbance()
        let east = Quaternion(rollRadians: 0, pitchRadians: 0, yawRadians: 0.3).rotationMatrix.row0
        for _ in 0..<100 { Self.noteLevel(&sensorFixed, yawRadians: 0.3, turned: 0, disturbance: .zero) }
        sensorFixed.refresh(
            priorSigmaRadians: Self.prior, headingNoiseRadians: Self.headingNoise, fieldNoiseRadians: Self.fieldNoise)
        let atRest = sensorFixed.unseenSigmaRadians(eastRow: east)!
        #expect(abs(atRest - Self.prior) < 1e-12, "at rest nothing is exposed: \(atRest)")
        for k in 0..<63 {
            Self.noteLevel(&sensorFixed, yawRadians: 0.3 + Double(k) * 0.1, turned: 0.1, disturbance: .zero)
        }
        sensorFixed.refresh(
            priorSigmaRadians: Self.prior, headingNoiseRadians: Self.headingNoise, fieldNoiseRadians: Self.fieldNoise)
        let turned = sensorFixed.unseenSigmaRadians(eastRow: east)!
        #expect(turned < 0.2 * Self.prior, "a full turn with a steady field exposes it: \(turned)")
        #expect(abs(sensorFixed.seenErrorRadians(eastRow: east)) < 0.002, "and shows no error")
    }

    @Test("a field that varies from place to place is not taken for a disturbance on the sensor")
    func inconsistentEvidenceIsBelievedLess() {
        // The same full turn, but every reading's field is off by up to 3 uT in a direction that has
        // nothing to do with the orientation (walking past steel): the fit says so, and keeps most of
        // what it does not know.
        var clean = SensorFixedDisturbance(), varying = SensorFixedDisturbance()
        var random = SeededGenerator(seed: 12345)
        func next() -> Double { random.nextUniform() * 2 - 1 }
        for k in 0..<63 {
            let yaw = Double(k) * 0.1
            Self.noteLevel(&clean, yawRadians: yaw, turned: 0.1, disturbance: .zero)
            let rotation = Quaternion(rollRadians: 0, pitchRadians: 0, yawRadians: yaw).rotationMatrix
            let earth = Vector3(0, 20, -43) + Vector3(next(), next(), next()) * 3
            varying.noteTrusted(
                rotation: rotation, earthField: earth, headingInnovation: atan2(earth.x, earth.y),
                followedEastRow: .zero, radians: 0.1)
        }
        clean.refresh(
            priorSigmaRadians: Self.prior, headingNoiseRadians: Self.headingNoise, fieldNoiseRadians: Self.fieldNoise)
        varying.refresh(
            priorSigmaRadians: Self.prior, headingNoiseRadians: Self.headingNoise, fieldNoiseRadians: Self.fieldNoise)
        let east = Vector3(1, 0, 0)
        #expect(clean.inconsistency == 1, "a steady field fits: \(clean.inconsistency)")
        #expect(varying.inconsistency > 3, "residuals well above the noise: \(varying.inconsistency)")
        #expect(
            varying.unseenSigmaRadians(eastRow: east)! > 2 * clean.unseenSigmaRadians(eastRow: east)!,
            "unseen \(varying.unseenSigmaRadians(eastRow: east)!) against \(clean.unseenSigmaRadians(eastRow: east)!)")
    }

    @Test("an arc shows the error heading innovations cannot: the field's strength moved as the sensor turned")
    func arcShowsTheHiddenPart() {
        // 1.2 uT along the sensor's x axis turns the heading by 3.4 degrees at yaw 0; over an arc of
        // +-55 degrees about yaw 0 the innovations show only how that varies, the field's north and up
        // components what it is.
        var sensorFixed = SensorFixedDisturbance()
        for k in -55...55 {
            Self.noteLevel(
                &sensorFixed, yawRadians: Double(k) * radiansPerDegree, turned: radiansPerDegree,
                disturbance: Vector3(1.2, 0, 0))
        }
        sensorFixed.refresh(
            priorSigmaRadians: Self.prior, headingNoiseRadians: Self.headingNoise, fieldNoiseRadians: Self.fieldNoise)
        let east = Quaternion(rollRadians: 0, pitchRadians: 0, yawRadians: 0).rotationMatrix.row0
        let truth = atan2(east.dot(Vector3(1.2, 0, 0)), 20.0)
        let seen = sensorFixed.seenErrorRadians(eastRow: east)
        let unseen = sensorFixed.unseenSigmaRadians(eastRow: east)!
        #expect(
            abs(seen - truth) < 0.2 * abs(truth), "seen \(seen * degreesPerRadian), truth \(truth * degreesPerRadian)")
        #expect(unseen < 0.5 * Self.prior, "unseen \(unseen * degreesPerRadian) deg")
    }

    @Test("a reading taken while turning fast is worth less: its timing error adds to the compass noise")
    func fastReadingsCountLess() {
        #expect(UnseenDisturbance.readingWorth(rateRadiansPerSecond: 0) == 1)
        let atOne = UnseenDisturbance.readingWorth(rateRadiansPerSecond: 1)
        let atThree = UnseenDisturbance.readingWorth(rateRadiansPerSecond: 3)
        #expect(abs(atOne - 0.5) < 0.01, "at 1 rad/s: \(atOne)")
        #expect(abs(atThree - 0.1) < 0.01, "at 3 rad/s: \(atThree)")
        // A slow full turn whose readings fit, then the same turn fast with the field off by up to 3 uT
        // (lag and tilt errors of fast motion): weighted by their worth, the fast readings spoil the fit
        // less than counted by angle alone.
        func turns(fastReadingWorth worth: Double) -> SensorFixedDisturbance {
            var sensorFixed = SensorFixedDisturbance()
            var random = SeededGenerator(seed: 777)
            func next() -> Double { random.nextUniform() * 2 - 1 }
            for k in 0..<63 {
                Self.noteLevel(&sensorFixed, yawRadians: Double(k) * 0.1, turned: 0.1, disturbance: .zero)
            }
            for k in 0..<63 {
                let rotation = Quaternion(rollRadians: 0, pitchRadians: 0, yawRadians: Double(k) * 0.1).rotationMatrix
                let earth = Vector3(0, 20, -43) + Vector3(next(), next(), next()) * 3
                sensorFixed.noteTrusted(
                    rotation: rotation, earthField: earth, headingInnovation: atan2(earth.x, earth.y),
                    followedEastRow: .zero, radians: 0.1 * worth)
            }
            sensorFixed.refresh(
                priorSigmaRadians: Self.prior, headingNoiseRadians: Self.headingNoise,
                fieldNoiseRadians: Self.fieldNoise)
            return sensorFixed
        }
        let byAngle = turns(fastReadingWorth: 1), byWorth = turns(fastReadingWorth: atThree)
        let east = Vector3(1, 0, 0)
        #expect(byWorth.inconsistency < byAngle.inconsistency, "\(byWorth.inconsistency) \(byAngle.inconsistency)")
        #expect(
            byWorth.unseenSigmaRadians(eastRow: east)! < byAngle.unseenSigmaRadians(eastRow: east)!,
            "unseen \(byWorth.unseenSigmaRadians(eastRow: east)!) against \(byAngle.unseenSigmaRadians(eastRow: east)!)"
        )
    }
}
