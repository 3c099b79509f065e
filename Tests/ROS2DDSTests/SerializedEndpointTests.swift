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

    /// A writer of `offered` and a reader of `wanted` on one topic: what discovery says (once it says
    /// `until`), and the reader.
    func explanation(
        offered: (type: String, qos: ROS2QoS), wanted: (type: String, qos: ROS2QoS), until needle: String
    ) throws -> (why: String, reader: SerializedReader, keep: [AnyObject]) {
        let a = try DomainParticipant(domainId: Self.domain)
        let b = try DomainParticipant(domainId: Self.domain)
        let name = uniqueTopic("why")
        let writer = try SerializedWriter(a, try ROS2Topic(name, type: offered.type, qos: offered.qos))
        let topic = try ROS2Topic(name, type: wanted.type, qos: wanted.qos)
        let reader = try SerializedReader(b, topic)
        let discovery = try EndpointDiscovery(b, .publications)
        var why = ""
        _ = waitUntil {
            why = discovery.whyNoPublisher(for: topic, domainId: Self.domain)
            return why.contains(needle)
        }
        return (why, reader, [a, b, writer, discovery])
    }

    @Test func aReaderOfAnotherTypeIsToldWhy() throws {
        let (why, reader, keep) = try explanation(
            offered: ("sensor_msgs/msg/MagneticField", .rosDefault), wanted: ("sensor_msgs/msg/Imu", .rosDefault),
            until: "sensor_msgs/msg/MagneticField")
        #expect(why.contains("a publisher sends sensor_msgs/msg/MagneticField"), "\(why)")
        #expect(why.contains("expects sensor_msgs/msg/Imu"), "\(why)")
        #expect(reader.matchedWriters == 0)
        withExtendedLifetime(keep) {}
    }

    @Test func aReliableReaderOfABestEffortPublisherIsToldWhy() throws {
        let (why, reader, keep) = try explanation(
            offered: ("sensor_msgs/msg/Imu", .sensorData), wanted: ("sensor_msgs/msg/Imu", .rosDefault),
            until: "best_effort")
        #expect(why.contains("it publishes best_effort and this reader asks for reliable"), "\(why)")
        #expect(waitUntil { reader.incompatibleWriters.count > 0 })
        #expect(reader.incompatibleWriters.policy == "reliability")
        withExtendedLifetime(keep) {}
    }

    @Test func nobodyPublishingIsSaid() throws {
        let b = try DomainParticipant(domainId: Self.domain)
        let wanted = try ROS2Topic(uniqueTopic("silent"), type: "sensor_msgs/msg/Imu", qos: .rosDefault)
        _ = try SerializedReader(b, wanted)
        let why = try EndpointDiscovery(b, .publications).whyNoPublisher(for: wanted, domainId: Self.domain)
        #expect(why.contains("no publisher seen in DDS domain 77"), "\(why)")
    }
}
