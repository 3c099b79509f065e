import CompassCore
import IMUSimulator
import Testing

@Suite("Lever arm: the rotation's share of the specific force")
struct LeverArmTests {
    /// Swinging through figure-eights (roll and pitch rates up to about 5 rad/s) for a minute.
    static func swinging(leverArm: Vector3, seed: UInt64 = 5) -> SimulationScenario {
        var s = makeScenario(
            [.rest(seconds: 10)] + Array(repeating: .figureEight(seconds: 8), count: 8), seed: seed, heading: 40)
        s.leverArmMeters = leverArm
        return s
    }

    static func inclinationRMS(_ steps: [Step]) -> Double {
        let swing = steps.filter { $0.output.timestamp > 20 }.map(inclinationError)
        return (swing.map { $0 * $0 }.reduce(0, +) / Double(swing.count)).squareRoot()
    }

    static func filter(leverArmSeconds: Double) -> KalmanFilter {
        var settings = KalmanFilterSettings()
        settings.leverArmSeconds = leverArmSeconds
        return KalmanFilter(settings: settings)
    }

    @Test("a sensor 15 cm from the pivot: the fit finds the arm and the inclination error falls")
    func offCentre() {
        let arm = Vector3(0.15, 0.05, 0)
        var fitted = Self.filter(leverArmSeconds: 10), plain = Self.filter(leverArmSeconds: 0)
        let scenario = Self.swinging(leverArm: arm)
        let withFit = Self.inclinationRMS(run(&fitted, scenario))
        let without = Self.inclinationRMS(run(&plain, scenario))
        let found = fitted.leverArm.leverArmMeters
        print("lever arm \(arm): inclination RMS \(without) without the fit, \(withFit) with it; found \(found)")
        #expect((found - arm).norm < 0.02, "found \(found)")
        #expect(withFit < 0.5 * without, "\(withFit) against \(without)")
    }

    @Test("a sensor at the pivot: the fit finds nothing and costs nothing")
    func atThePivot() {
        var fitted = Self.filter(leverArmSeconds: 10), plain = Self.filter(leverArmSeconds: 0)
        let scenario = Self.swinging(leverArm: .zero)
        let withFit = Self.inclinationRMS(run(&fitted, scenario))
        let without = Self.inclinationRMS(run(&plain, scenario))
        let found = fitted.leverArm.leverArmMeters
        print("no lever arm: inclination RMS \(without) without the fit, \(withFit) with it; found \(found)")
        #expect(found.norm < 0.01, "found \(found)")
        #expect(withFit < without * 1.1 + 0.02, "\(withFit) against \(without)")
    }
}
