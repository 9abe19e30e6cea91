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

    @Test(
        "packager channel write refuses wrong input in words (exit 2); serve --channel follows the channel: a new document's release is answered within a few polls, a replayed old one is refused"
    )
    func channel() async throws {
        let folder = try TemporaryFolder()
        let pages = folder.path + "/pages"
        try FileManager.default.createDirectory(atPath: pages, withIntermediateDirectories: true)
        let root = folder.path + "/site"
        try FileManager.default.createDirectory(atPath: root + "/releases", withIntermediateDirectories: true)
        for (n, word) in ["first", "second"].enumerated() {
            try Data("<html><body><h1>the \(word) release</h1></body></html>".utf8).write(to: URL(fileURLWithPath: pages + "/index.html"))
            try Data(String(repeating: "<p>the same in every release</p>\n", count: 200).utf8).write(to: URL(fileURLWithPath: pages + "/same.html"))
            let pack = try await run(packagerExecutable, ["pack", pages, "--base-url", "https://docs.example/", "-o", folder.path + "/r\(n).zip"])
            #expect(pack.status == 0, "\(pack.output)")
        }
        for name in ["release", "other"] {
            #expect(try await run(packagerExecutable, ["keygen", "-o", folder.path + "/" + name]).status == 0)
        }
        let key = ["--sign-key", folder.path + "/release.key"]
        let delta = try await run(packagerExecutable, ["delta", folder.path + "/r0.zip", folder.path + "/r1.zip", "-o", folder.path + "/d.zip"])
        #expect(delta.status == 0, "\(delta.output)")
        let channelFile = root + "/channel.json"
        let other = folder.path + "/other.json"
        #expect(
            try await run(
                packagerExecutable, ["channel", "write", folder.path + "/r0.zip", "--url", "x", "--sign-key", folder.path + "/other.key", "-o", other]
            )
            .status == 0)
        let wrong: [(String, [String], String)] = [
            ("a delta as the release", ["channel", "write", folder.path + "/d.zip", "--url", "x", "-o", channelFile] + key, "is a delta"),
            (
                "a delta for another release",
                ["channel", "write", folder.path + "/r0.zip", "--url", "x", "--delta", folder.path + "/d.zip", "--delta-url", "d", "-o", channelFile] + key,
                "stands for the release"
            ),
            (
                "a delta without its URL",
                ["channel", "write", folder.path + "/r1.zip", "--url", "x", "--delta", folder.path + "/d.zip", "-o", channelFile] + key, "--delta-url"
            ),
            (
                "another key's previous", ["channel", "write", folder.path + "/r1.zip", "--url", "x", "--previous", other, "-o", channelFile] + key,
                "not signed by"
            ),
            (
                "an expiry that is no duration", ["channel", "write", folder.path + "/r1.zip", "--url", "x", "--expires", "soon", "-o", channelFile] + key,
                "--expires"
            ),
            ("no key", ["channel", "write", folder.path + "/r1.zip", "--url", "x", "-o", channelFile], "--sign-key"),
            ("an empty URL", ["channel", "write", folder.path + "/r1.zip", "--url", "", "-o", channelFile] + key, "--url"),
            ("serve --channel without a key", ["serve", "--channel", "http://127.0.0.1:1/channel.json"], "--public-key"),
        ]
        for (name, arguments, says) in wrong {
            let result = try await run(packagerExecutable, arguments)
            #expect(result.status == 2 && result.output.contains(says), "\(name): \(result.status) \(result.output)")
        }
        #expect(!FileManager.default.fileExists(atPath: channelFile), "a refused write left a document")
        // The channel on nginx, followed by serve.
        let server = try await RealServer.start("nginx", root: root, state: folder.path + "/server")
        defer { server.stop() }
        func publish(_ release: String, previous: Bool) async throws {
            let digest = try MountedBundle(path: release).digest
            if !FileManager.default.fileExists(atPath: root + "/releases/\(digest).zip") {
                try FileManager.default.copyItem(atPath: release, toPath: root + "/releases/\(digest).zip")
            }
            let written = try await run(
                packagerExecutable,
                ["channel", "write", release, "--url", "releases/{digest}.zip", "-o", channelFile] + key + (previous ? ["--previous", channelFile] : []))
            #expect(written.status == 0 && written.output.contains("releases/\(digest).zip"), "\(written.output)")
        }
        try await publish(folder.path + "/r0.zip", previous: false)
        let first = try Data(contentsOf: URL(fileURLWithPath: channelFile))
        let (process, base) = try await startServe(
            arguments: [
                "--channel", server.base + "/channel.json", "--public-key", folder.path + "/release.pub", "--cache-dir", folder.path + "/cache",
                "--reload-check", "0.3",
            ])
        defer { process.terminate() }
        func page() async throws -> String { String(decoding: try await curlExchange(base + "/index.html", in: folder).body, as: UTF8.self) }
        #expect(try await page().contains("the first release"))
        try await publish(folder.path + "/r1.zip", previous: true)
        let deadline = Date().addingTimeInterval(30)
        while try await !page().contains("the second release") && Date() < deadline { try await Task.sleep(for: .milliseconds(100)) }
        #expect(try await page().contains("the second release"))
        // A replayed old document: refused; the second release answers on.
        try first.write(to: URL(fileURLWithPath: channelFile))
        try await Task.sleep(for: .seconds(2))
        #expect(try await page().contains("the second release"))
        process.terminate()
        process.waitUntilExit()
        // A delta by URL over its base by URL: fetched whole, mounted over the base, answering as the next release.
        try FileManager.default.copyItem(atPath: folder.path + "/d.zip", toPath: root + "/d.zip")
        try FileManager.default.copyItem(atPath: folder.path + "/r0.zip", toPath: root + "/r0.zip")
        let (deltaServe, deltaBase) = try await startServe(
            arguments: [server.base + "/d.zip", server.base + "/r0.zip", "--cache-dir", folder.path + "/delta-cache"])
        defer { deltaServe.terminate() }
        let answer = try await curlExchange(deltaBase + "/index.html", in: folder)
        #expect(answer.status == 200 && String(decoding: answer.body, as: UTF8.self).contains("the second release"))
        let alone = try await run(packagerExecutable, ["inspect", server.base + "/d.zip", "--cache-dir", folder.path + "/delta-cache"])
        #expect(alone.status != 0 && alone.output.contains("give the bundle it was made over after it"), "\(alone.output)")
        deltaServe.terminate()
        deltaServe.waitUntilExit()
    }
}
