import CompassCore

/// builtin_interfaces/msg/Time.
public struct RosTime: Sendable, Equatable, Hashable {
    public var sec: Int32
    public var nanosec: UInt32
    public init(sec: Int32, nanosec: UInt32) {
        self.sec = sec
        self.nanosec = nanosec
    }
    /// From seconds (rounded to the nanosecond), clamped to what the stamp holds; NaN gives zero.
    public init(seconds: Double) {
        let seconds = seconds.isNaN ? 0 : min(max(seconds, Double(Int32.min)), Double(Int32.max))
        let whole = (seconds).rounded(.down)
        var ns = ((seconds - whole) * 1e9).rounded()
        var s = whole
        if ns >= 1e9 {
            ns -= 1e9
            s += 1
        }
        self.init(sec: Int32(clamping: Int64(s)), nanosec: UInt32(ns))
    }
    /// Seconds as a Double (ns resolution is kept to about 0.2 us for present-day epochs).
    public var seconds: Double { Double(sec) + Double(nanosec) * 1e-9 }
    /// Nanoseconds since the epoch.
    public var nanoseconds: Int64 { Int64(sec) * 1_000_000_000 + Int64(nanosec) }
}

/// std_msgs/msg/Header.
public struct RosHeader: Sendable, Equatable {
    public var stamp: RosTime
    public var frameId: String
    public init(stamp: RosTime, frameId: String) {
        self.stamp = stamp
        self.frameId = frameId
    }

    init(_ r: inout CDRReader) throws(CDRError) {
        stamp = RosTime(sec: try r.int32("header.stamp.sec"), nanosec: try r.uint32("header.stamp.nanosec"))
        frameId = try r.string("header.frame_id")
    }
    func encode(_ w: inout CDRWriter) {
        w.int32(stamp.sec)
        w.uint32(stamp.nanosec)
        w.string(frameId)
    }
}

/// A message type the wire knows, by its ROS name.
public protocol RosMessage: Sendable {
    /// e.g. "sensor_msgs/msg/Imu".
    static var typeName: String { get }
    init(cdr: UnsafeRawBufferPointer) throws(CDRError)
    func cdr() -> [UInt8]
}

extension RosMessage {
    /// Decodes from a byte array.
    @inlinable
    public init(cdrBytes: [UInt8]) throws(CDRError) {
        let result = cdrBytes.withUnsafeBytes { buffer in Result { () throws(CDRError) in try Self(cdr: buffer) } }
        self = try result.get()
    }

    /// Decodes from part of a byte array (a payload inside a received bus message).
    @inlinable
    public init(cdrBytes: ArraySlice<UInt8>) throws(CDRError) {
        let result = cdrBytes.withUnsafeBytes { buffer in Result { () throws(CDRError) in try Self(cdr: buffer) } }
        self = try result.get()
    }
}

/// sensor_msgs/msg/Imu (REP-145: rad/s, m/s^2; covariance[0] = -1 marks an absent field).
public struct ImuMessage: RosMessage, Equatable {
    public static let typeName = "sensor_msgs/msg/Imu"
    public var header: RosHeader
    /// x, y, z, w (ROS order).
    public var orientation: Quaternion
    public var orientationCovariance: Covariance9
    public var angularVelocity: Vector3
    public var angularVelocityCovariance: Covariance9
    public var linearAcceleration: Vector3
    public var linearAccelerationCovariance: Covariance9

