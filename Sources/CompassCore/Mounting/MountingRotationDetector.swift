#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Parameters of `MountingRotationDetector`.
public struct MountingDetectionSettings: Sendable, Equatable {
    /// Span of one window, seconds. Within it the gyro carries the orientation; its bias b turns the
    /// frame by b x this (0.005 rad/s over 4 s is 1.1 degrees), well below the 7 degrees that separate
    /// the two closest named rotations (`none` and `pitch_7`). Default 4.
    public var windowSeconds = 4.0
    /// A window counts only when the body turned at least this far from the window's first
    /// orientation, degrees: a still sensor fits every rotation equally. Default 30.
    public var minimumTurnDegrees = 30.0
    /// A window counts only when the best rotation leaves an RMS residual per axis of at most this
    /// fraction of the fitted field: a window that no rotation explains is a disturbance (a magnet, a
    /// hard iron changing) and would only blur the comparison. Default 0.1 (5 uT of a 50 uT field;
    /// an uncalibrated soft iron of a few percent stays inside it).
    public var maximumResidualFraction = 0.1
    /// A rotation is named only when the second best leaves at least this many times its (relative)
    /// squared residuals. Default 3 (rotations that cannot be told apart from the motion seen give
    /// ratios near 1; on the BROAD recordings no window set gave a wrong rotation even at 1.5).
    public var margin = 3.0
    /// ... and only after this many windows counted. Default 3.
    public var minimumWindows = 3
    public init() {}
}

/// Finds how a magnetometer is mounted against the IMU from normal motion, among ArduPilot's named
/// rotations (as its `COMPASS_AUTO_ROT` and PX4's `SENS_MAG_AUTOROT` do).
///
/// Within a window of a few seconds the gyro gives the body's rotation R_i from reading i to the
/// window's first orientation. The earth's field is constant, so with the mounting M (magnetometer
/// axes to body axes) every raw reading is u_i = c + M^T R_i^T b: c the hard iron (magnetometer
/// axes), b the field in the window's first body frame. Linear in (c, b) for each candidate M; the
/// candidate whose fit leaves the least residual, relative to each window's best and summed over the
/// windows that turned enough, wins.
/// No calibration, heading or field model is needed. Rotations about one axis only cannot tell
/// mountings that differ by a turn about that axis apart (a yaw offset on a vehicle that only yaws
/// is a heading offset): their residuals stay equal and the answer stays undetermined.
///
/// The sums a window keeps do not depend on M (`Window`), so each reading costs the same whatever
/// the number of candidates; the candidates are compared once per window.
public struct MountingRotationDetector: Sendable {
    public var settings: MountingDetectionSettings
    /// The candidates: every named rotation once (ArduPilot lists some rotations twice under two names,
    /// such as `roll_180_yaw_270` and `pitch_180_yaw_90`; the first name is kept, the others are aliases).
    public let candidates: [MountingRotation]
    /// Per candidate, the other names of the same rotation.
    public let aliases: [[String]]
    /// Per candidate, the sum over the windows counted of its squared residuals divided by the window's
    /// best (so the winner of every window has one per window).
    public private(set) var residualSums: [Double]
    /// Windows counted, and windows passed over because the body hardly turned, or no rotation explained
    /// them (a disturbance).
    public private(set) var windowsCounted = 0, windowsStill = 0, windowsDisturbed = 0
    /// The rotation once it is clear; it never changes afterwards.
    public private(set) var detected: Detection?
    var window = Window()

    /// A named rotation, and how clearly it won.
    public struct Detection: Sendable, Equatable, CustomStringConvertible {
        public let rotation: MountingRotation
        /// Other names of the same rotation.
        public let aliases: [String]
        /// The runner-up, and how many times more residual it left.
        public let runnerUp: String
        public let ratio: Double
        public let windows: Int
        public var description: String {
            let also = aliases.isEmpty ? "" : " (also called \(aliases.joined(separator: ", ")))"
            return "\(rotation.description)\(also), \(format1(ratio)) x better than \(runnerUp) "
                + "over \(windows) window(s)"
        }
    }

    public init(settings: MountingDetectionSettings = .init()) {
        self.settings = settings
        var unique: [MountingRotation] = [], others: [[String]] = []
        for name in MountingRotation.names {
            guard let r = MountingRotation.named(name) else { continue }
            if let i = unique.firstIndex(where: { Self.same($0.matrix, r.matrix) }) {
                others[i].append(name)
            } else {
                unique.append(r)
                others.append([])
            }
        }
        candidates = unique
        aliases = others
        residualSums = Array(repeating: 0, count: unique.count)
    }

    static func same(_ a: Matrix3, _ b: Matrix3) -> Bool {
        let d = a - b
        return max(
            abs(d.m00), abs(d.m01), abs(d.m02), abs(d.m10), abs(d.m11), abs(d.m12), abs(d.m20), abs(d.m21),
            abs(d.m22)) < 1e-9
    }

    /// The best candidate so far, the runner-up and the ratio of their residual sums (nil before a
    /// window counted).
    public var standing: (best: Int, runnerUp: Int, ratio: Double)? {
        guard windowsCounted > 0 else { return nil }
        var order = Array(residualSums.indices)
        order.sort { residualSums[$0] < residualSums[$1] }
        let (best, second) = (order[0], order[1])
        let ratio = residualSums[best] > 0 ? residualSums[second] / residualSums[best] : .infinity
        return (best, second, ratio)
    }

