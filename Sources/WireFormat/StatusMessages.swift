import CompassCore

/// gyrocompass_msgs/msg/CalibrationStatus (gyrocompass_msgs/msg/CalibrationStatus.msg).
public struct CalibrationStatusMessage: RosMessage, Equatable {
    public static let typeName = "gyrocompass_msgs/msg/CalibrationStatus"
    public var header: RosHeader
    /// OnlineCalibrator.State raw value.
    public var state: UInt8
    /// The user should make the figure-eight motion now (and showing it is allowed).
    public var prompt: Bool
    /// Percent toward the next calibration.
    public var progress: Double
    /// Fraction of directions seen, 0...1.
    public var coverage: Double
    /// Microtesla; NaN before the first fit.
    public var rmsResidual: Double
    /// Calibrated radius, microtesla; NaN before the first fit.
    public var fieldStrength: Double
    /// Microtesla.
    public var hardIron: Vector3
    public var softIron: Covariance9
    /// rad/s measured at rest; NaN when never at rest.
    public var gyroBias: Vector3

    public init(
        header: RosHeader, state: UInt8, prompt: Bool, progress: Double, coverage: Double, rmsResidual: Double,
        fieldStrength: Double, hardIron: Vector3, softIron: Covariance9, gyroBias: Vector3
    ) {
        self.header = header
        self.state = state
        self.prompt = prompt
        self.progress = progress
        self.coverage = coverage
        self.rmsResidual = rmsResidual
        self.fieldStrength = fieldStrength
        self.hardIron = hardIron
        self.softIron = softIron
        self.gyroBias = gyroBias
    }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        header = try RosHeader(&r)
        state = try r.uint8("state")
        prompt = try r.uint8("prompt") != 0
        progress = try r.float64("progress")
        coverage = try r.float64("coverage")
        rmsResidual = try r.float64("rms_residual")
        fieldStrength = try r.float64("field_strength")
        hardIron = Vector3(try r.float64("hard_iron.x"), try r.float64("hard_iron.y"), try r.float64("hard_iron.z"))
        softIron = try Covariance9(&r, "soft_iron")
        gyroBias = Vector3(try r.float64("gyro_bias.x"), try r.float64("gyro_bias.y"), try r.float64("gyro_bias.z"))
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 200)
        header.encode(&w)
        w.uint8(state)
        w.uint8(prompt ? 1 : 0)
        w.float64(progress)
        w.float64(coverage)
        w.float64(rmsResidual)
        w.float64(fieldStrength)
        w.float64(hardIron.x)
        w.float64(hardIron.y)
        w.float64(hardIron.z)
        softIron.encode(&w)
        w.float64(gyroBias.x)
        w.float64(gyroBias.y)
        w.float64(gyroBias.z)
        return w.take()
    }
}

/// gyrocompass_msgs/msg/InterferenceStatus (gyrocompass_msgs/msg/InterferenceStatus.msg).
public struct InterferenceStatusMessage: RosMessage, Equatable {
    public static let typeName = "gyrocompass_msgs/msg/InterferenceStatus"
    public var header: RosHeader
    public var disturbed: Bool
    /// Bits 0-15 of the `FusionFlags` (magnetic reasons), as Heading's `flags`.
    public var flags: UInt16
    /// `MagnetometerVerdictReason` bits, as Heading's `reasons`.
    public var reasons: UInt32
    public var samplesAssessed: UInt32
    public var samplesFlagged: UInt32
    /// The filter's flags `flags` and `reasons` carry, as Heading's `fusionFlags`.
    public var fusionFlags: FusionFlags { HeadingMessage.fusionFlags(flags, reasons: reasons) }
    /// `samplesFlagged` as a share of `samplesAssessed`, percent (0 before any).
    public var flaggedPercent: Double {
        samplesAssessed > 0 ? 100 * Double(samplesFlagged) / Double(samplesAssessed) : 0
    }
    public var disturbedPeriods: UInt32
    public var disturbedSeconds: Double
    /// Microtesla and degrees; NaN while unknown.
    public var expectedStrength: Double
    public var expectedDip: Double

    public init(
        header: RosHeader, disturbed: Bool, flags: UInt16, samplesAssessed: UInt32, samplesFlagged: UInt32,
        disturbedPeriods: UInt32, disturbedSeconds: Double, expectedStrength: Double, expectedDip: Double,
        reasons: UInt32? = nil
    ) {
        self.header = header
        self.disturbed = disturbed
        self.flags = flags
        self.reasons = reasons ?? HeadingMessage.reasons(inFlags: flags)
        self.samplesAssessed = samplesAssessed
        self.samplesFlagged = samplesFlagged
        self.disturbedPeriods = disturbedPeriods
        self.disturbedSeconds = disturbedSeconds
        self.expectedStrength = expectedStrength
        self.expectedDip = expectedDip
    }

    public init(cdr: UnsafeRawBufferPointer) throws(CDRError) {
        var r = try CDRReader(cdr)
        header = try RosHeader(&r)
        disturbed = try r.uint8("disturbed") != 0
        flags = try r.uint16("flags")
        samplesAssessed = try r.uint32("samples_assessed")
        samplesFlagged = try r.uint32("samples_flagged")
        disturbedPeriods = try r.uint32("disturbed_periods")
        disturbedSeconds = try r.float64("disturbed_seconds")
        expectedStrength = try r.float64("expected_strength")
        expectedDip = try r.float64("expected_dip")
        // Before gyrocompass_msgs 0.4.0 the message ended here.
        reasons =
            try r.appendedUInt32("reasons")
            ?? HeadingMessage.reasons(inFlags: flags)
    }

    public func cdr() -> [UInt8] {
        var w = CDRWriter(capacity: 96)
        header.encode(&w)
        w.uint8(disturbed ? 1 : 0)
        w.uint16(flags)
        w.uint32(samplesAssessed)
        w.uint32(samplesFlagged)
        w.uint32(disturbedPeriods)
        w.float64(disturbedSeconds)
        w.float64(expectedStrength)
        w.float64(expectedDip)
        w.uint32(reasons)
        return w.take()
    }
}

extension CalibrationStatusMessage: JSONRepresentable {
    public var json: String {
        "{\"header\":\(JSONText.header(header)),\"state\":\(state),\"prompt\":\(prompt),"
            + "\"progress\":\(JSONText.number(progress)),"
            + "\"coverage\":\(JSONText.number(coverage)),\"rms_residual\":\(JSONText.number(rmsResidual)),"
            + "\"field_strength\":\(JSONText.number(fieldStrength)),\"hard_iron\":\(JSONText.vector(hardIron)),"
            + "\"soft_iron\":\(JSONText.array(softIron)),\"gyro_bias\":\(JSONText.vector(gyroBias))}"
    }
}

extension InterferenceStatusMessage: JSONRepresentable {
    public var json: String {
        "{\"header\":\(JSONText.header(header)),\"disturbed\":\(disturbed),\"flags\":\(flags),"
            + "\"samples_assessed\":\(samplesAssessed),"
            + "\"samples_flagged\":\(samplesFlagged),\"disturbed_periods\":\(disturbedPeriods),"
            + "\"disturbed_seconds\":\(JSONText.number(disturbedSeconds)),"
            + "\"expected_strength\":\(JSONText.number(expectedStrength)),"
            + "\"expected_dip\":\(JSONText.number(expectedDip)),\"reasons\":\(reasons),"
            + "\"flag_names\":\(JSONText.strings(HeadingMessage.flagNames(flags, reasons: reasons)))}"
    }
}
