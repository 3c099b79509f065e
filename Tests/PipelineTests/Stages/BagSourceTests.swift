import Testing
import Foundation
import CompassCore
import IMUSimulator
import WireFormat
import Bags
@testable import Pipeline

/// A vendor's "sensor_msgs/msg/Imu": a temperature after the header, acceleration before rate.
enum VendorLayout {
    static let definition = """
        std_msgs/Header header
        float32 temperature
        geometry_msgs/Vector3 linear_acceleration
        geometry_msgs/Vector3 angular_velocity
        ================================================================================
        MSG: std_msgs/Header
        builtin_interfaces/Time stamp
        string frame_id
        ================================================================================
        MSG: builtin_interfaces/Time
        int32 sec
        uint32 nanosec
        ================================================================================
        MSG: geometry_msgs/Vector3
        float64 x
        float64 y
        float64 z
        """

    static func payload(header: RosHeader, gyro: Vector3, accel: Vector3) -> [UInt8] {
        var w = CDRWriter()
        w.int32(header.stamp.sec)
        w.uint32(header.stamp.nanosec)
        w.string(header.frameId)
        w.uint32(Float(21.5).bitPattern)
        for v in [accel, gyro] {
            w.float64(v.x)
            w.float64(v.y)
            w.float64(v.z)
        }
        return w.bytes
    }
}

extension PipelineRunTests {
    @Test("a bag whose Imu definition has another layout is read through its own schema, with identical results")
    func schemaDriven() async throws {
        var scenario = SimulationScenario()
        scenario.motion = [.rest(seconds: 3), .turn(degreesPerSecond: 20, seconds: 3)]
        scenario.startTime = 1_700_000_000
        let samples = IMUSimulator.samples(scenario)
        for (name, vendor) in [("standard", false), ("vendor", true)] {
            let w = try MCAPWriter(path: "\(dir)/\(name).mcap")
            try w.addTopic(
                "/imu/data_raw", type: ImuMessage.typeName,
                definition: vendor ? VendorLayout.definition : MessageDefinitions.imu)
            try w.addTopic(
                "/imu/mag", type: MagneticFieldMessage.typeName, definition: MessageDefinitions.magneticField)
            for x in samples {
                let header = RosHeader(stamp: RosTime(seconds: x.imu.timestamp), frameId: "imu_link")
                let imu =
                    vendor
                    ? VendorLayout.payload(header: header, gyro: x.imu.angularVelocity, accel: x.imu.specificForce)
                    : ImuMessage(
                        header: header, orientation: Quaternion(w: 1, x: 0, y: 0, z: 0), orientationCovariance: [-1],
                        angularVelocity: x.imu.angularVelocity, angularVelocityCovariance: [],
                        linearAcceleration: x.imu.specificForce, linearAccelerationCovariance: []
                    ).cdr()
                let t = UInt64(header.stamp.nanoseconds)
                try w.write(topic: "/imu/data_raw", logTime: t, data: imu)
                try w.write(
                    topic: "/imu/mag", logTime: t,
                    data: MagneticFieldMessage(
                        header: header, magneticField: x.magnetometer.fieldMicrotesla * 1e-6,
                        magneticFieldCovariance: []
                    ).cdr())
            }
            try w.finish()
            let config = try PipelineConfig.parse(
                """
                stages:
                  bag:
                    type: bag
                    path: \(dir)/\(name).mcap
                  fusion:
                    type: fusion
                    inputs: [bag]
                  csv:
                    type: csv
                    inputs: [fusion]
                    path: \(dir)/\(name).csv
                """, file: "t.yaml", environment: [:])
            let reports = try await PipelineRunner.runAll(config, log: { _ in })
            #expect(reports.first { $0.stage == "bag" }!.notes.contains { $0.contains("bag's own") } == vendor)
        }
        let standard = try String(contentsOfFile: "\(dir)/standard.csv", encoding: .utf8)
        let vendor = try String(contentsOfFile: "\(dir)/vendor.csv", encoding: .utf8)
        #expect(standard.split(separator: "\n").count == samples.count + 1)
        #expect(standard == vendor)
    }
}

extension PipelineRunTests {
    @Test(
        "a current topic of std_msgs Float32 becomes motor/current at its log time; another type is refused by name")
    func currentTopic() throws {
        let path = "\(dir)/current.mcap"
        let w = try MCAPWriter(path: path)
        try w.addTopic("/imu/data_raw", type: ImuMessage.typeName, definition: MessageDefinitions.imu)
        try w.addTopic("/imu/mag", type: MagneticFieldMessage.typeName, definition: MessageDefinitions.magneticField)
        try w.addTopic(
            "/esc/current", type: "std_msgs/msg/Float32",
            definition: KnownInterfaces.definition(for: "std_msgs/msg/Float32")!)
        for k in 0..<20 {
            let t = UInt64(1_700_000_000_000_000_000) + UInt64(k) * 10_000_000
            let header = RosHeader(stamp: RosTime(sec: 1_700_000_000, nanosec: UInt32(k * 10_000_000)), frameId: "imu")
            try w.write(
                topic: "/imu/data_raw", logTime: t,
                data: ImuMessage(
                    header: header, orientation: Quaternion(w: 1, x: 0, y: 0, z: 0), orientationCovariance: [-1],
                    angularVelocity: .zero, angularVelocityCovariance: [], linearAcceleration: Vector3(0, 0, 9.8),
                    linearAccelerationCovariance: []
                ).cdr())
            try w.write(
                topic: "/imu/mag", logTime: t,
                data: MagneticFieldMessage(
                    header: header, magneticField: Vector3(2e-5, 0, -4e-5), magneticFieldCovariance: []
                )
                .cdr())
            var current = CDRWriter()
            current.float32(Float(k) * 0.5)
            try w.write(topic: "/esc/current", logTime: t + 1_000, data: current.take())
        }
        try w.finish()
        let source = try stageLogic("bag", "    path: \(path)\n    current_topic: esc/current\n") as! BagSource
        let currents = try emitted(by: source).filter { $0.topic == PipelineTopics.motorCurrent }
        #expect(currents.count == 20)
        let last = try BatteryStateMessage(cdrBytes: currents[19].payload)
        #expect(last.drawnAmperes == 9.5 && last.header.stamp == RosTime(sec: 1_700_000_000, nanosec: 190_001_000))
        #expect(throws: StageFailure.self) { try stageLogic("bag", "    path: \(path)\n    current_topic: /imu/mag\n") }
    }
}
