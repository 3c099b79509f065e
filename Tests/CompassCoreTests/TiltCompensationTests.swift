import Testing
import CompassCore

@Suite("Tilt-compensated and flat compass")
struct TiltCompensationTests {
    @Test("flat formula error grows with pitch as the issue's table says")
    func flatFormulaErrors() {
        let expected: [(pitch: Double, error: Double)] = [
            (0, 0.00), (5, -4.72), (10, -8.09), (20, -12.46), (40, -16.65), (60, -18.13),
        ]
        for (pitch, error) in expected {
            let q = Quaternion(headingDegrees: 30, pitchDegrees: pitch, rollDegrees: 0)
            let (field, force) = idealReadings(q)
            let flat = try! #require(FlatCompass.headingDegrees(field: field))
            let measured = signedDegrees(flat - 30)
            #expect(abs(measured - error) < 0.005, "pitch \(pitch): flat error \(measured), expected \(error)")
            let tilt = try! #require(TiltCompensatedCompass.headingDegrees(field: field, specificForce: force))
            #expect(abs(signedDegrees(tilt - 30)) < 1e-9)
        }
    }

    @Test(
        "tilt-compensated heading is exact at arbitrary attitudes",
        arguments: [(0.0, 0.0, 0.0), (90, 30, 0), (200, -45, 20), (315, 70, -35)])
    func tiltCompensatedExact(attitude: (Double, Double, Double)) throws {
        let q = Quaternion(headingDegrees: attitude.0, pitchDegrees: attitude.1, rollDegrees: attitude.2)
        let (field, force) = idealReadings(q)
        let reading = try TiltCompensatedCompass.reading(field: field, specificForce: force).get()
        #expect(abs(signedDegrees(reading.headingDegrees - attitude.0)) < 1e-9)
        #expect(abs(reading.dipDegrees - 66) < 1e-9)
        #expect(abs(reading.fieldStrength - 48) < 1e-9)
        // The implied orientation is the true one.
        #expect(reading.orientation.angularDistance(to: q) < 1e-9)
        #expect(abs(signedDegrees(q.headingDegrees! - attitude.0)) < 1e-9)
    }

    @Test("bad input is refused with a reason, never a NaN heading")
    func badInput() {
        let g = gravityUp
        let m = testEarthField
        #expect(
            TiltCompensatedCompass.reading(field: Vector3(.nan, 0, 0), specificForce: g)
                == .failure(.nonFinite(input: "magnetic field")))
        #expect(
            TiltCompensatedCompass.reading(field: m, specificForce: Vector3(0, .infinity, 0))
                == .failure(.nonFinite(input: "specific force")))
        #expect(
            TiltCompensatedCompass.reading(field: .zero, specificForce: g)
                == .failure(.zeroVector(input: "magnetic field")))
        #expect(
            TiltCompensatedCompass.reading(field: m, specificForce: .zero)
                == .failure(.zeroVector(input: "specific force")))
        if case .failure(.fieldParallelToGravity) = TiltCompensatedCompass.reading(
            field: Vector3(0, 0, -40), specificForce: g)
        {
        } else {
            Issue.record("a vertical field must be refused")
        }
        #expect(TiltCompensatedCompass.headingDegrees(field: Vector3(0, 0, -40), specificForce: g) == nil)
        #expect(FlatCompass.headingDegrees(field: Vector3(0, 0, 5)) == nil)
        #expect(FlatCompass.headingDegrees(field: Vector3(.nan, 1, 0)) == nil)
        // Every attitude and field gives a finite heading or nil.
        for q in randomAttitudes(count: 500, maxTiltDegrees: 180, seed: 3) {
            let (f, a) = idealReadings(q)
            if let h = TiltCompensatedCompass.headingDegrees(field: f, specificForce: a) {
                #expect(h.isFinite && h >= 0 && h < 360)
            }
        }
    }

    @Test("angle helpers wrap into the documented ranges")
    func wrapping() {
        #expect(normalizedDegrees(-1e-15) == 0 || normalizedDegrees(-1e-15) < 360)
        #expect(normalizedDegrees(720) == 0)
        #expect(normalizedDegrees(-90) == 270)
        #expect(signedDegrees(190) == -170)
        #expect(signedDegrees(-190) == 170)
        #expect(abs(signedRadians(3 * Double.pi) + Double.pi) < 1e-12)
    }
}

@Suite("Quaternion and matrix algebra")
struct AlgebraTests {
    @Test("matrix and quaternion agree, round trips hold")
    func roundTrips() {
        for q in randomAttitudes(count: 200, maxTiltDegrees: 180, seed: 9) {
            let m = q.rotationMatrix
            let back = Quaternion(rotationMatrix: m)
            #expect(back.angularDistance(to: q) < 1e-12)
            let v = Vector3(0.3, -1.2, 2.5)
            #expect((m * v - q.rotate(v)).norm < 1e-12)
            #expect((q.inverseRotate(q.rotate(v)) - v).norm < 1e-12)
            #expect((Quaternion(rotationVector: q.rotationVector)).angularDistance(to: q) < 1e-12)
            #expect(abs(m.determinant - 1) < 1e-12)
            let inv = m.inverse!
            #expect(((inv * m) * v - v).norm < 1e-12)
        }
        #expect(Matrix3(1, 2, 3, 2, 4, 6, 0, 0, 1).inverse == nil)
    }

    @Test("symmetric eigen-decomposition reconstructs the matrix")
    func eigen() throws {
        let a = Matrix3(4, 1, 0.5, 1, 3, -0.2, 0.5, -0.2, 2)
        let e = try #require(SymmetricEigen3(a))
        #expect(e.values.x <= e.values.y && e.values.y <= e.values.z)
        let rebuilt = e.applying { $0 }
        for r in 0..<3 { for c in 0..<3 { #expect(abs(rebuilt[r, c] - a[r, c]) < 1e-12) } }
        let root = e.applying { $0.squareRoot() }
        let sq = root * root
        for r in 0..<3 { for c in 0..<3 { #expect(abs(sq[r, c] - a[r, c]) < 1e-12) } }
    }

    @Test("least squares refuses rank deficiency and non-finite input")
    func leastSquaresFailures() {
        // Two identical columns.
        let a: [Double] = [1, 1, 2, 2, 3, 3, 4, 4]
        if case .failure(.rankDeficient) = LeastSquares.solve(rowMajor: a, unknowns: 2, rhs: [1, 2, 3, 4]) {
        } else {
            Issue.record("rank-deficient design must be refused")
        }
        #expect(LeastSquares.solve(rowMajor: [1, .nan], unknowns: 1, rhs: [1, 2]).isFailure)
        #expect(LeastSquares.solve(rowMajor: [1], unknowns: 2, rhs: [1]).isFailure)
        let ok = try? LeastSquares.solve(rowMajor: [1, 0, 0, 1, 1, 1], unknowns: 2, rhs: [1, 2, 3]).get()
        #expect(ok != nil && abs(ok!.x[0] - 1) < 1e-12 && abs(ok!.x[1] - 2) < 1e-12)
    }
}

extension Result {
    var isFailure: Bool { if case .failure = self { return true } else { return false } }
}
