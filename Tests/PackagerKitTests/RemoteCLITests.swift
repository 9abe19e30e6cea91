import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// `packager inspect`, `check`, `verify` and `serve` given a bundle's URL on nginx, as a fleet's jobs run them.
@Suite("the CLI with a bundle URL", .enabled(if: RealServer.installed.contains("nginx")))
struct RemoteCLITests {
    @Test("inspect, check, verify and serve read a bundle from nginx by range requests, with a cache folder")
    func commands() async throws {
        let folder = try TemporaryFolder()
        let root = folder.path + "/site"
        try RealServerVerifyTests.makeSite(at: root)
        let server = try await RealServer.start("nginx", root: root, state: folder.path + "/server")
        defer { server.stop() }
        let pack = try await run(packagerExecutable, ["pack", root, "--base-url", server.base + "/", "-o", folder.path + "/pack.zip"])
        #expect(pack.status == 0, "\(pack.output)")
        // The release beside the site it was packed from (the site's entries are what verify asks about).
        try FileManager.default.createDirectory(atPath: root + "/_releases", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: folder.path + "/pack.zip", toPath: root + "/_releases/pack.zip")
        let url = server.base + "/_releases/pack.zip"
        let cache = ["--cache-dir", folder.path + "/cache"]

        let inspect = try await run(packagerExecutable, ["inspect", url] + cache)
        #expect(
            inspect.status == 0 && inspect.output.contains("bundle \(url)") && inspect.output.contains(server.base + "/guide/page3.html"), "\(inspect.output)")
        let check = try await run(packagerExecutable, ["check", url] + cache)
        #expect(check.status == 0 && check.output.contains("ok: \(url)"), "\(check.output)")
        let verified = try await RealServerVerifyTests.verify(url, base: server.base, cache)
        #expect(verified.status == 0 && !verified.verdicts.isEmpty && verified.verdicts.values.allSatisfy { $0 == "fresh" }, "\(verified.report)")

        let (process, base) = try await startServe(url, cache)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let page = try await curlExchange(base + "/guide/page3.html", in: folder)
        let file = try Data(contentsOf: URL(fileURLWithPath: root + "/guide/page3.html"))
        #expect(page.status == 200 && page.body == file)

        // A mistake in the flags is a usage error; a URL with nothing there says so.
        let badHeader = try await run(packagerExecutable, ["inspect", url, "--header", "no colon"])
        #expect(badHeader.status == 2 && badHeader.output.contains("--header"), "\(badHeader.output)")
        let missing = try await run(packagerExecutable, ["inspect", server.base + "/_releases/none.zip"] + cache)
        #expect(missing.status != 0 && missing.output.contains("is not there (404)"), "\(missing.output)")
    }

    @Test(
        "S11: a bundle URL's user:password@ and presigned query appear in no output (inspect, check and its JSON, export's refusal) and not in the pin, which is 0600"
    )
    func urlSecretsNeverPrinted() async throws {
        let folder = try TemporaryFolder()
        let root = folder.path + "/site"
        try RealServerVerifyTests.makeSite(at: root)
        let server = try await RealServer.start("nginx", root: root, state: folder.path + "/server")
        defer { server.stop() }
        let pack = try await run(packagerExecutable, ["pack", root, "--base-url", server.base + "/", "-o", folder.path + "/pack.zip"])
        #expect(pack.status == 0, "\(pack.output)")
        try FileManager.default.createDirectory(atPath: root + "/_releases", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: folder.path + "/pack.zip", toPath: root + "/_releases/pack.zip")
        let shown = server.base + "/_releases/pack.zip"
        let url = shown.replacingOccurrences(of: "http://", with: "http://alice:PASSWORD-SECRET@") + "?X-Amz-Signature=SIG-SECRET-123&X-Amz-Credential=CRED"
        let cacheFolder = folder.path + "/cache"
        let cache = ["--cache-dir", cacheFolder]
        let secrets = ["PASSWORD-SECRET", "SIG-SECRET-123", "alice", "X-Amz"]
        let runs: [(String, [String], String)] = [
            ("inspect", ["inspect", url] + cache, "bundle \(shown)"),
            ("inspect --json", ["inspect", url, "--json"] + cache, shown),
            ("check", ["check", url] + cache, "ok: \(shown)"),
            ("check --json", ["check", url, "--json"] + cache, shown),
            ("export", ["export", url, "-o", folder.path + "/out.tar.zst"], "\(shown) is a URL"),
        ]
        for (name, arguments, shows) in runs {
            let result = try await run(packagerExecutable, arguments)
            #expect(result.output.contains(shows), "\(name): \(result.output)")
            for secret in secrets { #expect(!result.output.contains(secret), "\(name) printed \(secret): \(result.output)") }
        }
        let pins = try FileManager.default.contentsOfDirectory(atPath: cacheFolder).filter { $0.hasSuffix(".pin") }
        #expect(pins.count == 1)
        for pin in pins {
            let text = try String(contentsOfFile: cacheFolder + "/" + pin, encoding: .utf8)
            for secret in secrets { #expect(!text.contains(secret), "the pin keeps \(secret): \(text)") }
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: cacheFolder + "/" + pin)[.posixPermissions] as? NSNumber)
            #expect(mode.intValue == 0o600, "the pin's mode is \(String(mode.intValue, radix: 8))")
        }
    }
}