    /// Turns the window's frame by the gyro's reading (rad/s, body axes) over `dt` seconds. A gap of
    /// more than 0.1 s loses the orientation: the window is dropped.
    public mutating func addMotion(rate: Vector3, dt: Double) {
        guard window.count > 0 else { return }
        guard rate.isFinite, dt >= 0, dt <= 0.1 else {
            window = Window()
            return
        }
        window.rotation = window.rotation * Quaternion(rotationVector: rate * dt).rotationMatrix
    }

    /// One raw magnetometer reading, microtesla, magnetometer axes, at `time` seconds.
    public mutating func addReading(_ u: Vector3, time: Double) {
        guard u.isFinite, time.isFinite else { return }
        if window.count == 0 { window.start = time }
        window.add(u)
        guard time - window.start >= settings.windowSeconds else { return }
        let finished = window
        window = Window()
        judge(finished)
    }

    mutating func judge(_ w: Window) {
        let n = Double(w.count)
        guard w.count >= 10, w.largestTurnDegrees >= settings.minimumTurnDegrees,
            let kInverse = w.systemMatrix.inverse
        else {
            windowsStill += 1
            return
        }
        var sums = [Double](repeating: 0, count: candidates.count)
        var best = 0
        var bestField = 0.0
        for (i, candidate) in candidates.enumerated() {
            let m = candidate.matrix
            // V = sum R_i M u_i, from the window's sums T[a][b][c] = sum R_i[a][b] u_i[c].
            var row = [0.0, 0, 0]
            for a in 0..<3 {
                for b in 0..<3 { for c in 0..<3 { row[a] += m[b, c] * w.t[(a * 3 + b) * 3 + c] } }
            }
            let v = Vector3(row[0], row[1], row[2])
            // (n I - Q^T Q / n) b = V - Q^T M U / n with Q = sum R_i^T; then c = (U - M^T Q b) / n.
            let q = w.rotationSum
            let field = kInverse * (v - q.transposed * (m * w.readingSum) * (1 / n))
            let offset = (w.readingSum - m.transposed * (q * field)) * (1 / n)
            sums[i] = max(0, w.squaredSum - offset.dot(w.readingSum) - field.dot(v))
            if sums[i] < sums[best] || i == 0 {
                best = i
                bestField = field.norm
            }
        }
        let rms = (sums[best] / (3 * n)).squareRoot()
        guard rms <= settings.maximumResidualFraction * bestField else {
            windowsDisturbed += 1
            return
        }
        windowsCounted += 1
        // Each window in units of its own best residual: a window every candidate fits badly adds about
        // one to each, so it dilutes the comparison instead of deciding it.
        let unit = max(sums[best], 1e-12)
        for i in sums.indices { residualSums[i] += sums[i] / unit }
        guard detected == nil, windowsCounted >= settings.minimumWindows, let s = standing,
            s.ratio >= settings.margin
        else { return }
        detected = Detection(
            rotation: candidates[s.best], aliases: aliases[s.best], runnerUp: candidates[s.runnerUp].description,
            ratio: s.ratio, windows: windowsCounted)
    }

    /// The running sums of one window. None depends on the candidate mounting.
    struct Window: Sendable {
        var start = 0.0
        var count = 0
        /// The body's rotation from the current reading to the window's first, R_i.
        var rotation = Matrix3.identity
        /// Sum of R_i^T (Q).
        var rotationSum = Matrix3(0, 0, 0, 0, 0, 0, 0, 0, 0)
        /// Sum of R_i[a][b] u_i[c], index (a * 3 + b) * 3 + c.
        var t = [Double](repeating: 0, count: 27)
        var readingSum = Vector3.zero
        var squaredSum = 0.0
        /// The smallest trace of R_i: the largest turn from the first orientation (angle = acos((tr - 1) / 2)),
        /// kept as the trace so a reading costs no arc cosine.
        var smallestTrace = 3.0
        var largestTurnDegrees: Double { acos(min(1, max(-1, (smallestTrace - 1) / 2))) / radiansPerDegree }

        mutating func add(_ u: Vector3) {
            count += 1
            let r = rotation
            rotationSum = rotationSum + r.transposed
            for a in 0..<3 {
                for b in 0..<3 {
                    let rab = r[a, b]
                    let base = (a * 3 + b) * 3
                    t[base] += rab * u.x
                    t[base + 1] += rab * u.y
                    t[base + 2] += rab * u.z
                }
            }
            readingSum = readingSum + u
            squaredSum += u.dot(u)
            smallestTrace = min(smallestTrace, r.m00 + r.m11 + r.m22)
        }

        /// n I - Q^T Q / n: singular when the body did not turn.
        var systemMatrix: Matrix3 {
            let n = Double(count)
            return Matrix3.identity * n - rotationSum.transposed * rotationSum * (1 / n)
        }
    }
}

private func format1(_ x: Double) -> String {
    guard x.isFinite else { return "infinitely" }
    let tenths = (x * 10).rounded()
    return "\(Int(tenths) / 10).\(abs(Int(tenths)) % 10)"
}
