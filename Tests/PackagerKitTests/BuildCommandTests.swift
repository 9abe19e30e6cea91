import Foundation
import TestSupport
import Testing

@testable import PackagerKit

@Suite("the packager build command, as a pipeline runs it")
struct BuildCommandTests {
    @Test("a quick run without a declaration, with --json for machines")
    func quickRun() async throws {
        let origin = Origin()
        serveSite(origin)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let folder = try TemporaryFolder()
        let result = try await run(
            packagerExecutable, ["build", "--seed", origin.base + "/", "--concurrency", "4", "-o", "site.zip", "--json"], in: folder.path)
        #expect(result.status == 0, "\(result.output)")
        let json = try #require(result.output.firstIndex(of: "{").map { String(result.output[$0...]) })
        let report = try JSONDecoder().decode(BuildReport.self, from: Data(json.utf8))
        #expect(report.succeeded && report.output == folder.path + "/site.zip")
        // No declaration: no block, substitution or dropped parameter, so the tracker, the logo (a 404 here) and
        // the about page with its utm_source are all fetched.
        #expect(report.entries == 20 && report.blocked == 0)
        #expect(Set(report.failures.map(\.url)) == Set(["/missing.html", "/assets/logo.svg", "/about.html?utm_source=news"].map { origin.base + $0 }))
        #expect(try await run("bsdtar", ["-tf", folder.path + "/site.zip"]).status == 0)
    }

    @Test("wrong arguments and a broken declaration exit 2 with a sentence that says what to fix")
    func badInput() async throws {
        let folder = try TemporaryFolder()
        try folder.file("typo.yml", "seeds: [https://a.example/]\nretries:\n  attempt: 3\n")
        var result = try await run(packagerExecutable, ["build", "typo.yml"], in: folder.path)
        #expect(result.status == 2)
        #expect(result.output.contains("typo.yml:3:3: unknown key 'attempt' in retries; did you mean 'attempts'?"))
        result = try await run(packagerExecutable, ["build"], in: folder.path)
        #expect(result.status == 2 && result.output.contains("no packager.yml in this folder"))
        result = try await run(packagerExecutable, ["build", "--seed", "https://a.example/"], in: folder.path)
        #expect(result.status != 0 && result.output.contains("--seed and --url need -o PATH"))
        result = try await run(packagerExecutable, ["build", "--seed", "not a url", "-o", "x.zip"], in: folder.path)
        #expect(result.status == 2 && result.output.contains("'not a url' is not an absolute http or https URL"))
        #expect(try folder.contents() == ["typo.yml"])
    }

    @Test("packager init writes the starter, and refuses to overwrite it")
    func initCommand() async throws {
        let folder = try TemporaryFolder()
        #expect(try await run(packagerExecutable, ["init"], in: folder.path).status == 0)
        #expect(try String(contentsOfFile: folder.path + "/packager.yml", encoding: .utf8) == StarterDeclaration.text)
        let again = try await run(packagerExecutable, ["init"], in: folder.path)
        #expect(again.status == 2 && again.output.contains("--force"))
    }

    @Test("Ctrl-C during a crawl leaves the previous bundle and no spool files")
    func interrupted() async throws {
        let origin = Origin()
        serveSite(origin)
        var stalled = Origin.Resource(headers: [("Content-Type", "image/png")], body: [1, 2, 3])
        stalled.delay = 30
        origin.set("/img/slow.png", stalled)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let folder = try TemporaryFolder()
        try folder.file("site.zip", "the previous bundle")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: packagerExecutable)
        process.arguments = ["build", "--seed", origin.base + "/", "-o", "site.zip"]
        process.currentDirectoryURL = URL(fileURLWithPath: folder.path)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Wait until the crawl is stuck on the stalled image, with other bodies already spooled.
        for _ in 0..<200 where origin.count("/img/slow.png") == 0 { try await Task.sleep(nanoseconds: 50_000_000) }
        #expect(origin.count("/img/slow.png") == 1)
        #expect(try folder.contents().contains { $0.hasPrefix(".packager-spool-") })
        process.interrupt()
        try await offPool { process.waitUntilExit() }
        #expect(process.terminationStatus == 128 + SIGINT)
        #expect(try folder.contents() == ["site.zip"])
        #expect(try String(contentsOfFile: folder.path + "/site.zip", encoding: .utf8) == "the previous bundle")
    }
}

@Suite("signing from the command line")
struct SigningCommandTests {
    @Test("keygen writes a 0600 private key; a signed build passes check with the public key; another key fails it")
    func keygenSignCheck() async throws {
        let origin = Origin()
        origin.set("/", .text("<p>signed</p>", type: "text/html"))
        try await origin.start()
        defer { Task { await origin.stop() } }
        let folder = try TemporaryFolder()
        #expect(try await run(packagerExecutable, ["keygen", "-o", "release"], in: folder.path).status == 0)
        let mode = try FileManager.default.attributesOfItem(atPath: folder.path + "/release.key")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try await run(packagerExecutable, ["keygen", "-o", "release"], in: folder.path).status == 2)
        let build = try await run(packagerExecutable, ["build", "--seed", origin.base + "/", "-o", "s.zip", "--sign-key", "release.key"], in: folder.path)
        #expect(build.status == 0, "\(build.output)")
        #expect(try await run(packagerExecutable, ["check", "s.zip", "--public-key", "release.pub"], in: folder.path).status == 0)
        _ = try await run(packagerExecutable, ["keygen", "-o", "other"], in: folder.path)
        let wrong = try await run(packagerExecutable, ["check", "s.zip", "--public-key", "other.pub"], in: folder.path)
        #expect(wrong.status == 1)
        // The private key never lands in the bundle.
        let key = try String(contentsOfFile: folder.path + "/release.key", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/s.zip"))
        #expect(bytes.range(of: Data(key.utf8)) == nil)
    }
}
