import Testing
@testable import ROS2DDS

@Suite struct ROS2NamesTests {
    @Test func topicsTakeTheNamespaceAndThePrefix() throws {
        #expect(try ROS2Names.ddsTopic("imu/data") == "rt/imu/data")
        #expect(try ROS2Names.ddsTopic("imu/data", namespace: "/robot1") == "rt/robot1/imu/data")
        #expect(try ROS2Names.ddsTopic("imu/data", namespace: "robot1/") == "rt/robot1/imu/data")
        #expect(try ROS2Names.ddsTopic("/tf", namespace: "/robot1") == "rt/tf")
        #expect(ROS2Names.rosTopic(ofDDSTopic: "rt/robot1/heading") == "/robot1/heading")
        #expect(ROS2Names.rosTopic(ofDDSTopic: "DCPSParticipant") == nil)
    }

    @Test func typesUseTheDDSSpelling() throws {
        #expect(try ROS2Names.ddsType("sensor_msgs/msg/Imu") == "sensor_msgs::msg::dds_::Imu_")
        #expect(ROS2Names.rosType(ofDDSType: "gyrocompass_msgs::msg::dds_::Heading_") == "gyrocompass_msgs/msg/Heading")
        #expect(throws: ROS2NameError.self) { try ROS2Names.ddsType("Imu") }
    }

    @Test func namesROS2RefusesAreRefusedWithTheReason() {
        for bad in ["", "imu//data", "imu/data/", "2imu", "imu/da-ta", "imu/~data"] {
            #expect(throws: ROS2NameError.self) { try ROS2Names.ddsTopic(bad) }
        }
        do {
            _ = try ROS2Names.ddsTopic("imu/9axis")
            Issue.record("accepted a token starting with a digit")
        } catch { #expect(error.description.contains("'9axis' starts with a digit")) }
    }

    @Test func qosMismatchNamesThePolicy() {
        let reliable = ROS2QoS.rosDefault
        #expect(reliable.mismatch(offered: (.bestEffort, .volatile))?.contains("best_effort") == true)
        #expect(reliable.mismatch(offered: (.reliable, .volatile)) == nil)
        #expect(ROS2QoS.sensorData.mismatch(offered: (.reliable, .transientLocal)) == nil)
        let latched = ROS2QoS(reliability: .reliable, durability: .transientLocal, history: .keepLast(1))
        #expect(latched.mismatch(offered: (.reliable, .volatile))?.contains("transient_local") == true)
    }
}

@Suite struct TypeHashTests {
    /// Published RIHS01 hashes (Jazzy's installed type descriptions).
    @Test(
        arguments: [
            ("std_msgs/msg/String", "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18"),
            ("sensor_msgs/msg/Imu", "RIHS01_7d9a00ff131080897a5ec7e26e315954b8eae3353c3f995c55faf71574000b5b"),
            (
                "sensor_msgs/msg/MagneticField",
                "RIHS01_e80f32f56a20486c9923008fc1a1db07bbb273cbbf6a5b3bfa00835ee00e4dff"
            ),
        ])
    func matchesROS2(_ type: String, _ hash: String) {
        #expect(TypeHashes.rihs01(type) == hash)
    }

    @Test func unknownTypesHaveNone() {
        #expect(TypeHashes.rihs01("no_such_pkg/msg/Thing") == nil)
    }
}
