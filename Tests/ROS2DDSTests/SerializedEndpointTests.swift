import Foundation
import Testing
@testable import ROS2DDS

/// Serialized writers and readers through a real Cyclone domain (two participants of this process).
@Suite(.serialized) struct SerializedEndpointTests {
    static let domain: UInt32 = 77

    func uniqueTopic(_ stem: String) -> String { "gyrocompass_test/\(stem)_\(UInt32.random(in: 0...UInt32.max))" }

    func waitUntil(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if condition() { return true }
            usleep(2000)
        }
        return condition()
    }

    @Test func everyMessageArrivesWithItsBytes() throws {
        let a = try DomainParticipant(domainId: Self.domain)
        let b = try DomainParticipant(domainId: Self.domain)
        let qos = ROS2QoS(reliability: .reliable, history: .keepAll)
        let topic = try ROS2Topic(uniqueTopic("bytes"), type: "sensor_msgs/msg/Imu", qos: qos)
        let reader = try SerializedReader(b, topic)
        let writer = try SerializedWriter(a, topic)
        #expect(waitUntil { writer.matchedReaders == 1 && reader.matchedWriters == 1 })
        var sent: [[UInt8]] = []
        for i in 0..<2000 {
            // Encapsulation header, then bodies of every length 0...300 (odd ones need padding on the wire).
            let body = (0..<(i % 301)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) }
            sent.append([0, 1, 0, 0] + body)
            try writer.write(sent.last!)
        }
        var got: [SerializedSample] = []
        let waitSet = try ReaderWaitSet(b, readers: [reader])
        let deadline = Date().addingTimeInterval(10)
        while got.count < sent.count && Date() < deadline {
            if try waitSet.wait(timeoutSeconds: 0.1) { try reader.take(into: &got) }
        }
        #expect(got.count == sent.count)
        #expect(got.map(\.bytes) == sent)
        #expect(zip(got, got.dropFirst()).allSatisfy { $0.sourceTimestamp <= $1.sourceTimestamp })
    }

    @Test func aReaderOfAnotherTypeIsToldWhy() throws {
        let a = try DomainParticipant(domainId: Self.domain)
        let b = try DomainParticipant(domainId: Self.domain)
        let name = uniqueTopic("typed")
        let writer = try SerializedWriter(
            a, try ROS2Topic(name, type: "sensor_msgs/msg/MagneticField", qos: .rosDefault))
        let wanted = try ROS2Topic(name, type: "sensor_msgs/msg/Imu", qos: .rosDefault)
        let reader = try SerializedReader(b, wanted)
        let discovery = try EndpointDiscovery(b, .publications)
        var why = ""
        #expect(
            waitUntil {
                why = discovery.whyNoPublisher(for: wanted, domainId: Self.domain)
                return why.contains("sensor_msgs/msg/MagneticField")
            })
        #expect(why.contains("expects sensor_msgs/msg/Imu"), "\(why)")
        #expect(reader.matchedWriters == 0)
        _ = writer
    }

    @Test func aReliableReaderOfABestEffortPublisherIsToldWhy() throws {
        let a = try DomainParticipant(domainId: Self.domain)
        let b = try DomainParticipant(domainId: Self.domain)
        let name = uniqueTopic("qos")
        let writer = try SerializedWriter(a, try ROS2Topic(name, type: "sensor_msgs/msg/Imu", qos: .sensorData))
        let wanted = try ROS2Topic(name, type: "sensor_msgs/msg/Imu", qos: .rosDefault)
        let reader = try SerializedReader(b, wanted)
        let discovery = try EndpointDiscovery(b, .publications)
        var why = ""
        #expect(
            waitUntil {
                why = discovery.whyNoPublisher(for: wanted, domainId: Self.domain)
                return why.contains("best_effort")
            })
        #expect(why.contains("asks for reliable"), "\(why)")
        #expect(waitUntil { reader.incompatibleWriters.count > 0 })
        #expect(reader.incompatibleWriters.policy == "reliability")
        _ = writer
    }

    @Test func nobodyPublishingIsSaid() throws {
        let b = try DomainParticipant(domainId: Self.domain)
        let wanted = try ROS2Topic(uniqueTopic("silent"), type: "sensor_msgs/msg/Imu", qos: .rosDefault)
        _ = try SerializedReader(b, wanted)
        let why = try EndpointDiscovery(b, .publications).whyNoPublisher(for: wanted, domainId: Self.domain)
        #expect(why.contains("no publisher seen in DDS domain 77"), "\(why)")
    }
}
