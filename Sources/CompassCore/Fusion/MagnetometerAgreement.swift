#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Parameters of `MagnetometerAgreement`.
public struct MagnetometerAgreementSettings: Sendable, Equatable {
    /// Time constant of each magnetometer's averaged heading innovation, seconds. Reading noise (about
    /// 1 degree per reading at 100 Hz) averages to a tenth of that within it, while a magnet brought
    /// near one sensor over a second or more still shows. Default 1.
    public var averagingSeconds = 1.0
    /// A magnetometer whose averaged heading differs from the others' by more than this is left out,
    /// degrees. Two calibrated magnetometers on one vehicle see the same earth field: their headings
    /// differ by their calibration residuals (a fit is accepted with a residual of a few percent of
    /// the field, about 2 degrees on the worst axis, less on the heading) plus the averaged noise; and
    /// while a magnet arrives, one still within the limit pulls the heading by its share of it. Default 3.
    public var limitDegrees = 3.0
    /// A left-out magnetometer is taken back once within this share of `limitDegrees`, so one near the
    /// limit does not flicker in and out. Default 0.5.
    public var rejoinFraction = 0.5
    /// A magnetometer whose last reading is older than this has no say, seconds. Default 0.5.
    public var staleSeconds = 0.5

    public init() {}
}

/// Several magnetometers judged against each other, in the earth frame: each one's heading
/// innovation (the horizontal direction of its calibrated field, turned to the earth frame with the
/// filter's attitude, against the filter's heading) is averaged over `averagingSeconds`, and one whose
/// average is more than `limitDegrees` from the others' is outvoted. The others' view is the median of
/// three or more; of two, the one not outvoted already, else the one that has had a vote longer, else
/// the one that turned less against the gyro lately (its gate's `gyroDeviation`): a magnet
/// approaching one of them turns that one's compass while the vehicle's gyro says nothing turned, and
/// the filter's heading, which both pull, cannot tell them apart. The suspect stays suspect until it
/// agrees again: its gate may by then have taken the disturbed field as its new normal, and its
/// deviation says nothing more.
/// A magnetometer whose own gate rejects it, or that is not calibrated, has no vote.
public struct MagnetometerAgreement: Sendable {
    public var settings: MagnetometerAgreementSettings

    /// What each magnetometer did so far; index 0 is the primary.
    public internal(set) var health: [MagnetometerHealth]
    var averaged: [Double]
    var lastTime: [Double]
    var voting: [Bool]
    var deviation: [Double]
    /// When each magnetometer's current stretch of voting began (nil while it has no vote).
    var votingSince: [Double?]

    public init(names: [String], settings: MagnetometerAgreementSettings = .init()) {
        self.settings = settings
        health = names.map { MagnetometerHealth(name: $0) }
        averaged = Array(repeating: 0, count: names.count)
        lastTime = Array(repeating: -.infinity, count: names.count)
        voting = Array(repeating: false, count: names.count)
        deviation = Array(repeating: 0, count: names.count)
        votingSince = Array(repeating: nil, count: names.count)
    }

    public var count: Int { health.count }

    /// One reading of magnetometer `index`: `innovation` its heading against the filter's, radians;
    /// `gateAccepts` its own gate's verdict; `dt` seconds since its previous reading. Returns whether
    /// the reading may correct the heading. `gyroDeviation`: its gate's, radians.
    public mutating func assess(
        _ index: Int, innovation: Double, gyroDeviation: Double, gateAccepts: Bool, calibrated: Bool, dt: Double,
        at time: Double
    ) -> Bool {
        deviation[index] = gyroDeviation
        let w = 1 - exp(-max(dt, 0) / settings.averagingSeconds)
        averaged[index] += wrappedRadians(innovation - averaged[index]) * (lastTime[index].isFinite ? w : 1)
        lastTime[index] = time
        voting[index] = gateAccepts && calibrated
        if !voting[index] {
            votingSince[index] = nil
        } else if votingSince[index] == nil {
            votingSince[index] = time
        }
        health[index].readings += 1
        health[index].averagedInnovationDegrees = averaged[index] * degreesPerRadian
        guard calibrated else {
            health[index].uncalibrated += 1
            return false
        }
        guard gateAccepts else {
            health[index].rejectedByGate += 1
            return false
        }
        if let consensus = consensus(at: time) {
            let off = abs(wrappedRadians(averaged[index] - consensus)) * degreesPerRadian
            let limit =
                health[index].isOutvoted ? settings.limitDegrees * settings.rejoinFraction : settings.limitDegrees
            if health[index].isOutvoted != (off > limit) {
                health[index].isOutvoted = off > limit
                health[index].changes += 1
            }
        } else {
            health[index].isOutvoted = false
        }
        if health[index].isOutvoted {
            health[index].outvoted += 1
            return false
        }
        health[index].used += 1
        return true
    }

    /// The others' averaged innovation: nil while fewer than two magnetometers vote.
    func consensus(at time: Double) -> Double? {
        var values: [Double] = []
        var voters: [Int] = []
        values.reserveCapacity(count)
        for i in 0..<count where voting[i] && time - lastTime[i] <= settings.staleSeconds {
            values.append(averaged[i])
            voters.append(i)
        }
        guard values.count >= 2 else { return nil }
        if values.count == 2 {
            // One already outvoted stays the suspect until it agrees again. A fresh disagreement goes
            // against the one whose gate let it back in last (a recovered gate starts its gyro check
            // afresh, so its deviation says nothing yet), else the one that turned more against the gyro.
            let (a, b) = (voters[0], voters[1])
            if health[a].isOutvoted != health[b].isOutvoted { return health[a].isOutvoted ? values[1] : values[0] }
            if let sa = votingSince[a], let sb = votingSince[b], abs(sa - sb) > settings.averagingSeconds {
                return sa < sb ? values[0] : values[1]
            }
            return deviation[a] <= deviation[b] ? values[0] : values[1]
        }
        values.sort()
        let mid = values.count / 2
        return values.count % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2
    }
}

/// What one of several magnetometers did in a run, for the summary and the status.
public struct MagnetometerHealth: Sendable, Equatable {
    public var name: String
    /// Readings seen, and how each ended: corrected the heading, rejected by the magnetometer's own
    /// gate (strength, dip or gyro consistency), outvoted by the others, or not calibrated.
    public var readings = 0, used = 0, rejectedByGate = 0, outvoted = 0, uncalibrated = 0
    /// The averaged heading innovation, degrees: how far this magnetometer's heading is from the filter's.
    public var averagedInnovationDegrees = 0.0
    /// True while the others outvote it.
    public var isOutvoted = false
    /// How often it was outvoted or taken back.
    public var changes = 0

    public init(name: String) { self.name = name }

    /// Share of the readings that corrected the heading, 0...1.
    public var usedShare: Double { readings > 0 ? Double(used) / Double(readings) : 0 }
}
