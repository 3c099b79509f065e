// swift-tools-version:6.0
// GyroCompass: gyro-compass sensor fusion. Dependencies point one way:
// CompassCore (pure math, no I/O) <- IMUSimulator <- ... <- fusion-node.
import PackageDescription

let package = Package(
    name: "GyroCompass",
    products: [
        .library(name: "CompassCore", targets: ["CompassCore"]),
        .library(name: "IMUSimulator", targets: ["IMUSimulator"]),
        .executable(name: "fusion-node", targets: ["FusionNode"]),
    ],
    targets: [
        // Core mathematics and algorithms: standard library only.
        .target(
            name: "CompassCore",
            swiftSettings: [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))],
            linkerSettings: [.linkedLibrary("m")]
        ),
        // Seeded, deterministic IMU + magnetometer simulator (product feature and test bed).
        .target(name: "IMUSimulator", dependencies: ["CompassCore"]),

        // Thin shims over Debian's C libraries. ZeroMQ omits pkgConfig on purpose: Debian's libzmq.pc
        // carries -isystem flags SwiftPM warns about, and the header lives in /usr/include anyway.
        .systemLibrary(
            name: "CZeroMQ", path: "Sources/CZeroMQ",
            providers: [.apt(["libzmq3-dev"])]),
        .systemLibrary(
            name: "CYAML", path: "Sources/CYAML", pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]),
        .systemLibrary(
            name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(
            name: "CZstd", path: "Sources/CZstd", pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"])]),
        .systemLibrary(
            name: "CLZ4", path: "Sources/CLZ4", pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]),
        // Eclipse Cyclone DDS 0.10 (the ROS 2 wire), and the C side of its serialized-bytes topic type
        // (the sertype interface is C structs of callbacks; DDS_NDEBUG matches Debian's build).
        // No pkgConfig: CycloneDDS.pc carries -DDDS_NDEBUG, which SwiftPM refuses as a flag; the headers
        // are in /usr/include and the C target defines DDS_NDEBUG itself.
        .systemLibrary(name: "CCycloneDDS", path: "Sources/CCycloneDDS", providers: [.apt(["cyclonedds-dev"])]),
        // libsodium (libzmq's CURVE is built on it): SHA-256 for ROS 2 type hashes.
        .systemLibrary(
            name: "CSodium", path: "Sources/CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .target(name: "DDSSerializedType", dependencies: ["CCycloneDDS"], cSettings: [.define("DDS_NDEBUG")]),
        // ncurses (wide characters) for the terminal compass, fusion-node watch.
        .systemLibrary(name: "CNcurses", path: "Sources/CNcurses", providers: [.apt(["libncurses-dev"])]),

        // Wire messages and their codecs (ROS 2 CDR, JSON).
        .target(name: "WireFormat", dependencies: ["CompassCore"], exclude: ["gyrocompass_msgs"]),
        // YAML documents (libyaml) as node trees with line and column marks.
        .target(name: "YAML", dependencies: ["CYAML"]),
        // The ZeroMQ bus: sockets and the wire frame.
        .target(name: "MessageBus", dependencies: ["WireFormat", "CZeroMQ", "CLZ4"]),
        // ROS 2 bags: MCAP (zstd, lz4) and sqlite3 storage.
        .target(name: "Bags", dependencies: ["WireFormat", "YAML", "CZstd", "CLZ4", "CSQLite"]),

        // ROS 2 on DDS: participants, QoS profiles, ROS names, serialized readers and writers, discovery.
        .target(name: "ROS2DDS", dependencies: ["WireFormat", "CCycloneDDS", "DDSSerializedType", "CSodium"]),

        // Pipeline stages (actors on their own threads), their configuration and the runtime.
        .target(
            name: "Pipeline",
            dependencies: ["CompassCore", "IMUSimulator", "WireFormat", "YAML", "Bags", "MessageBus", "ROS2DDS"]),

        .executableTarget(
            name: "FusionNode",
            dependencies: [
                "CompassCore", "IMUSimulator", "WireFormat", "YAML", "Bags", "MessageBus", "ROS2DDS", "Pipeline",
                "CZeroMQ",
                "CYAML", "CSQLite", "CZstd", "CLZ4", "CNcurses",
            ],
            swiftSettings: [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]
        ),

        .testTarget(name: "CompassCoreTests", dependencies: ["CompassCore", "IMUSimulator"]),
        .testTarget(name: "IMUSimulatorTests", dependencies: ["IMUSimulator", "CompassCore"]),
        .testTarget(name: "WireFormatTests", dependencies: ["WireFormat", "YAML", "CompassCore"]),
        .testTarget(
            name: "PipelineTests",
            dependencies: ["Pipeline", "MessageBus", "WireFormat", "Bags", "CompassCore", "IMUSimulator", "ROS2DDS"]),
        .testTarget(name: "MessageBusTests", dependencies: ["MessageBus", "WireFormat", "CZeroMQ"]),
        .testTarget(name: "ROS2DDSTests", dependencies: ["ROS2DDS", "WireFormat"]),
        .testTarget(name: "BagsTests", dependencies: ["Bags", "WireFormat", "CompassCore", "IMUSimulator"]),
    ],
    swiftLanguageModes: [.v6]
)
