import Foundation
import OfflineBundle
import TestSupport
import Testing

/// The repository's root, whose package the test package depends on.
private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// The SwiftPM command plugin, run as a package's author would: `Tests/PluginPackage` (an executable target that
/// ships a bundle as a resource) copied to a temporary folder, depending on this repository by path. Its build folder
/// is `.build-plugin` in the repository (the first run builds the CLI there: minutes; make test runs this stage on
/// its own, after the others).
@Suite("SwiftPM plugin: swift package packager build into a target's resources, verify, and refusals", .serialized)
struct PluginTests {
    /// `swift package` in `package`, with the test's build folder; the output and exit status.
    static func swiftPackage(_ package: String, _ arguments: [String]) async throws -> ToolResult {
        try await run("swift", ["package", "--package-path", package, "--scratch-path", repositoryRoot + "/.build-plugin"] + arguments)
    }

    @Test("build --target writes the declared bundle into the target's OfflineBundles; the target answers from it with the origin gone; verify finds it fresh")
    func buildIntoTarget() async throws {
        let folder = try TemporaryFolder()
        let package = folder.path + "/PluginPackage"
        let copied = try await run("cp", ["-R", repositoryRoot + "/Tests/PluginPackage", package])
        #expect(copied.status == 0, "\(copied.output)")
        let manifest = try String(contentsOfFile: package + "/Package.swift", encoding: .utf8)
        try manifest.replacingOccurrences(of: #"path: "../..""#, with: "path: \"\(repositoryRoot)\"")
            .write(toFile: package + "/Package.swift", atomically: true, encoding: .utf8)
        let page = "<html><body><h1>Guide</h1><a href=\"/install.html\">Install</a></body></html>"
        let bundle = package + "/Sources/Docs/OfflineBundles/docs.zip"
        let base = try await withOrigin { origin in
            origin.set("/", .text(page, type: "text/html"))
            origin.set("/install.html", .text("<html><body>swift build</body></html>", type: "text/html"))
            try folder.file(
                "PluginPackage/docs.yml",
                """
                output: elsewhere.zip
                robots: false
                seeds: [\(origin.base)/]
                """)
            let built = try await Self.swiftPackage(
                package, ["--allow-network-connections", "all", "--allow-writing-to-package-directory", "packager", "build", "docs.yml", "--target", "Docs"])
            #expect(built.status == 0, "\(built.output)")
            #expect(FileManager.default.fileExists(atPath: bundle), "\(built.output)")
            #expect(!FileManager.default.fileExists(atPath: package + "/elsewhere.zip"), "--target did not override the declaration's output")
            let verified = try await Self.swiftPackage(
                package,
                ["--allow-network-connections", "all", "--allow-writing-to-package-directory", "packager", "verify", bundle, "--declaration", "docs.yml"])
            #expect(verified.status == 0 && verified.output.contains("2"), "\(verified.output)")
            return origin.base
        }
        // The origin is stopped: the target's own copy of the bundle answers.
        let loader = try OfflineLoader(path: bundle, policy: .bundleOnly)
        #expect(loader.response(for: BundleRequest(method: "GET", url: base + "/install.html")) != nil)
        let answered = try await run(
            "swift", ["run", "--package-path", package, "--scratch-path", repositoryRoot + "/.build-plugin", "Docs", base + "/install.html"])
        #expect(answered.status == 0 && answered.output.contains("swift build"), "\(answered.output)")
    }

    @Test("refused, with the reason: no subcommand, a target that is not there, --target with --output, a declaration that is not there")
    func refusals() async throws {
        let folder = try TemporaryFolder()
        let package = folder.path + "/PluginPackage"
        _ = try await run("cp", ["-R", repositoryRoot + "/Tests/PluginPackage", package])
        let manifest = try String(contentsOfFile: package + "/Package.swift", encoding: .utf8)
        try manifest.replacingOccurrences(of: #"path: "../..""#, with: "path: \"\(repositoryRoot)\"")
            .write(toFile: package + "/Package.swift", atomically: true, encoding: .utf8)
        let allow = ["--allow-network-connections", "all", "--allow-writing-to-package-directory", "packager"]
        let none = try await Self.swiftPackage(package, allow)
        #expect(none.status != 0 && none.output.contains("say what to run"), "\(none.output)")
        let missing = try await Self.swiftPackage(package, allow + ["build", "docs.yml", "--target", "Nope"])
        #expect(missing.status != 0 && missing.output.contains("no target named ‘Nope’"), "\(missing.output)")
        let both = try await Self.swiftPackage(package, allow + ["build", "docs.yml", "--target", "Docs", "-o", "x.zip"])
        #expect(both.status != 0 && both.output.contains("--target and --output"), "\(both.output)")
        let noDeclaration = try await Self.swiftPackage(package, allow + ["build", "absent.yml"])
        #expect(noDeclaration.status != 0 && noDeclaration.output.contains("absent.yml"), "\(noDeclaration.output)")
    }
}
