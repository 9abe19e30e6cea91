// swift-tools-version: 6.0
// A package that ships an offline bundle of its docs, built by `swift package packager build` (PluginTests copies it
// to a temporary folder and points the dependency at the repository).
import PackageDescription

let package = Package(
    name: "PluginPackage",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "packager", path: "../..")],
    targets: [
        .executableTarget(
            name: "Docs",
            dependencies: [.product(name: "OfflineBundle", package: "packager")],
            resources: [.copy("OfflineBundles")]
        )
    ]
)
