import Foundation
import CompassCore
import WireFormat
import MessageBus

/// The end of the run: the smoother's outputs, the closing status and the summary notes.
extension FusionStage {
    /// The parts of a bound in one line: "+-7.4 (95 %): filter 1.0, disturbance seen 0.4, unknown 3.5 of
    /// 3.6 (1-sigma degrees; 47.5 rad turned, fit 5.2 x its noise)".
    static func describe(_ p: HeadingAccuracyParts) -> String {
        "+-\(format(p.boundDegrees, 1)) (95 %): filter \(format(p.filterSigmaDegrees, 1)), disturbance seen "
            + "\(format(p.disturbanceSeenDegrees, 1)), unknown \(format(p.disturbanceUnknownSigmaDegrees, 1)) of "
            + "\(format(p.disturbancePriorSigmaDegrees, 1)) (1-sigma degrees; \(format(p.turnedRadians, 1)) rad "
            + "turned, fit \(format(p.fitInconsistency, 1)) x its noise)"
    }

    func finish(emit: ([WireFrame]) throws -> Void) throws {
        var out: [WireFrame] = []
        try fuse(aligner.finish(), into: &out)
        if var smoother = filter as? KalmanSmoother {
            // The backward pass, then every sample's outputs in order, a batch at a time. The stage lets
            // go of its copy first, so that the recording is not copied when the smoother empties it.
            filter = KalmanFilter(settings: settings.kalman)
            defer { filter = smoother }
            let samples = held
            held = []
            finalGate = smoother.filter.magneticGate
            try smoother.finish { i, o, imu, magnetometer in
                let h = samples[i]
                let header = RosHeader(stamp: h.stamp, frameId: frameIds[Int(h.frameIndex)])
                publish(
                    o, header: header, imu: imu, field: magnetometer?.fieldMicrotesla,
                    north: (h.declination, h.northFlags), &out)
                if out.count >= Publisher.maximumBatchFrames {
                    try emit(out)
                    out.removeAll(keepingCapacity: true)
                }
            }
        }
        // The closing status, when there was a reading to judge (an IMU-only stream has none).
        if tally.assessed > 0, let status = tally.status(lastHeader, gate: gate, force: true) {
            out.append(cdrFrame(status, topic: PipelineTopics.interferenceStatus))
        }
        let summary = summaryNotes()
        notes += summary.lines
        losses += summary.lost
        try emit(out)
    }

    /// What the summary says about the run so far, and how many inputs it could not use (for the exit
    /// code). Reads the state only: `FusionEngine.summary` asks at any time.
    func summaryNotes() -> (lines: [String], lost: Int) {
        var lines: [String] = []
        var lost = 0
        lines.append(tally.summary)
        if implausibleFixes > 0 {
            lines.append(
                "\(implausibleFixes) fix(es) with a position off the earth passed over (no declination from them)")
        }
        if let f = calibrationFinding {
            lines.append(
                "uncalibrated readings: from \(format(f.time, 2)) s the readings, which nothing calibrates, showed "
                    + "\(Self.describe(f)), turning their heading by \(format(f.headingShiftDegrees, 0)) degrees: "
                    + (headingDeclaredUnusable
                        ? "the heading followed them and is reported unusable from then on; calibrate the magnetometer"
                        : "the gate kept them out (the heading agreed with the corrected readings); calibrate the "
                            + "magnetometer all the same"))
        }
        let health = multiMagnetometerFilter?.magnetometerHealth ?? []
        if !health.isEmpty { lines.append("magnetometers: " + health.map(Self.describe).joined(separator: "; ")) }
        for name in otherNames {
            let o = others[name]!
            if o.passedOver > 0 {
                lines.append(
                    "\(o.passedOver) reading(s) of magnetometer \(name) not used: "
                        + (settings.smooth
                            ? "the smoother fuses one magnetometer" : "only the kalman filter fuses several"))
                lost += o.passedOver
            }
        }
        if let counts = (filter as? any GnssAidedFilter)?.gnssCounts,
            counts.velocities + counts.coursesUsed + counts.headingsUsed + counts.unusable > 0
        {
            lines.append("gnss: " + counts.summary)
            lost += counts.unusable
        }
        if gnssPassedOver > 0 {
            lines.append(
                "\(gnssPassedOver) GNSS message(s) not used: "
                    + (settings.smooth ? "the smoother does not take GNSS" : "only the kalman filter takes GNSS"))
            lost += gnssPassedOver
        }
        lines.append(
            "heading accuracy at the end "
                + Self.describe(filter.headingAccuracyParts))
        let k = filter.skipped
        if k.total > 0 || k.stateResets > 0 || k.timelineRestarts > 0 {
            lines.append("filter skipped \(k.total) sample(s): \(k.reasons)")
        }
        if !k.holes.isEmpty {
            lines.append("holes of more than \(format(SampleValidator.holeSeconds, 0)) s in the streams: \(k.holes)")
        }
        // Samples the filter could not use (time not increasing, beyond what a sensor reports,
        // non-finite) change the output: the run says so in its exit code, not only in this note.
        lost += k.total
        return (lines, lost)
    }
}
