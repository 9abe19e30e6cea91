// swift-tools-version: 6.0
// The libFuzzer target over the bundle reader. Built only by scripts/fuzz.sh (never by the main package's
// `swift build`), because it is compiled with -sanitize=fuzzer,address.
import PackageDescription

// The main package is two folders up; a path dependency is named by its folder's name.
let rootFolder = Context.packageDirectory.split(separator: "/").dropLast(2).last.map { $0.lowercased() } ?? "main"

let package = Package(
    name: "packager-fuzz",
    dependencies: [.package(path: "../.."), .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0")],
    targets: [
        .executableTarget(
            name: "BundleReaderFuzzer",
            dependencies: [.product(name: "OfflineBundle", package: rootFolder), .product(name: "HTTPTypes", package: "swift-http-types")],
            // gold fails on the sanitizer runtimes' debug information; lld links them.
            linkerSettings: [.unsafeFlags(["-use-ld=lld"])]
        )
    ]
)
