#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
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
    /// A magnetometer whose averaged dip differs from the others' by more than this is left out,
    /// degrees. The magnetometers share the filter's attitude, so its tilt error cancels between them;
    /// what is left is their calibration residuals (a degree or two) and a field that is not the
    /// earth's at one of them. As the gate's own dip tolerance. Default 5.
    public var dipLimitDegrees = 5.0
    /// A magnetometer whose averaged strength, as a share of its calibrated radius, differs from the
    /// others' by more than this fraction is left out. Each fit scales its field by its own radius
    /// (sensors differ in gain), so shares compare where microtesla would not; a magnet or steel near
    /// one sensor changes its share. As the gate's own strength tolerance. Default 0.1.
    public var strengthLimitFraction = 0.1
    /// A left-out magnetometer is taken back once within this share of each limit, so one near the
    /// limit does not flicker in and out. Default 0.5.
    public var rejoinFraction = 0.5
    /// A magnetometer whose last reading is older than this has no say, seconds. Default 0.5.
    public var staleSeconds = 0.5

    public init() {}
}

/// Several magnetometers judged against each other, in the earth frame: each one's heading
/// innovation (the horizontal direction of its calibrated field, turned to the earth frame with the
/// filter's attitude, against the filter's heading), its dip and its strength (as a share of its
/// calibrated radius) are averaged over `averagingSeconds`, and one whose heading is more than
/// `limitDegrees`, whose dip is more than `dipLimitDegrees`, or whose strength share is more than
/// `strengthLimitFraction` from the others' is outvoted. The others' view is the median of
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
    /// Averaged dip (degrees) and strength share of each magnetometer; NaN until its first reading.
    var averagedDip: [Double]
    var averagedShare: [Double]
    /// The strength each magnetometer's share is taken of, microtesla: its calibration's radius, else
    /// the first reference strength its gate had (before any new field was adopted); nil until known.
    var strengthScale: [Double?]
    /// The first reference dip each magnetometer's gate had since its calibration, degrees (as the
    /// strength scale: not a field adopted later).
    var dipReference: [Double?]

    public init(names: [String], settings: MagnetometerAgreementSettings = .init()) {
        self.settings = settings
        health = names.map { MagnetometerHealth(name: $0) }
        averaged = Array(repeating: 0, count: names.count)
        lastTime = Array(repeating: -.infinity, count: names.count)
        voting = Array(repeating: false, count: names.count)
        deviation = Array(repeating: 0, count: names.count)
        votingSince = Array(repeating: nil, count: names.count)
        averagedDip = Array(repeating: .nan, count: names.count)
        averagedShare = Array(repeating: .nan, count: names.count)
        strengthScale = Array(repeating: nil, count: names.count)
        dipReference = Array(repeating: nil, count: names.count)
    }

    /// Magnetometer `index` now comes through a calibration whose field has radius `microtesla` (nil:
    /// not known; its gate's next reference is taken). Its strength share and dip reference start afresh.
    public mutating func noteCalibration(_ index: Int, radiusMicrotesla microtesla: Double?) {
        let known = microtesla.map { $0.isFinite && $0 > 0 } ?? false
        strengthScale[index] = known ? microtesla : nil
        averagedShare[index] = .nan
        dipReference[index] = nil
    }

    public var count: Int { health.count }

    /// One reading of magnetometer `index`: `innovation` its heading against the filter's, radians;
    /// `gateAccepts` its own gate's verdict; `dt` seconds since its previous reading. Returns whether
    /// the reading may correct the heading. `gyroDeviation`: its gate's, radians. `strengthMicrotesla`
    /// and `dipDegrees` (earth frame) of its calibrated field, NaN when not known; `referenceStrength`
    /// its gate's expected strength, microtesla (the share's scale until a calibration gives one), and
    /// `referenceDipDegrees` its expected dip.
    public mutating func assess(
        _ index: Int, innovation: Double, gyroDeviation: Double, gateAccepts: Bool, calibrated: Bool, dt: Double,
        at time: Double, strengthMicrotesla: Double = .nan, dipDegrees: Double = .nan,
        referenceStrengthMicrotesla: Double? = nil, referenceDipDegrees: Double? = nil
    ) -> Bool {
        if dipReference[index] == nil { dipReference[index] = referenceDipDegrees }
        deviation[index] = gyroDeviation
        let w = 1 - exp(-max(dt, 0) / settings.averagingSeconds)
        averaged[index] += wrappedRadians(innovation - averaged[index]) * (lastTime[index].isFinite ? w : 1)
        lastTime[index] = time
        if strengthScale[index] == nil, let r = referenceStrengthMicrotesla, r.isFinite, r > 0 {
            strengthScale[index] = r
        }
        Self.follow(&averagedDip[index], dipDegrees, weight: w)
        Self.follow(&averagedShare[index], strengthScale[index].map { strengthMicrotesla / $0 } ?? .nan, weight: w)
        voting[index] = gateAccepts && calibrated
        if !voting[index] {
            votingSince[index] = nil
        } else if votingSince[index] == nil {
            votingSince[index] = time
        }
        health[index].readings += 1
        health[index].averagedInnovationDegrees = averaged[index] * degreesPerRadian
        health[index].averagedDipDegrees = averagedDip[index]
        health[index].averagedStrengthShare = averagedShare[index]
        guard calibrated else {
            health[index].uncalibrated += 1
            return false
        }
        guard gateAccepts else {
            health[index].rejectedByGate += 1
            return false
        }
        if let consensus = consensus(at: time) {
            let scale = health[index].isOutvoted ? settings.rejoinFraction : 1
            let disagreement = disagreement(of: index, with: consensus, limitScale: scale)
            if health[index].isOutvoted != (disagreement != nil) {
                health[index].isOutvoted = disagreement != nil
                health[index].changes += 1
            }
            if let disagreement { health[index].disagreement = disagreement }
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

    /// A low-pass that starts at its first finite value; a NaN value leaves it as it is.
    static func follow(_ average: inout Double, _ value: Double, weight: Double) {
        guard value.isFinite else { return }
        average = average.isFinite ? average + (value - average) * weight : value
    }

    /// What the voters agree on: heading innovation (rad), dip (degrees) and strength share; the last
    /// two NaN where no voter knows them.
    struct Consensus {
        var heading: Double
        var dip = Double.nan
        var share = Double.nan
    }

    /// Which of the three `index` is too far from the consensus on (its limits times `limitScale`), in
    /// the order heading, dip, strength; nil when it agrees.
    func disagreement(of index: Int, with c: Consensus, limitScale: Double) -> MagnetometerDisagreement? {
        if abs(wrappedRadians(averaged[index] - c.heading)) * degreesPerRadian > settings.limitDegrees * limitScale {
            return .heading
        }
        if abs(averagedDip[index] - c.dip) > settings.dipLimitDegrees * limitScale { return .dip }
        if abs(averagedShare[index] - c.share) > settings.strengthLimitFraction * limitScale { return .strength }
        return nil
    }

    /// The others' averages: nil while fewer than two magnetometers vote. Of two, both quantities
    /// come from the one trusted; of more, each is the median of those that know it.
    func consensus(at time: Double) -> Consensus? {
        var voters: [Int] = []
        voters.reserveCapacity(count)
        for i in 0..<count where voting[i] && time - lastTime[i] <= settings.staleSeconds { voters.append(i) }
        guard voters.count >= 2 else { return nil }
        if voters.count == 2 {
            let trusted = trustedOfTwo(voters[0], voters[1])
            return Consensus(heading: averaged[trusted], dip: averagedDip[trusted], share: averagedShare[trusted])
        }
        return Consensus(
            heading: finiteMedian(voters.map { averaged[$0] }), dip: finiteMedian(voters.map { averagedDip[$0] }),
            share: finiteMedian(voters.map { averagedShare[$0] }))
    }

    /// Of two voters that disagree, the one whose view stands.
    func trustedOfTwo(_ a: Int, _ b: Int) -> Int {
        // One already outvoted stays the suspect until it agrees again. A fresh disagreement goes
        // against the one whose strength or dip is clearly off, else the one whose gate let it back in
        // last (a recovered gate starts its gyro check afresh, so its deviation says nothing yet), else
        // the one that turned more against the gyro.
        if health[a].isOutvoted != health[b].isOutvoted { return health[a].isOutvoted ? b : a }
        // Strength and dip have the values a clean field gives (a share of 1, the gate's reference dip):
        // one clearly further from them than the other is the one a magnet or steel is near.
        let shareOff = (abs(averagedShare[a] - 1), abs(averagedShare[b] - 1))
        if abs(shareOff.0 - shareOff.1) > settings.strengthLimitFraction * settings.rejoinFraction {
            return shareOff.0 < shareOff.1 ? a : b
        }
        if let ra = dipReference[a], let rb = dipReference[b] {
            let dipOff = (abs(averagedDip[a] - ra), abs(averagedDip[b] - rb))
            if abs(dipOff.0 - dipOff.1) > settings.dipLimitDegrees * settings.rejoinFraction {
                return dipOff.0 < dipOff.1 ? a : b
            }
        }
        if let sa = votingSince[a], let sb = votingSince[b], abs(sa - sb) > settings.averagingSeconds {
            return sa < sb ? a : b
        }
        return deviation[a] <= deviation[b] ? a : b
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
    /// Its averaged dip, degrees, and strength as a share of its calibrated radius; NaN until known.
    public var averagedDipDegrees = Double.nan
    public var averagedStrengthShare = Double.nan
    /// True while the others outvote it.
    public var isOutvoted = false
    /// What it disagreed on when last outvoted; nil if never.
    public var disagreement: MagnetometerDisagreement?
    /// How often it was outvoted or taken back.
    public var changes = 0

    public init(name: String) { self.name = name }

    /// Share of the readings that corrected the heading, 0...1.
    public var usedShare: Double { readings > 0 ? Double(used) / Double(readings) : 0 }
}

/// What a magnetometer was outvoted for.
public enum MagnetometerDisagreement: String, Sendable, Equatable {
    /// Its heading turned away from the others'.
    case heading
    /// Its field dips differently from the others'.
    case dip
    /// Its field strength, as a share of its calibrated radius, differs from the others'.
    case strength
}
