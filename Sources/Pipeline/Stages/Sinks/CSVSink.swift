import CompassCore
import WireFormat
import MessageBus

/// Writes t,qw,qx,qy,qz for every imu/data message (the BROAD scorer's contract) and, if asked,
/// t,heading_deg,accuracy_deg,flags for every heading message.
final class CSVSink: StageLogic, TransformLogic {
    struct Settings {
        /// Output file for the orientations.
        var path = ""
        /// Optional second file for headings and their accuracy ("" = none).
        var accuracyPath = ""

        static let specs: [SettingSpec] = [
            SettingSpec(
                "path", .string, nil, "output file: t,qw,qx,qy,qz per imu/data message (BROAD scorer contract)"),
            SettingSpec(
                "accuracy_path", .string, "",
                "optional second file: t,heading_deg,accuracy_deg,flags per heading message"),
        ]

        init(_ s: StageSettings) {
            path = s.string("path")
            accuracyPath = s.string("accuracy_path")
        }
    }

    static let type = StageType(
        name: "csv", role: .sink, summary: "orientation (and heading accuracy) CSV files for scoring",
        settings: Settings.specs
    ) { s, _ in try CSVSink(Settings(s)) }

    let quaternions: BufferedFileWriter
    let accuracy: BufferedFileWriter?
    var rows = 0

    init(_ settings: Settings) throws {
        quaternions = try BufferedFileWriter(path: settings.path)
        try quaternions.write("t,qw,qx,qy,qz\n")
        if settings.accuracyPath.isEmpty {
            accuracy = nil
        } else {
            let file = try BufferedFileWriter(path: settings.accuracyPath)
            try file.write("t,heading_deg,accuracy_deg,flags\n")
            accuracy = file
        }
    }

    var inputHandling: InputHandling { .decoded }

    func process(_ frame: consuming WireFrame, into output: inout [WireFrame]) throws {
        if frame.topic == PipelineTopics.imuFused {
            let m = try decoded(frame, as: ImuMessage.self)
            let q = m.orientation
            try quaternions.write("\(stampText(m.header.stamp)),\(q.w),\(q.x),\(q.y),\(q.z)\n")
            rows += 1
        } else if frame.topic == PipelineTopics.heading, let accuracy {
            let h = try decoded(frame, as: HeadingMessage.self)
            let heading = h.magneticHeading.isFinite ? format(h.magneticHeading, 4) : ""
            let bound = h.headingAccuracy.isFinite ? format(h.headingAccuracy, 4) : ""
            try accuracy.write("\(stampText(h.header.stamp)),\(heading),\(bound),\(FusionFlags(rawValue: h.flags))\n")
        }
    }

    func finish() throws -> [WireFrame] {
        try quaternions.close()
        try accuracy?.close()
        notes.append("\(rows) rows to \(quaternions.path)")
        return []
    }
}
