import CompassCore

/// geometry_msgs/msg/QuaternionStamped: the heading for ROS users who will not build
/// gyrocompass_msgs, as a rotation about the vertical only (roll and pitch left out).
public struct QuaternionStampedMessage: RosMessage, Equatable {
    public static let typeName = "geometry_msgs/msg/QuaternionStamped"
    public var header: RosHeader
    public var quaternion: Quaternion

    public init(header: RosHeader, quaternion: Quaternion) {
        self.header = header
        self.quaternion = quaternion
    }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        header = try RosHeader(&r)
        let x = try r.float64("quaternion.x"), y = try r.float64("quaternion.y")
        let z = try r.float64("quaternion.z"), w = try r.float64("quaternion.w")
        quaternion = Quaternion(w: w, x: x, y: y, z: z)
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 80)
        header.encode(&w)
        w.float64(quaternion.x)
        w.float64(quaternion.y)
        w.float64(quaternion.z)
        w.float64(quaternion.w)
        return w.take()
    }
}

/// geometry_msgs/msg/Vector3Stamped: a vector with its frame and time (calibration/motor carries the
/// motors' field per ampere in it).
public struct Vector3StampedMessage: RosMessage, Equatable {
    public static let typeName = "geometry_msgs/msg/Vector3Stamped"
    public var header: RosHeader
    public var vector: Vector3

    public init(header: RosHeader, vector: Vector3) {
        self.header = header
        self.vector = vector
    }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        header = try RosHeader(&r)
        let x = try r.float64("vector.x"), y = try r.float64("vector.y"), z = try r.float64("vector.z")
        vector = Vector3(x, y, z)
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 72)
        header.encode(&w)
        w.float64(vector.x)
        w.float64(vector.y)
        w.float64(vector.z)
        return w.take()
    }
}

/// tf2_msgs/msg/TFMessage with geometry_msgs/msg/TransformStamped entries: what /tf carries.
public struct TFMessage: RosMessage, Equatable {
    public static let typeName = "tf2_msgs/msg/TFMessage"

    /// One transform: `header.frame_id` is the parent frame, `childFrameId` the moving one.
    public struct Transform: Sendable, Equatable {
        public var header: RosHeader
        public var childFrameId: String
        /// Metres.
        public var translation: Vector3
        public var rotation: Quaternion
        public init(header: RosHeader, childFrameId: String, translation: Vector3, rotation: Quaternion) {
            self.header = header
            self.childFrameId = childFrameId
            self.translation = translation
            self.rotation = rotation
        }
    }

    public var transforms: [Transform]

    public init(transforms: [Transform]) { self.transforms = transforms }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        let count = try r.uint32("transforms.length")
        // Each entry is at least 64 bytes: a count larger than the rest of the buffer is damage.
        guard Int(count) <= cdr.count / 64 else {
            throw CDRError.lengthTooLarge(field: "transforms", length: Int(count), offset: 4)
        }
        transforms = []
        for _ in 0..<count {
            let header = try RosHeader(&r)
            let child = try r.string("child_frame_id")
            let t = Vector3(
                try r.float64("translation.x"), try r.float64("translation.y"), try r.float64("translation.z"))
            let x = try r.float64("rotation.x"), y = try r.float64("rotation.y")
            let z = try r.float64("rotation.z"), w = try r.float64("rotation.w")
            transforms.append(
                Transform(
                    header: header, childFrameId: child, translation: t, rotation: Quaternion(w: w, x: x, y: y, z: z)))
        }
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 24 + transforms.count * 128)
        w.uint32(UInt32(transforms.count))
        for t in transforms {
            t.header.encode(&w)
            w.string(t.childFrameId)
            w.float64(t.translation.x)
            w.float64(t.translation.y)
            w.float64(t.translation.z)
            w.float64(t.rotation.x)
            w.float64(t.rotation.y)
            w.float64(t.rotation.z)
            w.float64(t.rotation.w)
        }
        return w.take()
    }
}

/// geometry_msgs/msg/TwistWithCovarianceStamped as a GNSS receiver's velocity (`vel` from
/// nmea_navsat_driver, ublox_gps, septentrio): `linear` is the velocity in ENU (east, north, up),
/// m/s; the 6x6 covariance's first three diagonal entries are its variances, (m/s)^2 (0 or negative:
/// not given).
public struct TwistWithCovarianceStampedMessage: RosMessage, Equatable {
    public static let typeName = "geometry_msgs/msg/TwistWithCovarianceStamped"
    public var header: RosHeader
    public var linear: Vector3
    public var angular: Vector3
    /// Row-major 6x6 (linear x, y, z, then angular x, y, z).
    public var covariance: [Double]

    public init(header: RosHeader, linear: Vector3, angular: Vector3 = .zero, covariance: [Double]) {
        self.header = header
        self.linear = linear
        self.angular = angular
        self.covariance = covariance
    }

    /// A velocity with the same variance on both horizontal axes and `verticalVariance` on up.
    public init(header: RosHeader, velocityENU: Vector3, horizontalVariance: Double, verticalVariance: Double) {
        var c = [Double](repeating: 0, count: 36)
        c[0] = horizontalVariance
        c[7] = horizontalVariance
        c[14] = verticalVariance
        self.init(header: header, linear: velocityENU, covariance: c)
    }

    /// The larger horizontal variance, (m/s)^2; NaN when the message gives none.
    public var horizontalVariance: Double {
        let v = max(covariance[0], covariance[7])
        return v > 0 ? v : .nan
    }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        header = try RosHeader(&r)
        linear = Vector3(
            try r.float64("twist.linear.x"), try r.float64("twist.linear.y"), try r.float64("twist.linear.z"))
        angular = Vector3(
            try r.float64("twist.angular.x"), try r.float64("twist.angular.y"), try r.float64("twist.angular.z"))
        var c = [Double]()
        c.reserveCapacity(36)
        for _ in 0..<36 { c.append(try r.float64("twist.covariance")) }
        covariance = c
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 400 + header.frameId.utf8.count)
        header.encode(&w)
        for v in [linear.x, linear.y, linear.z, angular.x, angular.y, angular.z] { w.float64(v) }
        for i in 0..<36 { w.float64(i < covariance.count ? covariance[i] : 0) }
        return w.take()
    }
}
