import Foundation
import PackagePlugin

/// Regenerates BuildInfo's values when CHANGELOG.md or the git HEAD (the ref it names, or packed-refs)
/// changes, so `fusion-node --version` names the commit actually built, also in incremental builds.
@main
struct BuildInfoPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let root = context.package.directoryURL
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("BuildInfo.generated.swift")
        var inputs = [root.appendingPathComponent("CHANGELOG.md")]
        let git = root.appendingPathComponent(".git")
        let head = git.appendingPathComponent("HEAD")
        if let text = try? String(contentsOf: head, encoding: .utf8) {
            inputs.append(head)
            if text.hasPrefix("ref: ") {
                let ref = text.dropFirst(5).trimmingCharacters(in: .whitespacesAndNewlines)
                inputs.append(git.appendingPathComponent(ref))
            }
            inputs.append(git.appendingPathComponent("packed-refs"))
        }
        inputs = inputs.filter { FileManager.default.fileExists(atPath: $0.path) }
        return [
            .buildCommand(
                displayName: "Recording the version and commit",
                executable: try context.tool(named: "BuildInfoTool").url,
                arguments: [root.path, output.path],
                inputFiles: inputs,
                outputFiles: [output])
        ]
    }
}