    public init(
        header: RosHeader, orientation: Quaternion, orientationCovariance: Covariance9, angularVelocity: Vector3,
        angularVelocityCovariance: Covariance9, linearAcceleration: Vector3, linearAccelerationCovariance: Covariance9
    ) {
        self.header = header
        self.orientation = orientation
        self.orientationCovariance = orientationCovariance
        self.angularVelocity = angularVelocity
        self.angularVelocityCovariance = angularVelocityCovariance
        self.linearAcceleration = linearAcceleration
        self.linearAccelerationCovariance = linearAccelerationCovariance
    }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        header = try RosHeader(&r)
        let qx = try r.float64("orientation.x"), qy = try r.float64("orientation.y")
        let qz = try r.float64("orientation.z"), qw = try r.float64("orientation.w")
        orientation = Quaternion(w: qw, x: qx, y: qy, z: qz)
        orientationCovariance = try Covariance9(&r, "orientation_covariance")
        angularVelocity = Vector3(
            try r.float64("angular_velocity.x"), try r.float64("angular_velocity.y"),
            try r.float64("angular_velocity.z"))
        angularVelocityCovariance = try Covariance9(&r, "angular_velocity_covariance")
        linearAcceleration = Vector3(
            try r.float64("linear_acceleration.x"), try r.float64("linear_acceleration.y"),
            try r.float64("linear_acceleration.z"))
        linearAccelerationCovariance = try Covariance9(&r, "linear_acceleration_covariance")
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 360)
        header.encode(&w)
        w.float64(orientation.x)
        w.float64(orientation.y)
        w.float64(orientation.z)
        w.float64(orientation.w)
        orientationCovariance.encode(&w)
        w.float64(angularVelocity.x)
        w.float64(angularVelocity.y)
        w.float64(angularVelocity.z)
        angularVelocityCovariance.encode(&w)
        w.float64(linearAcceleration.x)
        w.float64(linearAcceleration.y)
        w.float64(linearAcceleration.z)
        linearAccelerationCovariance.encode(&w)
        return w.take()
    }

    /// The core sample (timestamp from the header stamp).
    public var sample: ImuSample {
        ImuSample(timestamp: header.stamp.seconds, angularVelocity: angularVelocity, specificForce: linearAcceleration)
    }
}

/// sensor_msgs/msg/MagneticField (tesla).
public struct MagneticFieldMessage: RosMessage, Equatable {
    public static let typeName = "sensor_msgs/msg/MagneticField"
    public var header: RosHeader
    /// Tesla, sensor frame.
    public var magneticField: Vector3
    public var magneticFieldCovariance: Covariance9

    public init(header: RosHeader, magneticField: Vector3, magneticFieldCovariance: Covariance9) {
        self.header = header
        self.magneticField = magneticField
        self.magneticFieldCovariance = magneticFieldCovariance
    }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        header = try RosHeader(&r)
        magneticField = Vector3(
            try r.float64("magnetic_field.x"), try r.float64("magnetic_field.y"), try r.float64("magnetic_field.z"))
        magneticFieldCovariance = try Covariance9(&r, "magnetic_field_covariance")
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 128)
        header.encode(&w)
        w.float64(magneticField.x)
        w.float64(magneticField.y)
        w.float64(magneticField.z)
        magneticFieldCovariance.encode(&w)
        return w.take()
    }

    /// The core sample in microtesla.
    public var sample: MagnetometerSample {
        MagnetometerSample(timestamp: header.stamp.seconds, fieldMicrotesla: magneticField * 1e6)
    }
}

/// sensor_msgs/msg/NavSatFix.
public struct NavSatFixMessage: RosMessage, Equatable {
    public static let typeName = "sensor_msgs/msg/NavSatFix"
    public var header: RosHeader
    /// NavSatStatus.status: -1 no fix, 0 fix, 1 SBAS, 2 GBAS.
    public var status: Int8
    public var service: UInt16
    public var latitude: Double
    public var longitude: Double
    /// Metres above the WGS-84 ellipsoid.
    public var altitude: Double
    public var positionCovariance: Covariance9
    public var positionCovarianceType: UInt8

    /// True when the position is on the earth: latitude within +-90 and longitude within +-180 degrees,
    /// the altitude unknown (NaN, as ROS allows) or between -1 km and 100 km. A receiver's fault (a
    /// longitude of -1e300) would otherwise choose the declination.
    public var isPlausiblePosition: Bool {
        (-90...90).contains(latitude) && (-180...180).contains(longitude)
            && (altitude.isNaN || (-1000...100_000).contains(altitude))
    }

