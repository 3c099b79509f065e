import Foundation
import CompassCore

/// The estimate against a reference orientation, as the BROAD scorer defines it (Laidig et al. 2021):
/// the estimate is slerp-interpolated onto the reference times (gaps over 0.1 s and times outside the
/// estimate count as missing), the error e = q_est * conj(q_ref) in the earth frame gives total
/// 2 acos|e_w|, heading 2 atan(|e_z| / |e_w|) and inclination 2 acos sqrt(e_w^2 + e_z^2), and the RMSE in
/// degrees is taken over the samples with movement, missing ones skipped.
struct TruthComparison {
    /// Reference rows: seconds from 1700000000 (as BROAD's files), orientation, movement.
    var t: [Double] = [], q: [Quaternion] = [], movement: [Bool] = []

    struct ReadError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    /// A BROAD-style truth file: t,qw,qx,qy,qz[,movement] (header line first), plain or gzip; `what` names
    /// it in errors (a truth, or a run to compare with, which has the same columns).
    init(path: String, what: String = "the truth file") throws {
        let text: String
        if path.hasSuffix(".gz") {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/gzip")
            p.arguments = ["-dc", path]
            let pipe = Pipe()
            p.standardOutput = pipe
            try p.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            guard p.terminationStatus == 0 else { throw ReadError(message: "\(path): gzip cannot read it") }
            text = String(decoding: data, as: UTF8.self)
        } else {
            guard let s = FileManager.default.contents(atPath: path) else {
                throw ReadError(message: "cannot read \(what) \(path)")
            }
            text = String(decoding: s, as: UTF8.self)
        }
        for (n, line) in text.split(separator: "\n").enumerated() where n > 0 {
            let v = line.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) ?? .nan }
            guard v.count >= 5 else {
                throw ReadError(message: "\(path) line \(n + 1): expected t,qw,qx,qy,qz[,movement]")
            }
            t.append(v[0] > 1e9 ? v[0] - 1_700_000_000 : v[0])
            q.append(Quaternion(w: v[1], x: v[2], y: v[3], z: v[4]))
            movement.append(v.count < 6 || v[5] != 0)
        }
    }

    /// RMSE (degrees) of total, heading and inclination; the share of evaluated samples covered; and
    /// how often the reported heading bound covered the heading error (NaN bound = not covered).
    func errors(estimateTimes et: [Double], estimates eq: [Quaternion], boundTimes bt: [Double], bounds: [Double])
        -> (
            total: Double, heading: Double, inclination: Double, coverage: Double, boundCoverage: Double,
            errorTimes: [Double], headingErrors: [Double], signedHeadingErrors: [Double], inclinationErrors: [Double]
        )
    {
        var errorTimes: [Double] = [], headingErrors: [Double] = []
        var signedHeadingErrors: [Double] = [], inclinationErrors: [Double] = []
        var sums = (0.0, 0.0, 0.0), n = 0, evaluated = 0, covered = 0, inside = 0
        var j = 0, b = 0
        for i in t.indices where movement[i] && q[i].isFinite {
            evaluated += 1
            let target = t[i]
            while j + 1 < et.count && et[j + 1] <= target { j += 1 }
            guard let first = et.first, target >= first - 1e-6, target <= et.last! + 1e-6 else { continue }
            let j1 = min(j + 1, et.count - 1)
            let dt = et[j1] - et[j]
            guard dt <= 0.1 else { continue }
            let s = dt > 0 ? min(1, max(0, (target - et[j]) / dt)) : 0
            let estimate = Self.slerp(eq[j], eq[j1], s)
            let e = (estimate.normalized * q[i].normalized.conjugate).normalized
            let w = abs(e.w), z = abs(e.z)
            let total = 2 * acos(min(1, w)), heading = 2 * atan2(z, w),
                incl = 2 * acos(min(1, (w * w + z * z).squareRoot()))
            sums.0 += total * total
            sums.1 += heading * heading
            sums.2 += incl * incl
            n += 1
            covered += 1
            errorTimes.append(target)
            headingErrors.append(heading * degreesPerRadian)
            // estimate * truth^-1 turns the truth into the estimate about earth axes: positive z is
            // counter-clockwise about up, so the clockwise heading of the estimate is smaller.
            let sign: Double = (e.w < 0) == (e.z < 0) ? -1 : 1
            signedHeadingErrors.append(e.z == 0 ? 0 : sign * heading * degreesPerRadian)
            inclinationErrors.append(incl * degreesPerRadian)
            // The bound in force at this time (the latest one at or before it).
            while b + 1 < bt.count && bt[b + 1] <= target + 1e-6 { b += 1 }
            if b < bounds.count, bounds[b].isFinite, heading * degreesPerRadian <= bounds[b] { inside += 1 }
        }
        func rmse(_ s: Double) -> Double { n > 0 ? (s / Double(n)).squareRoot() * degreesPerRadian : .nan }
        return (
            rmse(sums.0), rmse(sums.1), rmse(sums.2), Double(covered) / Double(max(1, evaluated)),
            Double(inside) / Double(max(1, n)), errorTimes, headingErrors, signedHeadingErrors, inclinationErrors
        )
    }

    static func slerp(_ a: Quaternion, _ b0: Quaternion, _ s: Double) -> Quaternion {
        var b = b0
        var dot = a.w * b.w + a.x * b.x + a.y * b.y + a.z * b.z
        if dot < 0 {
            b = Quaternion(w: -b.w, x: -b.x, y: -b.y, z: -b.z)
            dot = -dot
        }
        let theta = acos(min(1, dot)), sine = sin(theta)
        let (w0, w1) = sine < 1e-9 ? (1 - s, s) : (sin((1 - s) * theta) / sine, sin(s * theta) / sine)
        return Quaternion(
            w: w0 * a.w + w1 * b.w, x: w0 * a.x + w1 * b.x, y: w0 * a.y + w1 * b.y, z: w0 * a.z + w1 * b.z
        )
        .normalized
    }
}
