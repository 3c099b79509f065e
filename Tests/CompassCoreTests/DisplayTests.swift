import Testing
import CompassCore

@Suite("Display helpers")
struct DisplayTests {
    @Test("unwrapping applies the shortest signed turn")
    func unwrap() {
        var u = UnwrappedAngle(startingAt: 358)
        let out = [359.0, 1, 3, 2, 359, 357].map { u.update($0) }
        #expect(out == [359, 361, 363, 362, 359, 357])
        #expect(u.update(.nan) == 357)
    }

    @Test("circular mean of headings around north is north")
    func circularMean() throws {
        let m = try #require(CircularStatistics.meanDegrees([350.0, 10, 355, 5]))
        #expect(abs(signedDegrees(m)) < 1e-9)
        let arithmetic = [350.0, 10, 355, 5].reduce(0, +) / 4
        #expect(abs(arithmetic - 180) < 1e-9)  // what a naive mean would say
        #expect(CircularStatistics.meanDegrees([0.0, 180]) == nil)
        #expect(CircularStatistics.meanDegrees([Double]()) == nil)
        #expect(CircularStatistics.meanDegrees([1.0, .nan]) == nil)
        #expect(abs(CircularStatistics.meanResultantLength([10.0, 10, 10])! - 1) < 1e-12)
    }

    @Test("circular smoothing crosses north without swinging through south")
    func circularSmoothing() throws {
        var s = CircularSmoother(weight: 0.2)
        var worst = 0.0
        for i in 0..<200 {
            let h = i % 2 == 0 ? 356.0 : 4.0
            let updated = s.update(h)
            let v = try #require(updated)
            worst = max(worst, abs(signedDegrees(v)))
        }
        #expect(worst <= 4 + 1e-9)
        #expect(CircularSmoother(weight: 0.5).value == nil)
    }

    @Test("8- and 16-point names")
    func names() {
        #expect(CardinalDirection.name(forHeadingDegrees: 0, points: .eight) == "N")
        #expect(CardinalDirection.name(forHeadingDegrees: 22.4, points: .eight) == "N")
        #expect(CardinalDirection.name(forHeadingDegrees: 22.6, points: .eight) == "NE")
        #expect(CardinalDirection.name(forHeadingDegrees: 337.6, points: .eight) == "N")
        #expect(CardinalDirection.name(forHeadingDegrees: 180, points: .eight) == "S")
        #expect(CardinalDirection.name(forHeadingDegrees: 290, points: .eight) == "W")
        #expect(CardinalDirection.name(forHeadingDegrees: 11.3) == "NNE")
        #expect(CardinalDirection.name(forHeadingDegrees: 11.2) == "N")
        #expect(CardinalDirection.name(forHeadingDegrees: 247.5) == "WSW")
        #expect(CardinalDirection.name(forHeadingDegrees: -10) == "N")
        #expect(CardinalDirection.name(forHeadingDegrees: 350) == "N")
        #expect(CardinalDirection.name(forHeadingDegrees: .nan) == nil)
        let all16 = (0..<16).map { CardinalDirection.name(forHeadingDegrees: Double($0) * 22.5)! }
        #expect(Set(all16).count == 16)
    }

    @Test("heading change filter delivers only changes of at least N degrees")
    func changeFilter() {
        var f = HeadingChangeFilter()  // default 1 degree
        let offered = [10.0, 10.5, 10.9, 11.0, 11.5, 359.5, 0.2, 0.6, .nan, 2]
        let delivered = offered.compactMap { f.offer($0) }
        #expect(delivered == [10, 11, 359.5, 0.6, 2])
        var all = HeadingChangeFilter(minimumChangeDegrees: 0)
        #expect([1.0, 1.0, 1.1].compactMap { all.offer($0) } == [1, 1, 1.1])
    }
}

@Suite("Direction source choice")
struct DirectionSourceTests {
    let selector = DirectionSourceSelector()

    @Test("GPS course when fast and accurate, else compass when accurate, else unknown")
    func choice() {
        let fast = CourseOverGround(courseDegrees: 91, speedMetresPerSecond: 2.5, courseAccuracyDegrees: 10)
        #expect(
            selector.choose(gps: fast, compassHeadingDegrees: 80, compassAccuracyDegrees: 5)
                == .gpsCourse(degrees: 91, accuracyDegrees: 10))
        let slow = CourseOverGround(courseDegrees: 91, speedMetresPerSecond: 1.9, courseAccuracyDegrees: 10)
        #expect(
            selector.choose(gps: slow, compassHeadingDegrees: 80, compassAccuracyDegrees: 5)
                == .compass(degrees: 80, accuracyDegrees: 5))
        let vague = CourseOverGround(courseDegrees: 91, speedMetresPerSecond: 5, courseAccuracyDegrees: 16)
        #expect(
            selector.choose(gps: vague, compassHeadingDegrees: 80, compassAccuracyDegrees: 30)
                == .compass(degrees: 80, accuracyDegrees: 30))
        #expect(selector.choose(gps: vague, compassHeadingDegrees: 80, compassAccuracyDegrees: 31) == .unknown)
        #expect(selector.choose(gps: nil, compassHeadingDegrees: .nan, compassAccuracyDegrees: 5) == .unknown)
    }

    @Test("invalid values (negative, NaN) become nil, never sentinels")
    func invalidValues() {
        let unknownAccuracy = CourseOverGround(courseDegrees: 91, speedMetresPerSecond: 10, courseAccuracyDegrees: -1)
        #expect(unknownAccuracy.courseAccuracyDegrees == nil)
        #expect(
            selector.choose(gps: unknownAccuracy, compassHeadingDegrees: 80, compassAccuracyDegrees: -1) == .unknown)
        let nanSpeed = CourseOverGround(courseDegrees: 91, speedMetresPerSecond: .nan, courseAccuracyDegrees: 1)
        #expect(nanSpeed.speedMetresPerSecond == nil)
        #expect(selector.choose(gps: nanSpeed, compassHeadingDegrees: 80, compassAccuracyDegrees: .nan) == .unknown)
        #expect(validNonNegative(-0.5) == nil && validNonNegative(.infinity) == nil && validNonNegative(0) == 0)
    }

    @Test("thresholds are configurable")
    func thresholds() {
        let strict = DirectionSourceSelector(
            minimumSpeedMetresPerSecond: 5, maximumCourseAccuracyDegrees: 5, maximumCompassAccuracyDegrees: 10)
        let gps = CourseOverGround(courseDegrees: 10, speedMetresPerSecond: 4, courseAccuracyDegrees: 3)
        #expect(strict.choose(gps: gps, compassHeadingDegrees: 12, compassAccuracyDegrees: 11) == .unknown)
        #expect(
            strict.choose(gps: gps, compassHeadingDegrees: 12, compassAccuracyDegrees: 9)
                == .compass(degrees: 12, accuracyDegrees: 9))
    }
}