    public init(
        header: RosHeader, status: Int8, service: UInt16, latitude: Double, longitude: Double, altitude: Double,
        positionCovariance: Covariance9, positionCovarianceType: UInt8
    ) {
        self.header = header
        self.status = status
        self.service = service
        self.latitude = latitude
        self.longitude = longitude
        self.altitude = altitude
        self.positionCovariance = positionCovariance
        self.positionCovarianceType = positionCovarianceType
    }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        header = try RosHeader(&r)
        status = try r.int8("status.status")
        service = try r.uint16("status.service")
        latitude = try r.float64("latitude")
        longitude = try r.float64("longitude")
        altitude = try r.float64("altitude")
        positionCovariance = try Covariance9(&r, "position_covariance")
        positionCovarianceType = try r.uint8("position_covariance_type")
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 160)
        header.encode(&w)
        w.int8(status)
        w.uint16(service)
        w.float64(latitude)
        w.float64(longitude)
        w.float64(altitude)
        positionCovariance.encode(&w)
        w.uint8(positionCovarianceType)
        return w.take()
    }
}

/// A ROS float64[9] covariance (row-major 3x3) held inline: no heap allocation per message.
public struct Covariance9: Sendable, Equatable, ExpressibleByArrayLiteral, CustomStringConvertible {
    public var m0 = 0.0, m1 = 0.0, m2 = 0.0, m3 = 0.0, m4 = 0.0, m5 = 0.0, m6 = 0.0, m7 = 0.0, m8 = 0.0

    public init() {}
    /// All zero ("known, no uncertainty given" in ROS terms). A constant: an array literal would
    /// allocate per message.
    public static let zero = Covariance9()
    /// -1 in the first entry: ROS's "this field is not provided".
    public static let notProvided: Covariance9 = {
        var c = Covariance9()
        c.m0 = -1
        return c
    }()
    /// All nine entries equal to `value`.
    public init(repeating value: Double) {
        m0 = value
        m1 = value
        m2 = value
        m3 = value
        m4 = value
        m5 = value
        m6 = value
        m7 = value
        m8 = value
    }
    /// From up to nine values, row-major; missing ones are 0 (an empty list means "all zero").
    public init(_ values: [Double]) {
        for (i, v) in values.prefix(9).enumerated() { self[i] = v }
    }
    public init(arrayLiteral elements: Double...) { self.init(elements) }

    public subscript(i: Int) -> Double {
        get {
            switch i {
            case 0: return m0
            case 1: return m1
            case 2: return m2
            case 3: return m3
            case 4: return m4
            case 5: return m5
            case 6: return m6
            case 7: return m7
            default: return m8
            }
        }
        set {
            switch i {
            case 0: m0 = newValue
            case 1: m1 = newValue
            case 2: m2 = newValue
            case 3: m3 = newValue
            case 4: m4 = newValue
            case 5: m5 = newValue
            case 6: m6 = newValue
            case 7: m7 = newValue
            default: m8 = newValue
            }
        }
    }

    public var array: [Double] { [m0, m1, m2, m3, m4, m5, m6, m7, m8] }
    public var description: String { array.description }

    init(_ r: inout CDRReader, _ field: String) throws(CDRError) {
        // Nine stored Doubles in declaration order, as `encode` writes them: one block.
        var c = Covariance9()
        try withUnsafeMutableBytes(of: &c) { (target) throws(CDRError) in try r.float64Block(into: target, field) }
        self = c
    }

    func encode(_ w: inout CDRWriter) {
        #if _endian(little)
            // Nine stored Doubles in declaration order: one aligned block copy.
            withUnsafeBytes(of: self) { w.float64Block($0) }
        #else
            w.float64(m0)
            w.float64(m1)
            w.float64(m2)
            w.float64(m3)
            w.float64(m4)
            w.float64(m5)
            w.float64(m6)
            w.float64(m7)
            w.float64(m8)
        #endif
    }
}
