import Testing
import CompassCore
@testable import Pipeline

@Suite("Magnetometer verdict reasons: one list read everywhere")
struct VerdictReasonsTests {
    @Test("each reason has a bit of its own, a name, and is counted, labelled and coloured from the one list")
    func everyReasonIsKnownEverywhere() {
        let reasons = MagnetometerVerdictReason.allCases
        #expect(Set(reasons.map(\.flag.rawValue)).count == reasons.count)
        for reason in reasons {
            #expect(reason.flag.rawValue.nonzeroBitCount == 1, "\(reason): one bit")
            let name = ReportPage.name(of: reason.flag)
            #expect(FusionFlags.names.contains { $0.0 == reason.flag && $0.1 == name }, "\(reason): named")
            #expect(InterferenceTally.reasons.contains(reason.flag), "\(reason): counted by the tally")
            #expect(ReportPage.flagLabels[name] == reason.label, "\(reason): labelled in the report")
            #expect(ReportPage.flagColors[name] == ReportPage.reasonColor, "\(reason): coloured in the report")
            #expect(ReportPage.flagRows.contains { $0.0 == reason.flag.rawValue && $0.1 == reason.label })
        }
        #expect(MagnetometerVerdictReason.verdictFlags.contains(.magnetometerRejected))
        #expect(InterferenceTally.reasons == MagnetometerVerdictReason.verdictFlags)
    }

    @Test("the gate raises no verdict flag the list does not hold")
    func gateRaisesOnlyListedReasons() {
        var gate = MagneticDisturbanceGate(settings: .init())
        gate.setReference(strengthMicrotesla: 50, dipDegrees: 60)
        var raised: FusionFlags = []
        // Strength, dip and heading pulled far off in turn, 100 Hz for 3 s each.
        for (strength, dip, innovation) in [(90.0, 60.0, 0.0), (50.0, 20.0, 0.0), (50.0, 60.0, 1.0)] {
            for _ in 0..<300 {
                let verdict = gate.assess(
                    strengthMicrotesla: strength, dipDegrees: dip, headingInnovation: innovation,
                    headingVariance: 1e-6, dt: 0.01)
                raised.formUnion(verdict.flags)
            }
        }
        let reasons = MagnetometerVerdictReason.verdictFlags
        #expect(!raised.intersection(reasons).isEmpty)
        #expect(raised.subtracting(reasons).subtracting(.magneticReferenceChanged).isEmpty, "\(raised)")
    }
}
