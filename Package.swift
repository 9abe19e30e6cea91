// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "packager",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "OfflineBundle", targets: ["OfflineBundle"]),
        .library(name: "PackagerKit", targets: ["PackagerKit"]),
        .executable(name: "packager", targets: ["packager"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
    ],
    targets: [
        // zlib: the only C library the runtime links.
        .systemLibrary(
            name: "CZlib",
            providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
        ),
        // libarchive: build side only (extract, inspect, pack from archives, export).
        .systemLibrary(
            name: "CArchive",
            providers: [.apt(["libarchive-dev"]), .brew(["libarchive"])]
        ),
        // The runtime that services import: format model, ZIP reader, index, lookup.
        .target(
            name: "OfflineBundle",
            dependencies: [
                "CZlib",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The build side: writer, packer, checker, libarchive edges.
        .target(
            name: "PackagerKit",
            dependencies: [
                "OfflineBundle",
                "CZlib",
                "CArchive",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .executableTarget(
            name: "packager",
            dependencies: [
                "PackagerKit",
                "OfflineBundle",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "packager-bench",
            dependencies: ["PackagerKit", "OfflineBundle"],
            path: "Sources/PackagerBench"
        ),
        // Helpers both test targets share: temporary folders, running tools, sample sites.
        .target(name: "TestSupport", dependencies: ["PackagerKit", "OfflineBundle"], path: "Tests/TestSupport"),
        .testTarget(name: "OfflineBundleTests", dependencies: ["OfflineBundle", "PackagerKit", "TestSupport"]),
        .testTarget(name: "PackagerKitTests", dependencies: ["PackagerKit", "OfflineBundle", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
