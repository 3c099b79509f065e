import Foundation
import Testing
import CompassCore
@testable import WireFormat

@Suite("Heading message version 2: room for magnetometer verdict reasons")
struct MessageVersionTests {
    static let header = RosHeader(stamp: RosTime(sec: 7, nanosec: 8), frameId: "imu_link")

    static func heading(_ flags: FusionFlags, north: UInt16 = 0) -> HeadingMessage {
        let wire = HeadingMessage.wireFlags(flags, north: north)
        return HeadingMessage(
            header: header, magneticHeading: 12.5, trueHeading: .nan, headingAccuracy: 3, declination: .nan,
            orientation: Quaternion(w: 1, x: 0, y: 0, z: 0), magneticField: Vector3(20e-6, 0, -40e-6), source: 0,
            flags: wire.flags, reasons: wire.reasons)
    }

    /// The version 1 encoding (gyrocompass_msgs 0.3.0: everything up to `flags`), with `endPadding`
    /// zero bytes after it as rosidl writers pad a payload to 4 bytes.
    static func version1(_ h: HeadingMessage, endPadding: Int) -> [UInt8] {
        var w = CDRWriter(capacity: 160)
        h.header.encode(&w)
        for v in [h.magneticHeading, h.trueHeading, h.headingAccuracy, h.declination] { w.float64(v) }
        for v in [h.orientation.x, h.orientation.y, h.orientation.z, h.orientation.w] { w.float64(v) }
        for v in [h.magneticField.x, h.magneticField.y, h.magneticField.z] { w.float64(v) }
        w.uint8(h.source)
        w.uint16(h.flags)
        return w.take() + [UInt8](repeating: 0, count: endPadding)
    }

    @Test("each reason's wire bit is its place in the list, and the words round-trip")
    func reasonBits() {
        for (i, reason) in MagnetometerVerdictReason.allCases.enumerated() {
            #expect(reason.wireBit == 1 << UInt32(i))
            #expect(MagnetometerVerdictReason.wireReasons(reason.flag) == reason.wireBit)
            #expect(MagnetometerVerdictReason.flags(wireReasons: reason.wireBit) == reason.flag)
        }
        // Bits of reasons a newer writer knows and this build does not are ignored, not misread.
        #expect(MagnetometerVerdictReason.flags(wireReasons: 1 << 31).isEmpty)
    }

    @Test("version 2 round-trips; the reasons and the true-north bits stay apart")
    func roundTrip() throws {
        let flags: FusionFlags = [.magnetometerRejected, .magneticDipDisturbed, .magneticGyroInconsistent]
        let h = Self.heading(flags, north: HeadingMessage.flagNoPosition)
        #expect(h.reasons == MagnetometerVerdictReason.dip.wireBit | MagnetometerVerdictReason.gyroInconsistent.wireBit)
        let decoded = try HeadingMessage(cdrBytes: h.cdr())
        #expect(decoded.cdr() == h.cdr() && decoded.reasons == h.reasons)
        #expect(decoded.fusionFlags == flags)
        #expect(HeadingMessage.flagNames(decoded.flags, reasons: decoded.reasons).contains("no_position"))
        let json = try #require(try jsonFromCDR(type: HeadingMessage.typeName, h.cdr()))
        #expect(json.contains("\"reasons\":\(h.reasons)"))
    }

    @Test("a version 1 payload, padded or not, reads with the reasons its flags hold", arguments: [0, 1, 2, 3])
    func readsVersion1(endPadding: Int) throws {
        let h = Self.heading([.magnetometerRejected, .magneticStrengthDisturbed])
        let decoded = try HeadingMessage(cdrBytes: Self.version1(h, endPadding: endPadding))
        #expect(decoded.flags == h.flags)
        #expect(decoded.reasons == MagnetometerVerdictReason.strength.wireBit)
        #expect(decoded.fusionFlags == [.magnetometerRejected, .magneticStrengthDisturbed])
    }

    @Test("a version 2 payload starts with the version 1 fields, so readers that stop at flags read it")
    func version1ReadersReadVersion2() {
        let h = Self.heading([.magnetometerRejected, .magneticGyroInconsistent])
        let old = Self.version1(h, endPadding: 0)
        #expect(Array(h.cdr().prefix(old.count)) == old)
    }

    @Test("the interference status carries the same reasons, and reads the older layout")
    func interferenceStatus() throws {
        let wire = HeadingMessage.wireFlags([.magnetometerRejected, .magneticDipDisturbed])
        let status = InterferenceStatusMessage(
            header: Self.header, disturbed: true, flags: wire.flags, samplesAssessed: 10, samplesFlagged: 4,
            disturbedPeriods: 1, disturbedSeconds: 0.5, expectedStrength: 48, expectedDip: 66, reasons: wire.reasons)
        let bytes = status.cdr()
        #expect(try InterferenceStatusMessage(cdrBytes: bytes) == status)
        let older = try InterferenceStatusMessage(cdrBytes: Array(bytes.dropLast(4)))
        #expect(older.reasons == MagnetometerVerdictReason.dip.wireBit)
        #expect(older.fusionFlags == [.magnetometerRejected, .magneticDipDisturbed])
    }

    @Test("Heading.msg declares each reason's REASON_ constant with its wire bit")
    func reasonConstantsInTheMessageFile() throws {
        let file = try String(
            contentsOf: MessageFileTests.folder.appendingPathComponent("Heading.msg"), encoding: .utf8)
        let constants = MessageFileTests.significant(file).filter { $0.hasPrefix("uint32 REASON_") }
        let expected = MagnetometerVerdictReason.allCases.map { reason in
            let name = FusionFlags.names.first { $0.0 == reason.flag }!.1
            return
                "uint32 REASON_\(name.replacingOccurrences(of: "magnetic_", with: "").uppercased())=\(reason.wireBit)"
        }
        #expect(constants == expected)
    }
}
