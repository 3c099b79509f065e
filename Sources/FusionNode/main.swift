#if canImport(Glibc)
    import Glibc
#endif
import Bags
import CompassCore
import IMUSimulator
import Pipeline

/// Thrown by a command group (`bag`, `bench`) asked for its help.
struct GroupHelpRequested: Error {
    let group: String
}

/// `fusion-node bag info|echo ...`.
func runBag(_ args: [String]) throws -> ExitCode {
    switch args.first {
    case "info": return try BagInfoCommand.run(Array(args.dropFirst()))
    case "echo": return try BagEchoCommand.run(Array(args.dropFirst()))
    case "convert": return try BagConvertCommand.run(Array(args.dropFirst()))
    case "-h", "--help": throw GroupHelpRequested(group: "bag")
    case let other?:
        throw UsageError(
            message: "unknown bag command '\(other)'\(didYouMean(other, in: ["info", "echo", "convert"]))\n"
                + Commands.groupText("bag"))
    case nil:
        throw UsageError(message: "'fusion-node bag' needs a command\n" + Commands.groupText("bag"))
    }
}

/// `fusion-node help [COMMAND [SUBCOMMAND]]`.
func runHelp(_ args: [String]) throws -> ExitCode {
    if args.isEmpty {
        print(Commands.overview, terminator: "")
    } else if let help = Commands.help(for: args) {
        print(help.text, terminator: "")
    } else if args.count == 1, Commands.groups[args[0]] != nil {
        print(Commands.groupText(args[0]), terminator: "")
    } else {
        let known = Commands.topLevel.map(\.name) + Commands.all.map(\.path).filter { !$0.isEmpty }
        let asked = args.joined(separator: " ")
        throw UsageError(message: "no help for '\(asked)': not a command\(didYouMean(asked, in: known))")
    }
    return .complete
}

func dispatch(_ arguments: [String]) async throws -> ExitCode {
    switch arguments.first {
    case nil: return try await DefaultPipelineCommand.run([])
    case "--help", "-h": return try runHelp([])
    case "help": return try runHelp(Array(arguments.dropFirst()))
    case "--help-run": return try runHelp([""])
    case "--version":
        print(BuildIdentity.text, terminator: "")
        return .complete
    case "--print-man-page":
        print(ManPage.text, terminator: "")
        return .complete
    case "--print-default-pipeline":
        print(BuiltInPipelines.shippedDefault, terminator: "")
        return .complete
    // `calibrate --config FILE` takes a pipeline's source; every other --config runs the pipeline.
    case "calibrate": return try await CalibrateCommand.run(Array(arguments.dropFirst()))
    case _ where arguments.contains("--config"): return try await PipelineCommand.run(arguments)
    case "replay": return try await ReplayCommand.run(Array(arguments.dropFirst()))
    case "bag": return try runBag(Array(arguments.dropFirst()))
    case "stages": return try StagesCommand.run(Array(arguments.dropFirst()))
    case "echo": return try EchoCommand.run(Array(arguments.dropFirst()))
    case "bench": return try await BenchCommand.run(Array(arguments.dropFirst()))
    case "completion": return try CompletionCommand.run(Array(arguments.dropFirst()))
    case "keygen": return try KeygenCommand.run(Array(arguments.dropFirst()))
    case "watch": return try WatchCommand.run(Array(arguments.dropFirst()))
    case "report": return try await ReportCommand.run(Array(arguments.dropFirst()))
    case "ros2": return try ROS2Command.run(Array(arguments.dropFirst()))
    case "fleet": return try FleetCommand.run(Array(arguments.dropFirst()))
    case let first? where first.hasPrefix("-"): return try await DefaultPipelineCommand.run(arguments)
    case let first?:
        throw UsageError(
            message: "unknown command '\(first)'\(didYouMean(first, in: Commands.topLevel.map(\.name))) "
                + "(commands: \(Commands.topLevel.map(\.name).joined(separator: ", ")))")
    }
}

var status = ExitCode.complete
do {
    status = try await dispatch(Array(CommandLine.arguments.dropFirst()))
} catch let help as HelpRequested {
    print(help.help.text, terminator: "")
} catch let group as GroupHelpRequested {
    print(Commands.groupText(group.group), terminator: "")
} catch let e as BagError where e.isDamage {
    writeStandardError("fusion-node: \(e)\n(the bag is damaged: --salvage reads past the damage and lists it)\n")
    status = .failed
} catch let e as PipelineConfigError {
    writeStandardError("fusion-node: \(e)\n")
    status = .usage
} catch let e as UsageError {
    let hint = e.command.map { $0.isEmpty ? "fusion-node --help" : "fusion-node \($0) --help" } ?? "fusion-node --help"
    writeStandardError("fusion-node: \(e.message)\nTry '\(hint)'.\n")
    status = .usage
} catch {
    writeStandardError("fusion-node: \(error)\n")
    status = .failed
}
fflush(nil)
exit(status.rawValue)
