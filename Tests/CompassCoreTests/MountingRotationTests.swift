import Testing
import CompassCore

@Suite("Mounting rotations")
struct MountingRotationTests {
    func close(_ a: Vector3, _ b: Vector3, _ tolerance: Double = 1e-9) -> Bool { (a - b).norm < tolerance }

    @Test("yaw_90 is a sensor whose x axis points right; [0, 0, -90] is the same mounting")
    func yaw90() throws {
        let named = try #require(MountingRotation.named("yaw_90"))
        // A sensor x axis pointing right: in REP-103 body axes that is -y.
        #expect(close(named.apply(Vector3(1, 0, 0)), Vector3(0, -1, 0)))
        #expect(close(named.apply(Vector3(0, 0, 1)), Vector3(0, 0, 1)))
        let listed = MountingRotation.rollPitchYaw(degrees: 0, 0, -90)
        #expect(close(listed.apply(Vector3(0.3, -0.2, 0.9)), named.apply(Vector3(0.3, -0.2, 0.9))))
        // roll_180: upside down, z down and y right.
        let flipped = try #require(MountingRotation.named("roll_180"))
        #expect(close(flipped.apply(Vector3(0, 1, 1)), Vector3(0, -1, -1)))
    }

    @Test("every ArduPilot name is a proper rotation, the list is ArduPilot's 44, and names parse back")
    func allNames() throws {
        #expect(MountingRotation.names.count == 44 && Set(MountingRotation.names).count == 44)
        for name in MountingRotation.names {
            let r = try #require(MountingRotation.parse(name))
            let m = r.matrix
            let identity = m * m.transposed
            #expect(close(identity.row0, Vector3(1, 0, 0)) && close(identity.row1, Vector3(0, 1, 0)), "\(name)")
            #expect(abs(m.determinant - 1) < 1e-9, "\(name)")
        }
        #expect(MountingRotation.parse("yaw_91") == nil && MountingRotation.parse("1,2") == nil)
        #expect(MountingRotation.parse("10, 20, 30")?.description == "[10.0, 20.0, 30.0] deg")
    }

    @Test("roll_90_pitch_68_yaw_293 matches ArduPilot's matrix in its own forward-right-down axes")
    func oddOne() throws {
        // ArduPilot's published rows for this rotation (forward-right-down axes), to 1e-4.
        let published = [
            Vector3(0.143039, 0.368776, -0.918446), Vector3(-0.332133, -0.856289, -0.395546),
            Vector3(-0.932324, 0.361625, 0),
        ]
        let f = MountingRotation.matrix(rollDegrees: 90, pitchDegrees: 68.8, yawDegrees: 293.3)
        for (row, expected) in zip([f.row0, f.row1, f.row2], published) { #expect(close(row, expected, 2e-4)) }
        // And the REP-103 form is the same rotation: T F T with T = diag(1, -1, -1).
        let named = try #require(MountingRotation.named("roll_90_pitch_68_yaw_293")).matrix
        #expect(abs(named.m01 + f.m01) < 1e-12 && abs(named.m11 - f.m11) < 1e-12 && abs(named.m20 + f.m20) < 1e-12)
    }
}
