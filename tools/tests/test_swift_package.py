"""GyroCompass as a Swift package dependency, the way an app adds it: a consumer package that depends on
a tagged clone of this repository by version (`.package(url:, from:)`) and uses the `CompassCore` and
`IMUSimulator` products. SwiftPM refuses library targets with unsafe build flags in a versioned
dependency, so this fails if one comes back; the consumer's filter must also find a heading.
"""
import re, subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONSUMER_MAIN = """
import CompassCore
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// A level device turning about the vertical at 0.5 rad/s for 20 s in a 48 uT field (dip 60 degrees).
let earth = Vector3(0, 24, -41.6)
var filter = KalmanFilter(settings: KalmanFilterSettings())
var worst = 0.0
for k in 0..<2000 {
    let t = Double(k) / 100, yaw = 0.5 * t
    let (c, s) = (cos(yaw), sin(yaw))
    let field = Vector3(c * earth.x + s * earth.y, -s * earth.x + c * earth.y, earth.z)
    let imu = ImuSample(timestamp: t, angularVelocity: Vector3(0, 0, 0.5), specificForce: Vector3(0, 0, 9.81))
    let out = filter.update(imu: imu, magnetometer: MagnetometerSample(timestamp: t, fieldMicrotesla: field))
    // The x axis points east at yaw 0 and turns anticlockwise seen from above.
    let truth = (90 - yaw * 180 / .pi).truncatingRemainder(dividingBy: 360)
    if t > 10, let h = out?.headingDegrees {
        let e = abs(remainder(h - truth, 360))
        worst = max(worst, e)
    }
}
print("worst heading error after 10 s: \\(worst) deg")
"""


def version():
    text = (ROOT / 'CHANGELOG.md').read_text()
    return re.search(r'^## \[(\d+\.\d+\.\d+)\]', text, re.M).group(1)


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f'{cmd}: {p.stdout[-3000:]}\n{p.stderr[-3000:]}'
    return p.stdout


def test_a_consumer_package_builds_against_a_tagged_clone(tmp_path):
    clone = tmp_path / 'gyrocompass'
    run(['git', 'clone', '--quiet', '--no-local', str(ROOT), str(clone)], tmp_path)
    run(['git', '-c', 'user.name=t', '-c', 'user.email=t@example.org', 'tag', version()], clone)
    consumer = tmp_path / 'consumer'
    (consumer / 'Sources' / 'Consumer').mkdir(parents=True)
    (consumer / 'Package.swift').write_text(f"""// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "Consumer",
    dependencies: [.package(url: "file://{clone}", from: "{version()}")],
    targets: [
        .executableTarget(
            name: "Consumer",
            dependencies: [
                .product(name: "CompassCore", package: "gyrocompass"),
                .product(name: "IMUSimulator", package: "gyrocompass"),
            ])
    ]
)
""")
    (consumer / 'Sources' / 'Consumer' / 'main.swift').write_text(CONSUMER_MAIN)
    out = run(['swift', 'run', '--quiet', 'Consumer'], consumer)
    worst = float(re.search(r'worst heading error after 10 s: ([0-9.e+-]+) deg', out).group(1))
    assert worst < 3.0, out
    resolved = (consumer / 'Package.resolved').read_text()
    assert f'"version" : "{version()}"' in resolved, resolved
