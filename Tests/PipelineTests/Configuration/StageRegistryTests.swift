import Testing
import Foundation
import YAML
import WireFormat
@testable import Pipeline

@Suite("Stage registry")
struct StageRegistryTests {
    @Test("names are unique, every role is present, and every type builds from its defaults plus its required settings")
    func registry() throws {
        let names = StageRegistry.types.map(\.name)
        #expect(Set(names).count == names.count)
        #expect(Set(StageRegistry.types.map(\.role)) == Set(StageRole.allCases))
        for type in StageRegistry.types {
            let text = stageTestPipeline(type.name, minimalSettings(type))
            let stage = try #require(try PipelineConfig.parse(text, file: "t.yaml", environment: [:]).stage(named: "s"))
            let given = minimalSettings(type)
            for spec in type.settings
            where spec.defaultValue != nil && spec.kind == .string
                && !given.contains("    \(spec.name):")
            {
                #expect(stage.settings.string(spec.name) == spec.defaultValue, "\(type.name).\(spec.name)")
            }
            if type.name == "bag" || type.name == "publish" { continue }  // opens the bag, binds a port
            _ = try stage.makeLogic(log: { _ in })
        }
    }

    @Test("every topic a stage type publishes is a pipeline topic the bus interns")
    func topicsKnown() {
        for type in StageRegistry.types {
            for topic in type.outputTopics { #expect(PipelineTopics.all.contains(topic), "\(type.name): \(topic)") }
        }
    }

    @Test(
        "each setting's choices and range are checked when the file loads, with its position",
        arguments: [
            ("simulator", "rate_hz: 1e300", "between 0.1 and 100000"),
            ("simulator", "duration_s: -1", "between 0 and 1000000"),
            ("simulator", "seed: -3", "between 0 and"),
            ("fusion", "latitude: 91", "between -90 and 90"),
            ("fusion", "latitude: 52.5", "needs a longitude"),
            ("fusion", "date: 1492", "between 1900 and 2200"),
            ("stdout", "format: yaml", "one of text, json"),
            ("record", "path: x\n    compression: brotli", "one of zstd, lz4, none"),
            ("calibration", "status_period_s: 0", "between 0.001 and 86400"),
            ("publish", "high_water_mark: 0", "between 1 and"),
        ])
    func validated(_ type: String, _ setting: String, _ message: String) throws {
        let text = stageTestPipeline(type, "    \(setting)\n")
        let e = try #require(configError(text))
        #expect(e.message.contains(message), "\(e)")
        #expect(e.mark.line >= 9, "\(e)")
    }

    @Test("a choice of one stage type is not a choice of another: a setting's values come from its own spec")
    func choicesAreOwnedBySettings() throws {
        // 'format' is a choice of stdout; the record stage has no such setting at all.
        #expect(
            configError(
                "stages:\n  up:\n    type: simulator\n  s:\n    type: record\n    inputs: [up]\n    path: x\n    "
                    + "format: json\n"
            )?
            .message.contains("unknown setting 'format'") == true)
    }

    @Test("Pipelines/default.yaml is the built-in default graph, written out")
    func shippedDefault() throws {
        let root = "/" + #filePath.split(separator: "/").dropLast(4).joined(separator: "/")
        let file = try String(contentsOfFile: root + "/Pipelines/default.yaml", encoding: .utf8)
        #expect(file == BuiltInPipelines.shippedDefault)
        let shipped = try PipelineConfig.parse(file, file: "default.yaml", environment: [:])
        let builtIn = try PipelineConfig.parse(
            BuiltInPipelines.defaultText(durationSeconds: 0, filter: "kalman", seed: 1), file: "b", environment: [:])
        // One graph: what `fusion-node` runs is the shipped file with its defaults.
        #expect(shipped.stages.map(\.name) == builtIn.stages.map(\.name))
        let watched = try PipelineConfig.parse(
            BuiltInPipelines.defaultText(durationSeconds: 0, filter: "kalman", seed: 1, watch: true), file: "w",
            environment: [:])
        #expect(watched.stages.map(\.name) == ["source", "calibration", "fusion", "headings"])
    }

    @Test("every duration is named for its unit: seconds end in _s, milliseconds in _ms")
    func durationNames() {
        for type in StageRegistry.types {
            for spec in type.settings {
                // A rate's "_s" is "per second" (vertical_turn_deg_s, in deg/s).
                let named = spec.name.hasSuffix("_s")
                #expect(spec.unit != "s" || named, "\(type.name).\(spec.name) [\(spec.unit)]")
                #expect(
                    !named || spec.unit == "s" || spec.unit.hasSuffix("/s"), "\(type.name).\(spec.name) [\(spec.unit)]")
                #expect((spec.unit == "ms") == spec.name.hasSuffix("_ms"), "\(type.name).\(spec.name) [\(spec.unit)]")
            }
        }
    }

    @Test("a setting's former name is still read, and the file is told the new one with the line")
    func formerNames() throws {
        let text =
            "stages:\n  sim:\n    type: simulator\n    duration: 2\n  f:\n    type: fusion\n    inputs: [sim]\n"
            + "  out:\n    type: stdout\n    inputs: [f]\n"
        let config = try PipelineConfig.parse(text, file: "t.yaml", environment: [:])
        #expect(config.stage(named: "sim")?.settings.number("duration_s") == 2)
        #expect(config.deprecations.count == 1)
        let warning = try #require(config.deprecations.first).description
        #expect(warning.contains("t.yaml:4:") && warning.contains("'duration'") && warning.contains("'duration_s'"))
        // The new name and the old together are one setting given twice.
        let twice = text.replacingOccurrences(of: "duration: 2\n", with: "duration: 2\n    duration_s: 3\n")
        let e = try #require(configError(twice))
        #expect(e.message.contains("given twice"), "\(e)")
        // An override by the new name replaces the file's old one (the command line's --duration).
        let overridden = try PipelineConfig.parse(
            text, file: "t.yaml", environment: [:],
            overrides: [SettingOverride(stage: "sim", setting: "duration_s", value: "3", origin: "--duration 3")])
        #expect(overridden.stage(named: "sim")?.settings.number("duration_s") == 3)
        #expect(overridden.deprecations.isEmpty)
        // Files written with the new names have nothing to warn of.
        let current = text.replacingOccurrences(of: "duration: 2", with: "duration_s: 2")
        #expect(try PipelineConfig.parse(current, file: "t.yaml", environment: [:]).deprecations.isEmpty)
    }
}
