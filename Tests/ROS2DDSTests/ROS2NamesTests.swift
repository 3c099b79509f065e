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
