/// sensor_msgs/msg/BatteryState: the pipeline carries a motor current in it (topic `motor/current`).
/// ROS's sign: `current` is negative while the battery discharges, so the current the motors draw is
/// `-current`. Unmeasured values are NaN.
public struct BatteryStateMessage: RosMessage, Equatable {
    public static let typeName = "sensor_msgs/msg/BatteryState"
    public var header: RosHeader
    /// Volts, degrees Celsius, amperes (negative while discharging), ampere-hours, 0...1.
    public var voltage: Float, temperature: Float, current: Float
    public var charge: Float, capacity: Float, designCapacity: Float, percentage: Float
    public var powerSupplyStatus: UInt8, powerSupplyHealth: UInt8, powerSupplyTechnology: UInt8
    public var present: Bool
    public var cellVoltage: [Float], cellTemperature: [Float]
    public var location: String, serialNumber: String

    /// A message that carries only a current drawn, amperes (positive while the motors draw).
    public init(header: RosHeader, drawnAmperes: Double) {
        self.header = header
        voltage = .nan
        temperature = .nan
        current = Float(-drawnAmperes)
        charge = .nan
        capacity = .nan
        designCapacity = .nan
        percentage = .nan
        powerSupplyStatus = 2  // discharging
        powerSupplyHealth = 0
        powerSupplyTechnology = 0
        present = true
        cellVoltage = []
        cellTemperature = []
        location = ""
        serialNumber = ""
    }

    /// The current the motors draw, amperes: `-current` (ROS counts discharge negative).
    public var drawnAmperes: Double { -Double(current) }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        header = try RosHeader(&r)
        voltage = try r.float32("voltage")
        temperature = try r.float32("temperature")
        current = try r.float32("current")
        charge = try r.float32("charge")
        capacity = try r.float32("capacity")
        designCapacity = try r.float32("design_capacity")
        percentage = try r.float32("percentage")
        powerSupplyStatus = try r.uint8("power_supply_status")
        powerSupplyHealth = try r.uint8("power_supply_health")
        powerSupplyTechnology = try r.uint8("power_supply_technology")
        present = try r.uint8("present") != 0
        cellVoltage = try Self.floats(&r, "cell_voltage")
        cellTemperature = try Self.floats(&r, "cell_temperature")
        location = try r.string("location")
        serialNumber = try r.string("serial_number")
    }

    static func floats(_ r: inout CDRReader, _ field: String) throws(CDRError) -> [Float] {
        let count = Int(try r.uint32(field))
        // Each element takes 4 bytes: a count the payload cannot hold is refused before allocating.
        guard count <= r.remaining / 4 else { throw .lengthTooLarge(field: field, length: count, offset: r.offset - 4) }
        var out: [Float] = []
        out.reserveCapacity(count)
        for _ in 0..<count { out.append(try r.float32(field)) }
        return out
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 96 + header.frameId.utf8.count + 4 * (cellVoltage.count + cellTemperature.count))
        header.encode(&w)
        for v in [voltage, temperature, current, charge, capacity, designCapacity, percentage] { w.float32(v) }
        w.uint8(powerSupplyStatus)
        w.uint8(powerSupplyHealth)
        w.uint8(powerSupplyTechnology)
        w.uint8(present ? 1 : 0)
        for list in [cellVoltage, cellTemperature] {
            w.uint32(UInt32(list.count))
            for v in list { w.float32(v) }
        }
        w.string(location)
        w.string(serialNumber)
        return w.take()
    }
}

/// The value of a std_msgs/msg/Float32 or Float64 payload (a current in amperes, as ESC telemetry
/// and power modules publish it), or nil for another type.
public func standardFloatValue(type: String, cdr: UnsafeRawBufferPointer) throws(CDRError) -> Double? {
    var r = try CDRReader(cdr)
    switch type {
    case "std_msgs/msg/Float32": return Double(try r.float32("data"))
    case "std_msgs/msg/Float64": return try r.float64("data")
    default: return nil
    }
}
