import Testing
import CompassCore
@testable import WireFormat

@Suite("ros2msg schemas from bags")
struct SchemaTests {
    let header = RosHeader(stamp: RosTime(sec: 1_700_000_001, nanosec: 250_000_000), frameId: "imu_link")

    @Test("our definitions parse, with the layout ROS serialises")
    func layouts() throws {
        let imu = try MessageSchema(name: "sensor_msgs/msg/Imu", text: MessageDefinitions.imu)
        #expect(imu.layout.first == "header.stamp.sec:int32")
        #expect(imu.layout.contains("orientation_covariance:float64[9]"))
        #expect(imu.layout.contains("angular_velocity.z:float64"))
        #expect(imu.layout.count == 3 + 4 + 1 + 3 + 1 + 3 + 1)
        let fix = try MessageSchema(name: "sensor_msgs/msg/NavSatFix", text: MessageDefinitions.navSatFix)
        #expect(fix.layout.contains("status.status:int8") && !fix.layout.contains { $0.contains("STATUS_FIX") })
        _ = try MessageSchema(name: "gyrocompass_msgs/msg/Heading", text: MessageDefinitions.heading)
    }

    @Test("generic decoding through the schema equals the typed decoder")
    func genericDecode() throws {
        let m = ImuMessage(
            header: header, orientation: Quaternion(w: 0.9, x: 0.1, y: -0.2, z: 0.3),
            orientationCovariance: Covariance9((0..<9).map(Double.init)),
            angularVelocity: Vector3(0.1, 0.2, 0.3), angularVelocityCovariance: [],
            linearAcceleration: Vector3(0, 0.5, 9.8),
            linearAccelerationCovariance: Covariance9(repeating: 0.01))
        let schema = try MessageSchema(name: ImuMessage.typeName, text: MessageDefinitions.imu)
        let v = try schema.decode(m.cdr())
        #expect(v["header.stamp.sec"]?.double == 1_700_000_001 && v["header.stamp.nanosec"]?.double == 250_000_000)
        #expect(v["header.frame_id"] == .text("imu_link"))
        #expect(
            v["angular_velocity.y"]?.double == 0.2 && v["linear_acceleration.z"]?.double == 9.8
                && v["orientation.w"]?.double == 0.9)
        if case .list(let c)? = v["orientation_covariance"] {
            #expect(c.count == 9 && c[8] == .number(8))
        } else {
            Issue.record("covariance")
        }
        #expect(v.json.hasPrefix("{\"header\":{\"stamp\":{\"sec\":1700000001"))
        // Truncated payloads are refused, never a crash.
        let bytes = m.cdr()
        for n in stride(from: 0, to: bytes.count, by: 7) {
            #expect(throws: CDRError.self) { try schema.decode(Array(bytes.prefix(n))) }
        }
    }

    @Test("a schema that uses an undefined type is refused with the reason")
    func undefined() {
        #expect(throws: MessageSchema.SchemaError.self) { try MessageSchema(name: "a/msg/B", text: "c/D field\n") }
        do { _ = try MessageSchema(name: "a/msg/B", text: "c/D field\n") } catch {
            #expect(error.description.contains("c/D"))
        }
        #expect(throws: MessageSchema.SchemaError.self) { try MessageSchema(name: "a/msg/B", text: "float64[x] v\n") }
    }

    @Test("the adapter passes standard payloads through, re-lays out others, refuses missing fields")
    func adapter() throws {
        #expect(
            try SchemaAdapter(type: ImuMessage.typeName, schemaEncoding: "ros2msg", schemaText: MessageDefinitions.imu)
                .mode == .passThrough)
        #expect(try SchemaAdapter(type: ImuMessage.typeName, schemaEncoding: nil, schemaText: nil).mode == .passThrough)
        let reordered = Self.reorderedImuDefinition
        let a = try SchemaAdapter(type: ImuMessage.typeName, schemaEncoding: "ros2msg", schemaText: reordered)
        #expect(a.mode == .byName)
        let standard = try ImuMessage(
            cdrBytes: a.standardPayload(
                Self.reorderedImuPayload(header: header, gyro: Vector3(1, 2, 3), accel: Vector3(4, 5, 6))))
        #expect(
            standard.header == header && standard.angularVelocity == Vector3(1, 2, 3)
                && standard.linearAcceleration == Vector3(4, 5, 6))
        do {
            _ = try SchemaAdapter(
                type: ImuMessage.typeName, schemaEncoding: "ros2msg",
                schemaText: "std_msgs/Header header\n" + Self.headerDependencies)
            Issue.record("a definition without angular_velocity must be refused")
        } catch { #expect(error.description.contains("angular_velocity.x")) }
        #expect(throws: MessageSchema.SchemaError.self) {
            try SchemaAdapter(type: "std_msgs/msg/String", schemaEncoding: nil, schemaText: nil)
        }
    }

    static let headerDependencies = """
        ================================================================================
        MSG: std_msgs/Header
        builtin_interfaces/Time stamp
        string frame_id
        ================================================================================
        MSG: builtin_interfaces/Time
        int32 sec
        uint32 nanosec
        """

    /// A "sensor_msgs/msg/Imu" from a vendor stack: a temperature, then acceleration before rate.
    static let reorderedImuDefinition = """
        std_msgs/Header header
        float32 temperature
        geometry_msgs/Vector3 linear_acceleration
        geometry_msgs/Vector3 angular_velocity
        """ + "\n" + headerDependencies + """

            ================================================================================
            MSG: geometry_msgs/Vector3
            float64 x
            float64 y
            float64 z
            """

    static func reorderedImuPayload(header: RosHeader, gyro: Vector3, accel: Vector3) -> [UInt8] {
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

@Suite("Known interface definitions")
struct KnownInterfacesTests {
    @Test("every embedded definition parses with its dependencies, and the pipeline's own types are known")
    func allParse() throws {
        #expect(KnownInterfaces.ownDefinitions.count >= 90)
        for name in KnownInterfaces.ownDefinitions.keys.sorted() {
            let text = try #require(KnownInterfaces.definition(for: name))
            _ = try MessageSchema(name: name, text: text)
        }
        let twist = try MessageSchema(
            name: "geometry_msgs/msg/TwistStamped",
            text: KnownInterfaces.definition(for: "geometry_msgs/msg/TwistStamped")!)
        #expect(twist.layout.contains("twist.angular.z:float64"))
        #expect(KnownInterfaces.definition(for: "gyrocompass_msgs/msg/Heading") != nil)
        #expect(KnownInterfaces.definition(for: "nobody_msgs/msg/Nothing") == nil)
    }
}
