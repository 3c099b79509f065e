import Foundation

/// `fusion-node(1)` in roff, generated from the same help tables as `--help` and the completion
/// scripts, so the installed manual cannot fall behind the binary (tools/package.sh installs it).
enum ManPage {
    static var text: String {
        var out = ".TH FUSION-NODE 1 \"\" \"GyroCompass \(escape(BuildIdentity.version))\" \"User Commands\"\n"
        out += ".SH NAME\nfusion-node \\- GyroCompass gyro-compass sensor fusion\n"
        out += ".SH SYNOPSIS\n"
        out += ".B fusion-node\n[\\fIoptions\\fR]\n.br\n"
        out += ".B fusion-node \\-\\-config\n\\fIFILE\\fR [\\fIoptions\\fR]\n.br\n"
        out += ".B fusion-node\n\\fICOMMAND\\fR [\\fIoptions\\fR]\n"
        out += ".SH DESCRIPTION\n"
        out += paragraph(
            "GyroCompass blends a gyroscope and a magnetometer into a heading: an event pipeline of stages "
                + "(source, calibration, fusion, sinks) described in a pipeline file. Without arguments it runs "
                + "the built-in pipeline on the seeded simulator.")
        out += ".SH COMMANDS\n"
        for (name, summary) in Commands.topLevel {
            out += ".TP\n.B \(escape(name))\n\(escape(summary))\n"
        }
        out += ".SH OPTIONS AND COMMANDS IN DETAIL\n"
        for help in Commands.all {
            out += section(help)
        }
        out += ".SH EXIT STATUS\n"
        for (code, meaning) in exitCodes {
            out += ".TP\n.B \(code)\n\(escape(meaning))\n"
        }
        out += ".SH ENVIRONMENT\n"
        for (name, meaning) in environment {
            out += ".TP\n.B \(name)\n\(escape(meaning))\n"
        }
        out += ".SH FILES\n"
        for (path, meaning) in files {
            out += ".TP\n.I \(escape(path))\n\(escape(meaning))\n"
        }
        out += ".SH SEE ALSO\n"
        out += paragraph(
            "fusion-node help COMMAND; the reference (commands, pipelines, stages, filters, ROS 2) in "
                + "/usr/share/doc/gyrocompass/docs")
        return out
    }

    static let exitCodes: [(Int32, String)] = [
        (ExitCode.complete.rawValue, "complete: every input was read to its end"),
        (ExitCode.failed.rawValue, "failed: a stage could not start or failed while running"),
        (ExitCode.usage.rawValue, "the command line or the pipeline file is wrong; nothing ran"),
        (ExitCode.finishedWithLoss.rawValue, "finished, but damage or loss was reported on stderr"),
        (ExitCode.interrupted.rawValue, "SIGINT or SIGTERM ended the run (outputs complete up to there)"),
    ]

    static let environment: [(String, String)] = [
        ("ROS_DOMAIN_ID", "the DDS domain of ROS 2 commands and pipelines, unless an option or setting gives one"),
        ("ROS_NAMESPACE", "the namespace the shipped ROS 2 pipelines use"),
        ("CYCLONEDDS_URI", "Cyclone DDS configuration (network interfaces, discovery peers)"),
        ("STATE_DIRECTORY", "set by systemd for gyrocompass@.service: where the robot pipeline keeps its calibration"),
    ]

    static let files: [(String, String)] = [
        ("/etc/gyrocompass/robot.yaml", "the robot pipeline gyrocompass@robot.service runs (a conffile)"),
        ("/usr/share/gyrocompass/pipelines", "the shipped pipelines, starting points for your own"),
        ("/var/lib/gyrocompass/calibration.json", "the calibration the robot pipeline learned and loads at start"),
    ]

    static func section(_ help: CommandHelp) -> String {
        var out = ".SS \(escape(help.synopsis))\n\(escape(help.summary))\n"
        for option in help.options {
            let label = "\\fB\(escape(option.name))\\fR" + (option.value.map { " \\fI\(escape($0))\\fR" } ?? "")
            out += ".TP\n\(label)\n\(escape(option.meaning))"
            out += (option.defaultValue.map { " (default: \(escape($0)))" } ?? "") + "\n"
        }
        if !help.details.isEmpty { out += paragraph(help.details) }
        if !help.examples.isEmpty {
            out += ".PP\nExamples:\n.nf\n.RS\n" + help.examples.map { escape($0) + "\n" }.joined() + ".RE\n.fi\n"
        }
        return out
    }

    /// Prose as filled roff text: each source line kept (roff fills them), blank lines start paragraphs.
    static func paragraph(_ text: String) -> String {
        ".PP\n"
            + text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
                line.allSatisfy(\.isWhitespace) ? ".PP\n" : escape(line.trimmingPrefix(" ")) + "\n"
            }.joined()
    }

    /// Text safe for roff: backslashes and hyphens escaped, a leading period or quote neutralised.
    static func escape<S: StringProtocol>(_ text: S) -> String {
        var out = text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
        if out.hasPrefix(".") || out.hasPrefix("'") { out = "\\&" + out }
        return out
    }
}
