import Testing
import CompassCore
@testable import Pipeline

@Suite("Settings declared once")
struct SettingTableTests {
    @Test("every Settings property of every stage type has a table entry, and every entry sets a property")
    func tablesCoverTheirStructs() {
        for type in StageRegistry.types {
            let coverage = type.settingsCoverage()
            #expect(coverage.unsetProperties == [], "\(type.name): properties without an entry")
            #expect(coverage.entriesWithoutProperty == [], "\(type.name): entries that set no property")
        }
    }

    @Test("the check finds a property without an entry and an entry that sets nothing")
    func coverageCanFail() {
        struct Example: DeclaredSettings {
            var declared = 1.0
            var forgotten = 2.0
            var other = ""
        }
        let table = SettingTable<Example>([
            .number("declared", \.declared, range: 0...10, "a declared number"),
            // Writes `other` only when it differs from... never: a value no choice makes.
            .choice("mode", \.unrelatedMode, "an entry whose property is computed"),
        ])
        let coverage = table.coverage()
        #expect(coverage.unsetProperties == ["forgotten", "other"])
        #expect(coverage.entriesWithoutProperty == ["mode"])
    }

    @Test("defaults come from Settings(): the table's spec shows the struct's value")
    func defaultsAreTheStructs() {
        let fusion = FusionStage.Settings.table.specs
        let defaults = KalmanFilterSettings()
        #expect(
            fusion.first { $0.name == "gyro_noise_density" }?.defaultValue
                == SettingSpec.text(defaults.gyroNoiseDensity))
        #expect(fusion.first { $0.name == "filter" }?.defaultValue == "kalman")
        #expect(fusion.first { $0.name == "latitude" }?.defaultValue == "")
        let record = RecordSink.Settings.table.specs
        #expect(record.first { $0.name == "path" }?.defaultValue == nil)  // required
        #expect(record.first { $0.name == "topics" }?.defaultValue == "heading,imu/data")
        let simulator = SimulatorSource.Settings.table.specs
        #expect(simulator.first { $0.name == "soft_iron" }?.defaultValue == "1,0,0,0,1,0,0,0,1")
    }
}

private enum Mode: String, CaseIterable { case a, b }

extension DeclaredSettings {
    /// A computed property: an entry writing it changes no stored property.
    fileprivate var unrelatedMode: Mode {
        get { .a }
        set {}
    }
}
