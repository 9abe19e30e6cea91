import Foundation
import OfflineBundle
import Synchronization
import TestSupport
import Testing

@testable import PackagerKit

@Suite("the packager build command, as a pipeline runs it")
struct BuildCommandTests {
    @Test("a quick run without a declaration, with --json for machines")
    func quickRun() async throws {
        try await withOrigin { origin in
            serveSite(origin)
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
    }

    @Test("with SOURCE_DATE_EPOCH, two builds of an unchanged site are byte-identical; without it, they record their own times")
    func reproducibleBuild() async throws {
        try await withOrigin { origin in
            serveSite(origin)
            let folder = try TemporaryFolder()
            let epoch = "1767225600"  // 2026-01-01T00:00:00Z, before the origin's Date headers
            func build(_ name: String, epoch: String?, _ more: [String] = []) async throws {
                let environment = epoch.map { ["SOURCE_DATE_EPOCH=" + $0] } ?? []
                let result = try await run(
                    "env", environment + [packagerExecutable, "build", "--seed", origin.base + "/", "--concurrency", "4", "-o", name] + more,
                    in: folder.path)
                #expect(result.status == 0, "\(result.output)")
            }
            try await build("a.zip", epoch: epoch)
            try await build("b.zip", epoch: epoch)
            let a = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/a.zip"))
            #expect(a == (try Data(contentsOf: URL(fileURLWithPath: folder.path + "/b.zip"))))
            // Every time the bundle records is the epoch: the creation, each fetch, each origin Date.
            let bundle = try MountedBundle(path: folder.path + "/a.zip")
            let clamp = Date(timeIntervalSince1970: 1_767_225_600)
            #expect(bundle.createdAt == clamp)
            let home = try #require(bundle.entry(for: origin.base + "/"))
            #expect(home.fetchedAt == clamp && home.originDate == clamp)
            // Without it, the times are the build's own: the bundles differ.
            try await build("c.zip", epoch: nil)
            let c = try MountedBundle(path: folder.path + "/c.zip")
            #expect(try #require(c.createdAt) > clamp)
            #expect(try #require(c.entry(for: origin.base + "/")?.fetchedAt) > clamp)
            #expect(c.digest != bundle.digest)
            // Another level: other deflate streams of the same bodies, larger at level 1.
            try await build("fast.zip", epoch: epoch, ["--compression-level", "1"])
            let fast = try MountedBundle(path: folder.path + "/fast.zip")
            let size = { (path: String) in try FileManager.default.attributesOfItem(atPath: folder.path + "/" + path)[.size] as? Int ?? 0 }
            #expect(try size("fast.zip") > size("a.zip"))
            #expect(try fast.body(of: try #require(fast.entry(for: origin.base + "/"))) == bundle.body(of: home))
            // --stored-index: index.bin stored rather than deflated, the same index, so the same bundle digest.
            try await build("stored.zip", epoch: epoch, ["--stored-index"])
            let stored = try MountedBundle(path: folder.path + "/stored.zip")
            #expect(stored.digest == bundle.digest && stored.metadata["index.bin"]?.method == 0 && bundle.metadata["index.bin"]?.method == 8)
        }
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
        result = try await run(packagerExecutable, ["build", "--seed", "https://a.example/", "-o", "x.zip", "--compression-level", "13"], in: folder.path)
        #expect(result.status == 2 && result.output.contains("--compression-level must be 1 to 12"))
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

    @Test("Ctrl-C during a crawl leaves the previous bundle and no spool files; the journal of what was fetched stays, for the next build")
    func interrupted() async throws {
        try await withOrigin { origin in
            serveSite(origin)
            var stalled = Origin.Resource(headers: [("Content-Type", "image/png")], body: [1, 2, 3])
            stalled.delay = 30
            origin.set("/img/slow.png", stalled)
            let folder = try TemporaryFolder()
            try folder.file("site.zip", "the previous bundle")
            let process = try launch(packagerExecutable, ["build", "--seed", origin.base + "/", "-o", "site.zip"], in: folder.path)
            // Wait until the crawl is stuck on the stalled image, with other bodies already spooled.
            for _ in 0..<200 where origin.count("/img/slow.png") == 0 { try await Task.sleep(nanoseconds: 50_000_000) }
            #expect(origin.count("/img/slow.png") == 1)
            #expect(try folder.contents().contains { $0.hasPrefix(".packager-scratch-") })
            process.interrupt()
            try await offPool { process.waitUntilExit() }
            #expect(process.terminationStatus == 128 + SIGINT)
            #expect(try folder.contents() == [".site.zip.packager-journal", "site.zip"])
            #expect(try String(contentsOfFile: folder.path + "/site.zip", encoding: .utf8) == "the previous bundle")
        }
    }
}

@Suite("signing from the command line")
struct SigningCommandTests {
    @Test("keygen writes a 0600 private key; a signed build passes check with the public key; another key fails it")
    func keygenSignCheck() async throws {
        try await withOrigin { origin in
            origin.set("/", .text("<p>signed</p>", type: "text/html"))
            let folder = try TemporaryFolder()
            #expect(try await run(packagerExecutable, ["keygen", "-o", "release"], in: folder.path).status == 0)
            let mode = try FileManager.default.attributesOfItem(atPath: folder.path + "/release.key")[.posixPermissions] as? Int
            #expect(mode == 0o600)
            #expect(try await run(packagerExecutable, ["keygen", "-o", "release"], in: folder.path).status == 2)
            let build = try await run(packagerExecutable, ["build", "--seed", origin.base + "/", "-o", "s.zip", "--sign-key", "release.key"], in: folder.path)
            #expect(build.status == 0, "\(build.output)")
            // The summary, keygen and check name the same key.
            let fingerprint = try BundlePublicKey(contentsOf: folder.path + "/release.pub").fingerprint
            #expect(fingerprint.hasPrefix("ed25519:") && fingerprint.count == 24)
            #expect(build.output.contains("signed by \(fingerprint)"), "\(build.output)")
            let checked = try await run(packagerExecutable, ["check", "s.zip", "--public-key", "release.pub"], in: folder.path)
            #expect(checked.output.contains("signature valid, by \(fingerprint)"), "\(checked.output)")
            // Each key file says what it is: the public one does not sign, the private one is no public key.
            let swappedSign = try await run(
                packagerExecutable, ["build", "--seed", origin.base + "/", "-o", "t.zip", "--sign-key", "release.pub"], in: folder.path)
            #expect(swappedSign.status == 2 && swappedSign.output.contains("release.pub is a public key"), "\(swappedSign.output)")
            #expect(!FileManager.default.fileExists(atPath: folder.path + "/t.zip"))
            let swappedCheck = try await run(packagerExecutable, ["check", "s.zip", "--public-key", "release.key"], in: folder.path)
            #expect(swappedCheck.status == 2 && swappedCheck.output.contains("is a private key"), "\(swappedCheck.output)")
            #expect(try await run(packagerExecutable, ["check", "s.zip", "--public-key", "release.pub"], in: folder.path).status == 0)
            _ = try await run(packagerExecutable, ["keygen", "-o", "other"], in: folder.path)
            let wrong = try await run(packagerExecutable, ["check", "s.zip", "--public-key", "other.pub"], in: folder.path)
            #expect(wrong.status == 1)
            // The private key never lands in the bundle.
            let key = BundlePublicKey.keyText(try String(contentsOfFile: folder.path + "/release.key", encoding: .utf8))
            #expect(key.count == 44)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/s.zip"))
            #expect(bytes.range(of: Data(key.utf8)) == nil)
        }
    }
}

@Suite("nothing lost when a build is killed")
struct KillTests {
    /// A site whose crawl takes about a second and a half and whose bundle takes a moment to write:
    /// 40 slow pages, and 24 incompressible 600 KiB images that are spooled to disk.
    static func serveSlowSite(_ origin: Origin, version: Int) {
        let pages = (0..<40).map { "<a href=\"/p\($0).html\">\($0)</a>" }.joined()
        let images = (0..<24).map { "<img src=\"/i\($0).bin\">" }.joined()
        origin.set("/", .text("<!doctype html><title>v\(version)</title>\(pages)\(images)", type: "text/html"))
        for i in 0..<40 {
            var page = Origin.Resource.text("<p>page \(i), version \(version)</p>", type: "text/html")
            page.delay = 0.15
            origin.set("/p\(i).html", page)
        }
        for i in 0..<24 {
            origin.set("/i\(i).bin", Origin.Resource(headers: [("Content-Type", "image/jpeg")], body: Array(noise(600 << 10, seed: UInt64(version * 100 + i)))))
        }
    }

    enum Moment: String, CaseIterable {
        case atStart, midCrawl, whileWriting, nearTheEnd
    }

    @Test("SIGKILL at the start, mid-crawl, while writing and near the end: the output is the previous bundle or a whole new one", arguments: Moment.allCases)
    func killed(at moment: Moment) async throws {
        try await withOrigin { origin in
            Self.serveSlowSite(origin, version: 1)
            let folder = try TemporaryFolder()
            try folder.file("packager.yml", "output: site.zip\nseeds: [\(origin.base)/]\nrobots: false\nconcurrency: {total: 8, per-host: 8}\n")
            var result = try await run(packagerExecutable, ["build"], in: folder.path)
            #expect(result.status == 0, "\(result.output)")
            let output = folder.path + "/site.zip"
            let previous = try Data(contentsOf: URL(fileURLWithPath: output))
            Self.serveSlowSite(origin, version: 2)

            let requestsBefore = origin.requests.count
            let process = try launch(packagerExecutable, ["build"], in: folder.path)
            switch moment {
            case .atStart:
                try await Task.sleep(nanoseconds: 20_000_000)
                #expect(origin.requests.count - requestsBefore < 65, "the build had already fetched everything")
            case .midCrawl:
                // Some pages fetched and images spooled, many still to come.
                for _ in 0..<400 where origin.requests.count - requestsBefore < 20 { try await Task.sleep(nanoseconds: 5_000_000) }
                #expect(origin.requests.count - requestsBefore >= 20)
            case .whileWriting:
                // The temporary bundle exists: the crawl is over and the writer is at work.
                // Watched until the build ends, whatever the machine's load makes the crawl take (a count of 1 ms sleeps
                // ran out first once, under the full suite).
                // Polled on a thread of its own, not by sleeps on the loaded cooperative pool, which once slept past the
                // whole write.
                // Killed from that thread the moment the file is seen: back on the loaded pool, the write once finished
                // before the kill came.
                let path = folder.path
                let writing = try await offPool { () -> Bool in
                    let deadline = Date().addingTimeInterval(60)
                    while process.isRunning && Date() < deadline {
                        if (try? FileManager.default.contentsOfDirectory(atPath: path))?.contains(where: { $0.hasPrefix(".site.zip.tmp-") }) == true {
                            kill(process.processIdentifier, SIGKILL)
                            return true
                        }
                        usleep(200)
                    }
                    return false
                }
                #expect(writing, "the temporary bundle never appeared")
            case .nearTheEnd:
                for _ in 0..<1000 where origin.requests.count - requestsBefore < 65 { try await Task.sleep(nanoseconds: 5_000_000) }
            }
            kill(process.processIdentifier, SIGKILL)
            try await offPool { process.waitUntilExit() }
            // Near the end, or between seeing the temporary file and the kill, the build may win the race and finish
            // first; then the new bundle must be complete (checked below).
            let killed = process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL
            #expect(killed || ((moment == .nearTheEnd || moment == .whileWriting) && process.terminationStatus == 0))

            // Either the previous bundle, byte for byte, or a complete new one: never a partial file.
            let now = try Data(contentsOf: URL(fileURLWithPath: output))
            if now != previous {
                #expect(Checker.check(path: output).issues.isEmpty)
                let bundle = try MountedBundle(path: output)
                #expect(
                    try bundle.entry(for: origin.base + "/p0.html").map { String(decoding: try bundle.body(of: $0), as: UTF8.self) }
                        == "<p>page 0, version 2</p>")
            }
            if moment == .midCrawl { #expect(now == previous) }

            // What the killed build left (its spool folder, a temporary bundle) is removed by the next build.
            result = try await run(packagerExecutable, ["build"], in: folder.path)
            #expect(result.status == 0, "\(result.output)")
            #expect(try folder.contents() == ["packager.yml", "site.zip"])
            #expect(Checker.check(path: output).issues.isEmpty)
        }
    }
}

@Suite("wrong input exits 2, in words")
struct WrongInputTests {
    @Test("--version names the tool's version and the bundle formats it writes and reads")
    func version() async throws {
        let result = try await run(packagerExecutable, ["--version"])
        #expect(
            result.status == 0
                && result.output
                    == "packager \(PackagerVersion.string): writes bundle format \(BundleFormat.version), reads formats 1 to \(BundleFormat.version) (docs/FORMAT.md)\n",
            "\(result.output)")
    }

    @Test("a folder where a file is meant, a file that is not there, a bundle URL no server answers: exit 2 with the path and the reason")
    func wrongInput() async throws {
        let folder = try TemporaryFolder()
        let cases: [([String], String)] = [
            (["build", folder.path], "is a folder, not a declaration file"),
            (["check", folder.path], "is a folder, not a bundle file"),
            (["inspect", folder.path], "is a folder, not a bundle file"),
            (["extract", folder.path + "/missing.zip", folder.path + "/out"], "cannot open \(folder.path)/missing.zip: no such file or directory"),
            (["extract", folder.path, folder.path + "/out"], "is a folder, not an archive"),
            (["check", "http://127.0.0.1:\(try closedPort())/x.zip", "--remote-retries", "0"], "cannot read http://127.0.0.1:"),
        ]
        try FileManager.default.createDirectory(atPath: folder.path + "/empty", withIntermediateDirectories: false)
        let more: [([String], String)] = [
            (
                ["pack", folder.path + "/empty", "--base-url", "https://x.example/", "-o", folder.path + "/e.zip"],
                "there is no file to pack in \(folder.path)/empty"
            ),
            (["verify", folder.path + "/missing.zip", "--json", "--format", "junit"], "give --json or --format junit, not both"),
        ]
        // A file that is not there is said one way, by every command that reads one.
        let missing = folder.path + "/missing"
        let said = "no such file or directory"
        let absent: [([String], String)] = [
            (["inspect", missing + ".zip"], "cannot open \(missing).zip: \(said)"), (["verify", missing + ".zip"], "cannot open \(missing).zip: \(said)"),
            (["refresh", missing + ".zip"], "cannot open \(missing).zip: \(said)"), (["build", missing + ".yml"], "cannot open \(missing).yml: \(said)"),
            (["pack", missing + ".tar", "--base-url", "https://x.example/", "-o", folder.path + "/p.zip"], "cannot open \(missing).tar: \(said)"),
        ]
        for (arguments, words) in cases + more + absent {
            let result = try await run(packagerExecutable, arguments)
            #expect(result.status == 2 && result.output.contains(words), "\(arguments): \(result.status) \(result.output)")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/e.zip"))
    }

    @Test("serve warns at start about an --origin no bundle holds; verify --json is --format json")
    func originNotHeldAndVerifyJSON() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        let pipe = Pipe()
        let serve = try launch(packagerExecutable, ["serve", folder.path + "/b.zip", "--port", "0", "--origin", "https://other.example"], output: pipe)
        let first = try await firstLine(of: pipe)
        serve.terminate()
        try await offPool { serve.waitUntilExit() }
        #expect(first.contains("no bundle holds https://other.example") && first.contains("https://docs.example.com"), "\(first)")
        let verified = try await run(packagerExecutable, ["verify", folder.path + "/b.zip", "--json", "--retries", "0", "--connect-timeout", "0.2"])
        // Nothing answers for docs.example.com here: the check is incomplete (2), and its report is JSON all the same.
        #expect(verified.output.contains("\"bundle\" :") && verified.output.contains("\"verdict\" : \"unreachable\""), "\(verified.output)")
    }

    @Test(
        "serve --config FILE: the bundle and reload interval from the JSON a service's loader reads; the environment over it; wrong values refused naming the key and where it came from"
    )
    func serveFromConfiguration() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        try folder.file("c.json", #"{"offline-bundle": {"path": "\#(folder.path)/b.zip", "policy": "bundle-first", "reload-interval": 5}}"#)
        let pipe = Pipe()
        let serve = try launch(packagerExecutable, ["serve", "--config", folder.path + "/c.json", "--port", "0"], output: pipe)
        var lines = ""
        for _ in 0..<2 where !lines.contains("serving ") { lines += try await firstLine(of: pipe) }
        serve.terminate()
        try await offPool { serve.waitUntilExit() }
        #expect(lines.contains("serving \(folder.path)/b.zip") || lines.contains("serving b.zip"), "\(lines)")
        // serve answers from its bundles alone: a loader's policy is said not to be read.
        #expect(lines.contains("offline-bundle.policy is a loader's setting"), "\(lines)")
        // The same settings as YAML.
        try folder.file("c.yml", "offline-bundle:\n  path: \(folder.path)/b.zip\n  reload-interval: 5\n")
        let yamlPipe = Pipe()
        let yamlServe = try launch(packagerExecutable, ["serve", "--config", folder.path + "/c.yml", "--port", "0"], output: yamlPipe)
        let yamlLine = try await firstLine(of: yamlPipe)
        yamlServe.terminate()
        try await offPool { yamlServe.waitUntilExit() }
        #expect(yamlLine.contains("serving \(folder.path)/b.zip") || yamlLine.contains("serving b.zip"), "\(yamlLine)")

        try folder.file("two.json", #"{"offline-bundle": {"path": "b.zip", "url": "https://cdn.example/b.zip"}}"#)
        try folder.file("key.json", #"{"offline-bundle": {"path": "b.zip", "public-key": "abc"}}"#)
        try folder.file("none.json", "{}")
        try folder.file("text.json", "path = b.zip")
        try folder.file("list.yaml", "- b.zip\n")
        try folder.file("key.yml", "offline-bundle:\n  path: b.zip\n  public-key: abc\n")
        let cases: [(arguments: [String], environment: String?, says: String)] = [
            (["--config", folder.path + "/two.json"], nil, "offline-bundle.path (OFFLINE_BUNDLE_PATH, from \(folder.path)/two.json) and offline-bundle.url"),
            (
                ["--config", folder.path + "/key.json"], nil,
                "offline-bundle.public-key (OFFLINE_BUNDLE_PUBLIC_KEY, from \(folder.path)/key.json) is not the base64"
            ),
            (["--config", folder.path + "/none.json"], nil, "offline-bundle.path (OFFLINE_BUNDLE_PATH) is not set"),
            (["--config", folder.path + "/text.json"], nil, "is not a JSON settings file"),
            (["--config", folder.path + "/list.yaml"], nil, "is not a YAML settings file: it holds no mapping"),
            (
                ["--config", folder.path + "/key.yml"], nil,
                "offline-bundle.public-key (OFFLINE_BUNDLE_PUBLIC_KEY, from \(folder.path)/key.yml) is not the base64"
            ),
            (["--config", folder.path + "/missing.json"], nil, "cannot open \(folder.path)/missing.json: no such file or directory"),
            (
                ["--config", folder.path + "/c.json"], "OFFLINE_BUNDLE_POLICY=sometimes",
                "offline-bundle.policy (OFFLINE_BUNDLE_POLICY, from the environment) is 'sometimes'"
            ),
        ]
        for item in cases {
            let command = (item.environment.map { [$0] } ?? []) + [packagerExecutable, "serve"] + item.arguments + ["--port", "0"]
            let refused = try await run("/usr/bin/env", command)
            #expect(refused.status == 2 && refused.output.contains(item.says), "\(item.arguments): \(refused.output)")
        }
    }
}

@Suite("a killed build resumes")
struct ResumeTests {
    static let epoch = "SOURCE_DATE_EPOCH=1767225600"

    /// Starts `packager build ARGUMENTS` in `folder` and SIGKILLs it once the origin has answered 20 requests more.
    func killMidCrawl(_ folder: TemporaryFolder, _ origin: Origin, _ arguments: [String] = []) async throws {
        let before = origin.requests.count
        // env execs the build: the process killed is the build itself.
        let process = try launch("/usr/bin/env", [Self.epoch, packagerExecutable, "build"] + arguments, in: folder.path)
        for _ in 0..<2000 where origin.requests.count - before < 20 && process.isRunning { try await Task.sleep(nanoseconds: 5_000_000) }
        kill(process.processIdentifier, SIGKILL)
        try await offPool { process.waitUntilExit() }
        #expect(process.terminationReason == .uncaughtSignal, "the build ended before it was killed")
        #expect(FileManager.default.fileExists(atPath: folder.path + "/.site.zip.packager-journal/log"))
        // Requests the killed build had sent may still reach the origin's log (under load, after the kill): counted
        // here, not against the next build.
        var settled = -1
        while settled != origin.requests.count {
            settled = origin.requests.count
            try await Task.sleep(nanoseconds: 300_000_000)
        }
    }

    func build(_ folder: TemporaryFolder, _ arguments: [String] = []) async throws -> ToolResult {
        try await run("env", [Self.epoch, packagerExecutable, "build"] + arguments, in: folder.path)
    }

    @Test(
        "SIGKILL mid-crawl: the next build says what it kept, fetches only the rest, writes the bundle an uninterrupted build writes, and removes the journal")
    func resumesAfterKill() async throws {
        try await withOrigin { origin in
            KillTests.serveSlowSite(origin, version: 1)
            let folder = try TemporaryFolder()
            try folder.file("packager.yml", "output: site.zip\nseeds: [\(origin.base)/]\nrobots: false\nconcurrency: {total: 8, per-host: 8}\n")
            let reference = try await build(folder, ["-o", "ref.zip"])
            #expect(reference.status == 0, "\(reference.output)")
            #expect(try folder.contents() == ["packager.yml", "ref.zip"])
            try await killMidCrawl(folder, origin)

            let before = origin.requests.count
            let resumed = try await build(folder)
            #expect(resumed.status == 0, "\(resumed.output)")
            let kept = resumed.output.firstMatch(of: /resuming: (\d+) responses/).flatMap { Int($0.1) } ?? 0
            // What was in flight when it was killed is not kept: fewer than the 20 requests it made.
            #expect(kept > 0 && resumed.output.contains("resumed \(kept) from the interrupted build"), "\(resumed.output)")
            // 65 URLs in all: only those not kept are asked for again (the query probe's two requests besides).
            let asked = origin.requests.dropFirst(before).filter { !$0.path.contains("packager-query-probe") }
            #expect(asked.count <= 65 - kept + 1, "\(asked.count) requests after keeping \(kept): \(asked.map { "\($0.method) \($0.path)" }.sorted())")
            let site = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/site.zip"))
            #expect(site == (try Data(contentsOf: URL(fileURLWithPath: folder.path + "/ref.zip"))), "the resumed bundle differs from the uninterrupted one")
            #expect(try folder.contents() == ["packager.yml", "ref.zip", "site.zip"])
        }
    }

    @Test("a journal of another declaration, a damaged one, one cut mid-record, and --fresh: ignored or trimmed with a line, never mixed in")
    func foreignJournals() async throws {
        try await withOrigin { origin in
            KillTests.serveSlowSite(origin, version: 1)
            let folder = try TemporaryFolder()
            try folder.file("packager.yml", "output: site.zip\nseeds: [\(origin.base)/]\nrobots: false\nconcurrency: {total: 8, per-host: 8}\n")
            let reference = try await build(folder, ["-o", "ref.zip"])
            #expect(reference.status == 0, "\(reference.output)")
            let referenceBytes = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/ref.zip"))
            let log = folder.path + "/.site.zip.packager-journal/log"

            // Another declaration (the same site, other concurrency): started over.
            try await killMidCrawl(folder, origin)
            try folder.file("packager.yml", "output: site.zip\nseeds: [\(origin.base)/]\nrobots: false\nconcurrency: {total: 4, per-host: 4}\n")
            var result = try await build(folder)
            #expect(result.status == 0 && result.output.contains("was not resumed from: it was left by another declaration"), "\(result.output)")
            #expect(!result.output.contains("from the interrupted build"))
            try folder.file("packager.yml", "output: site.zip\nseeds: [\(origin.base)/]\nrobots: false\nconcurrency: {total: 8, per-host: 8}\n")

            // Its header damaged: started over.
            try await killMidCrawl(folder, origin)
            let handle = try #require(FileHandle(forUpdatingAtPath: log))
            try handle.write(contentsOf: Data(repeating: 0, count: 8))
            try handle.close()
            result = try await build(folder)
            #expect(result.status == 0 && result.output.contains("it is damaged"), "\(result.output)")

            // A record cut off (garbage after the last whole one): that much is dropped, the rest resumed.
            try await killMidCrawl(folder, origin)
            let append = try #require(FileHandle(forWritingAtPath: log))
            try append.seekToEnd()
            try append.write(contentsOf: Data([0x40, 0, 0, 0, 1, 2, 3]))
            try append.close()
            result = try await build(folder)
            #expect(result.status == 0 && result.output.contains("the record it was writing when it stopped was dropped"), "\(result.output)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/site.zip")) == referenceBytes)

            // --fresh: started over, on purpose.
            try await killMidCrawl(folder, origin)
            result = try await build(folder, ["--fresh"])
            #expect(
                result.status == 0 && result.output.contains("starting over (--fresh)") && !result.output.contains("from the interrupted build"),
                "\(result.output)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/site.zip")) == referenceBytes)
            #expect(try folder.contents() == ["packager.yml", "ref.zip", "site.zip"])
        }
    }

    @Test("a journal written by another packager version is ignored with the versions named")
    func otherVersion() throws {
        let folder = try TemporaryFolder()
        let output = folder.path + "/x.zip"
        let journalFolder = BuildJournal.folder(forOutput: output)
        try FileManager.default.createDirectory(atPath: journalFolder, withIntermediateDirectories: false)
        var header = ScratchRecordWriter()
        header.integer(UInt8(0))
        header.string(BuildJournal.magic)
        header.integer(BuildJournal.formatVersion)
        header.string("0.0.0")
        header.string("f")
        try Data(BuildJournal.frame(header.bytes)).write(to: URL(fileURLWithPath: journalFolder + "/log"))
        let notices = NoticeLog()
        let journal = BuildJournal.open(output: output, fingerprint: "f", fresh: false, limit: 1 << 30) { notices.add($0) }
        #expect(journal != nil)
        #expect(notices.all.contains { if case .ignored(let reason) = $0 { reason.contains("packager 0.0.0") } else { false } }, "\(notices.all)")
        // Started anew: nothing kept.
        #expect(journal?.kept.responses == 0)
    }

    @Test("records round-trip; a torn record at any length is dropped, and the ones before it are kept")
    func records() throws {
        let folder = try TemporaryFolder()
        let output = folder.path + "/x.zip"
        let records = [
            BuildJournal.Record(
                key: "https://a.example/", status: 200, httpVersion: "HTTP/1.1", fetchedAt: Date(timeIntervalSince1970: 1_767_225_600.5), attempts: 1,
                headers: [.init(name: "content-type", value: "text/html")], bodySize: 5, body: .inline(Array("hello".utf8))),
            BuildJournal.Record(
                key: "https://a.example/x", status: 301, httpVersion: "HTTP/2", fetchedAt: Date(timeIntervalSince1970: 5), attempts: 2,
                headers: [.init(name: "location", value: "/y")], bodySize: 0, body: .none),
            BuildJournal.Record(
                key: "https://a.example/big", status: 200, httpVersion: "HTTP/1.1", fetchedAt: Date(timeIntervalSince1970: 6), attempts: 1, headers: [],
                bodySize: 3, body: .file(name: "ab.body", crc: 7)),
        ]
        for record in records { #expect(BuildJournal.decode(BuildJournal.encode(record)) == record) }
        let fingerprint = "test"
        BuildJournal.open(output: output, fingerprint: fingerprint, fresh: false, limit: 1 << 30) { _ in }?.close()
        let log = BuildJournal.folder(forOutput: output) + "/log"
        let header = try Data(contentsOf: URL(fileURLWithPath: log))
        let first = Data(BuildJournal.frame(BuildJournal.encode(records[0])))
        let second = Data(BuildJournal.frame(BuildJournal.encode(records[1])))
        for cut in 0..<second.count {
            try (header + first + second.prefix(cut)).write(to: URL(fileURLWithPath: log))
            var notices = NoticeLog()
            var opened: BuildJournal?
            // A process another test launches at that moment holds the folder's descriptor (and so its lock) from its fork
            // until its exec closes it: in the full run an open found the lock taken. Tried again, within 5 s.
            for _ in 0..<250 {
                let attempt = NoticeLog()
                notices = attempt
                opened = BuildJournal.open(output: output, fingerprint: fingerprint, fresh: false, limit: 1 << 30) { attempt.add($0) }
                if opened != nil { break }
                usleep(20_000)
            }
            let journal = try #require(opened, "\(notices.all)")
            // Its lock is let go of at once, not whenever the object goes: the next open in this loop takes it.
            defer { journal.close() }
            #expect(journal.kept.responses == 1, "cut at \(cut)")
            #expect(notices.all.contains { if case .resuming(1, 5, let dropped) = $0 { dropped == (cut > 0) } else { false } }, "cut at \(cut): \(notices.all)")
            let replayed = journal.replay("https://a.example/", spoolPath: folder.path + "/spool", memory: nil)
            #expect(replayed?.status == 200 && replayed?.bodyBytes() == Array("hello".utf8))
            #expect(journal.replay("https://a.example/", spoolPath: folder.path + "/spool", memory: nil) == nil, "a key is taken once")
        }
        // Whole in length, a byte changed inside: its CRC-32 fails, and it is dropped as a torn one is.
        var damaged = second
        let value = try #require(damaged.range(of: Data("/y".utf8)))
        damaged[value.lowerBound + 1] = UInt8(ascii: "z")
        try (header + first + damaged).write(to: URL(fileURLWithPath: log))
        let journal = try #require(BuildJournal.open(output: output, fingerprint: fingerprint, fresh: false, limit: 1 << 30) { _ in })
        #expect(journal.kept.responses == 1)
    }
}

/// Whether this process may mount a tmpfs (root with CAP_SYS_ADMIN), for a disk of its own to fill.
private let canMountTmpfs: Bool = {
    guard getuid() == 0, let folder = try? TemporaryFolder() else { return false }
    guard (try? run("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", folder.path]))?.status == 0 else { return false }
    _ = try? run("umount", [folder.path])
    return true
}()

extension ResumeTests {
    @Test(
        "a full disk: the build fails (exit 1) naming the system's reason and the file, blames no origin, and writes nothing at the output",
        .enabled(if: canMountTmpfs, "this process cannot mount a tmpfs (needs root and CAP_SYS_ADMIN) to fill"))
    func diskFull() async throws {
        let folder = try TemporaryFolder()
        #expect(try await run("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", folder.path]).status == 0)
        defer {
            if let umount = try? launch("/usr/bin/umount", [folder.path], output: Pipe()) { umount.waitUntilExit() }
        }
        try await withOrigin { origin in
            origin.set("/", .text("<a href=\"/big.bin\">big</a>", type: "text/html"))
            origin.set("/big.bin", Origin.Resource(headers: [("Content-Type", "application/octet-stream")], body: Array(noise(6 << 20, seed: 4))))
            let result = try await run(packagerExecutable, ["build", "--seed", origin.base + "/", "-o", "site.zip", "--no-robots"], in: folder.path)
            #expect(result.status == 1, "\(result.output)")
            #expect(result.output.contains("no space left on device (\(folder.path)/.packager-scratch-"), "\(result.output)")
            #expect(!result.output.contains("is it down"), "\(result.output)")
            #expect(!FileManager.default.fileExists(atPath: folder.path + "/site.zip"))
        }
    }
}

/// Notices a journal gave, in order.
final class NoticeLog: Sendable {
    private let notices = Mutex<[BuildJournal.Notice]>([])
    func add(_ notice: BuildJournal.Notice) { notices.withLock { $0.append(notice) } }
    var all: [BuildJournal.Notice] { notices.withLock { $0 } }
}

@Suite("secrets stay out of bundles and reports")
struct SecretTests {
    @Test("a token from the environment, sent as a header, is in no byte of the bundle, the build report or any verify report")
    func tokenNowhere() async throws {
        let token = "tok-\(UUID().uuidString)"
        try await withOrigin { origin in
            origin.set(
                "/",
                .text(
                    "<a href=\"/docs.html\">docs</a><a href=\"/missing.html\">gone</a><a href=\"/moved\">moved</a><a href=\"http://127.0.0.1:9/down.html\">down</a>",
                    type: "text/html"))
            origin.set("/docs.html", .text("<p>docs</p>", type: "text/html", headers: [("ETag", "\"d1\"")]))
            origin.set("/moved", .redirect("/docs.html"))
            let folder = try TemporaryFolder()
            try folder.file(
                "packager.yml",
                "output: site.zip\nseeds: [\(origin.base)/]\nscope: {hosts: [\"\(origin.base)\", \"http://127.0.0.1:9\"]}\nrobots: false\nheaders:\n  Authorization: Bearer ${SITE_TOKEN}\n  X-Api-Key: ${SITE_TOKEN}\nretries: {attempts: 1, backoff: 50ms}\ntimeouts: {connect: 500ms}\nmax-errors: 10\n"
            )
            var outputs: [String] = []
            let build = try await run("env", ["SITE_TOKEN=\(token)", packagerExecutable, "build", "--json"], in: folder.path)
            outputs.append(build.output)
            #expect(build.status == 0 && build.output.contains("missing.html") && build.output.contains("down.html"), "\(build.output)")
            // The server saw the token: it was really sent.
            #expect(origin.requests.contains { $0.headers["authorization"] == "Bearer \(token)" && $0.headers["x-api-key"] == token })
            // Make verify find changes and failures, so every report has something to say.
            origin.set("/docs.html", .text("<p>new docs</p>", type: "text/html", headers: [("ETag", "\"d2\"")]))
            let sentBefore = origin.requests.filter { $0.headers["authorization"] == "Bearer \(token)" }.count
            for format in ["text", "json", "junit", "markdown", "html"] {
                let verify = try await run(
                    "env",
                    [
                        "SITE_TOKEN=\(token)", packagerExecutable, "verify", "site.zip", "--declaration", "packager.yml", "--format", format, "--output",
                        "report.\(format)",
                    ],
                    in: folder.path)
                outputs.append(verify.output)
                #expect(verify.status == 1 || verify.status == 2, "\(verify.output)")
            }
            // Every verify run sent the token too (so its absence from the reports means something).
            #expect(origin.requests.filter { $0.headers["authorization"] == "Bearer \(token)" }.count >= sentBefore + 5)
            for output in outputs { #expect(!output.contains(token)) }
            let files = try folder.contents()
            #expect(files.contains("site.zip") && files.contains("report.html") && files.contains("report.junit"))
            for name in files {
                let bytes = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/" + name))
                #expect(bytes.range(of: Data(token.utf8)) == nil, "the token is in \(name)")
            }
        }
    }
}

@Suite("packager demo")
struct DemoTests {
    @Test("the demo builds, serves offline, flags the two changed pages and the deleted one, and stops its servers")
    func demo() async throws {
        let folder = try TemporaryFolder()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let result = try await run(packagerExecutable, ["demo", "--site", root + "/Templates/demo-site", "--output", folder.path + "/demo"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("flagged: docs/changelog.html, docs/faq.html, docs/rate-limits.html"))
        #expect(result.output.contains("GET /ads/tracker.js  ->  204"))
        // The origin it started (its port is in the output) no longer answers.
        let port = try #require(result.output.firstMatch(of: #/http://127\.0\.0\.1:(\d+)/ serves/#)?.output.1)
        let probe = try await run("curl", ["-s", "-o", "/dev/null", "--max-time", "2", "http://127.0.0.1:\(port)/"])
        #expect(probe.status == 7, "curl exit \(probe.status): something still listens on \(port)")
        for name in ["packager.yml", "demo.bundle.zip", "verify.html", "verify.xml", "site"] {
            #expect(FileManager.default.fileExists(atPath: folder.path + "/demo/" + name), "\(name) missing")
        }
        #expect(Checker.check(path: folder.path + "/demo/demo.bundle.zip").issues.isEmpty)
        let junit = try String(contentsOfFile: folder.path + "/demo/verify.xml", encoding: .utf8)
        #expect(junit.contains("failures=\"3\""), "\(junit.prefix(400))")
        // A site that is not there is a usage error.
        let missing = try await run(packagerExecutable, ["demo", "--site", folder.path + "/nowhere", "--output", folder.path + "/x"])
        #expect(missing.status == 2 && missing.output.contains("is not a site folder"), "\(missing.output)")
    }
}

@Suite("pack --stored-index: index.bin stored, the same bundle digest")
struct StoredIndexTests {
    @Test("pack writes index.bin deflated by default and stored with --stored-index; both mount, with one digest and the same answers")
    func storedIndex() async throws {
        let folder = try TemporaryFolder()
        let siteFolder = try TemporaryFolder()
        try makeSite(in: siteFolder)
        let deflated = folder.path + "/deflated.zip"
        let stored = folder.path + "/stored.zip"
        let base = "http://127.0.0.1:9/"
        let a = try await run(packagerExecutable, ["pack", siteFolder.path, "--base-url", base, "-o", deflated])
        let b = try await run(packagerExecutable, ["pack", siteFolder.path, "--base-url", base, "-o", stored, "--stored-index"])
        #expect(a.status == 0 && b.status == 0, "\(a.output) \(b.output)")
        let x = try MountedBundle(path: deflated)
        let y = try MountedBundle(path: stored)
        #expect(x.metadata[BundleFormat.indexEntryName]?.method == 8 && y.metadata[BundleFormat.indexEntryName]?.method == 0)
        #expect(x.digest == y.digest && x.formatVersion == 3 && y.formatVersion == 3)
        #expect(
            try FileManager.default.attributesOfItem(atPath: stored)[.size] as! Int
                > (try FileManager.default.attributesOfItem(atPath: deflated)[.size] as! Int))
        for entry in x.entries {
            let other = try #require(y.entry(forKey: entry.key))
            #expect(try x.body(of: entry) == y.body(of: other), "\(entry.key)")
        }
        #expect(try await run(packagerExecutable, ["check", stored]).status == 0)
    }
}

@Suite("outputs that are inputs, and sizes that would exhaust the machine, are refused before anything is written")
struct RefusedOutputTests {
    @Test("an output that is one of the command's inputs is refused (exit 2, naming it), and the input is left as it was")
    func outputThatIsAnInput() async throws {
        let folder = try TemporaryFolder()
        let siteFolder = try TemporaryFolder()
        try makeSite(in: siteFolder)
        let site = siteFolder.path
        let bundle = folder.path + "/a.zip"
        #expect(try await run(packagerExecutable, ["pack", site, "--base-url", "http://127.0.0.1:9/", "-o", bundle]).status == 0)
        #expect(try await run(packagerExecutable, ["pack", site, "--base-url", "http://127.0.0.1:9/x/", "-o", folder.path + "/b.zip"]).status == 0)
        try folder.file("site.yml", "seeds: [\"http://127.0.0.1:9/\"]\n")
        try folder.file("r.har", "{\"log\": {\"entries\": []}}")
        let before = try Data(contentsOf: URL(fileURLWithPath: bundle))
        // The same file by another path is the same file.
        let sameByAnotherPath = folder.path + "/./a.zip"
        let commands: [([String], String)] = [
            (["export", bundle, "-o", sameByAnotherPath, "--format", "zip"], "the bundle to export"),
            (["delta", bundle, folder.path + "/b.zip", "-o", bundle], "OLD"),
            (["delta", folder.path + "/b.zip", bundle, "-o", bundle], "NEW"),
            (["verify", bundle, "--format", "junit", "-o", bundle], "the bundle to verify"),
            (["refresh", bundle, "--delta-out", bundle], "the bundle to refresh"),
            (["refresh", folder.path + "/b.zip", "-o", bundle, "--delta-out", bundle], "the refreshed bundle's path"),
            (["pack", "--from-har", folder.path + "/r.har", "-o", folder.path + "/r.har"], "the recording to pack"),
            (["pack", bundle, "--base-url", "http://127.0.0.1:9/", "-o", bundle], "the folder or archive to pack"),
            (["build", folder.path + "/site.yml", "-o", folder.path + "/site.yml"], "the declaration"),
        ]
        for (arguments, what) in commands {
            let result = try await run(packagerExecutable, arguments)
            #expect(result.status == 2 && result.output.contains("is \(what)"), "\(arguments): \(result.status) \(result.output)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: bundle)) == before)
        #expect(try String(contentsOfFile: folder.path + "/site.yml", encoding: .utf8).hasPrefix("seeds"))
        // build resolves -o against the declaration's folder, as the declaration's own paths: conf/site.yml -o site.yml
        // names conf/site.yml; and with no declaration given, it reads packager.yml.
        try folder.file("conf/site.yml", "seeds: [\"http://127.0.0.1:9/\"]\n")
        let relative = try await run(packagerExecutable, ["build", "conf/site.yml", "-o", "site.yml"], in: folder.path)
        #expect(relative.status == 2 && relative.output.contains("is the declaration"), "\(relative.output)")
        try folder.file("packager.yml", "seeds: [\"http://127.0.0.1:9/\"]\n")
        let implicit = try await run(packagerExecutable, ["build", "-o", "packager.yml"], in: folder.path)
        #expect(implicit.status == 2 && implicit.output.contains("is the declaration"), "\(implicit.output)")
        #expect(try String(contentsOfFile: folder.path + "/conf/site.yml", encoding: .utf8).hasPrefix("seeds"))
        // Refreshing in place is what refresh does: not refused here (it fails later, the origin being closed).
        let inPlace = try await run(packagerExecutable, ["refresh", bundle, "-o", bundle, "--retries", "0"])
        #expect(!inPlace.output.contains("which this command reads"), "\(inPlace.output)")
    }

    @Test("mistaken paths and hosts are said in words, before anything is fetched or written: no Foundation or NIO error reaches the user")
    func mistakenPaths() async throws {
        let folder = try TemporaryFolder()
        let siteFolder = try TemporaryFolder()
        try makeSite(in: siteFolder)
        let bundle = folder.path + "/a.zip"
        #expect(try await run(packagerExecutable, ["pack", siteFolder.path, "--base-url", "http://127.0.0.1:9/", "-o", bundle]).status == 0)
        let cases: [([String], String)] = [
            (["extract", bundle, bundle], "this is a file, not a folder to extract into"),
            (["extract", bundle, ""], "give the folder to extract into"),
            (["verify", bundle, "-o", folder.path], "is a folder: give the path of the file to write"),
            (["verify", bundle, "-o", folder.path + "/no/such/report.xml"], "does not exist"),
            (["diff", "http://127.0.0.1:9/a.zip", bundle], "is a URL: diff reads bundle files"),
            (["serve", bundle, "--host", "999.1.1.1", "--port", "0"], "cannot serve on 999.1.1.1: it is not an address"),
            (["serve", bundle, "--cache-size", "1T", "--port", "99999"], "--port must be 0 to 65535"),
        ]
        for (arguments, said) in cases {
            let result = try await run(packagerExecutable, arguments)
            #expect(result.status != 0 && result.output.contains(said) && !result.output.contains("Error Domain"), "\(arguments): \(result.output)")
        }
        // An output path given wrong is the wrong input (exit 2), for every command that writes one.
        for arguments in [
            ["verify", bundle, "-o", folder.path + "/no/such/report.xml"], ["apply", bundle, bundle, "-o", folder.path + "/no/such/x.zip"],
            ["export", bundle, "-o", folder.path + "/no/such/x.har", "--format", "har"], ["export", bundle, "-o", folder.path, "--format", "har"],
            ["export", bundle, "-o", folder.path + "/no/such/x.warc.gz", "--format", "warc"],
            ["export", bundle, "-o", folder.path + "/no/such/x.wacz", "--format", "wacz"],
        ] {
            let result = try await run(packagerExecutable, arguments)
            #expect(result.status == 2 && (result.output.contains("/no/such") || result.output.contains("is a folder")), "\(arguments): \(result.output)")
        }
        // apply -o over the bundle it reads: refused before anything is read or written (a service may serve the base).
        let overBase = try await run(packagerExecutable, ["apply", bundle, bundle, "-o", bundle])
        #expect(overBase.status == 2 && overBase.output.contains("which this command reads"), "\(overBase.output)")
        let stripped = try await run(packagerExecutable, ["extract", bundle, folder.path + "/x", "--strip-components", "5"])
        #expect(stripped.status == 0 && stripped.output.contains("had no more than 5 path components and were not written"), "\(stripped.output)")
    }

    @Test("failures with one reason are one group; --quiet prints the outcome and what failed, --verbose every URL")
    func groupedFailures() async throws {
        try await withOrigin { origin in
            let port = try closedPort()
            let links = (0..<9).map { "<a href=\"http://127.0.0.1:\(port)/p\($0).html\">\($0)</a>" }.joined()
            origin.set("/", .init(headers: [("content-type", "text/html")], body: Array("<html><body>\(links)</body></html>".utf8)))
            let folder = try TemporaryFolder()
            let declaration = """
                output: site.zip
                seeds: [\(origin.base)/]
                scope:
                  hosts: [\(origin.base), "http://127.0.0.1:\(port)"]
                retries: 0
                max-errors: 20
                """
            try folder.file("packager.yml", declaration)
            let plain = try await run(packagerExecutable, ["build", "packager.yml", "--fresh"], in: folder.path)
            #expect(plain.status == 0, "\(plain.output)")
            let lines = plain.output.split(separator: "\n").map(String.init)
            let group = try #require(lines.firstIndex { $0.hasPrefix("  failed these 9: ") }, "\(plain.output)")
            #expect(lines[group].contains("connection refused"), "\(plain.output)")
            #expect(
                lines[(group + 1)...].prefix(4)
                    == ArraySlice([
                        "    http://127.0.0.1:\(port)/p0.html, linked from \(origin.base)/",
                        "    http://127.0.0.1:\(port)/p1.html, linked from \(origin.base)/",
                        "    http://127.0.0.1:\(port)/p2.html, linked from \(origin.base)/", "    ... and 6 more (--verbose lists them)",
                    ]), "\(plain.output)")
            let verbose = try await run(packagerExecutable, ["build", "packager.yml", "--fresh", "--verbose"], in: folder.path)
            #expect(verbose.output.split(separator: "\n").filter { $0.hasPrefix("    http://127.0.0.1:\(port)/p") }.count == 9, "\(verbose.output)")
            let quiet = try await run(packagerExecutable, ["build", "packager.yml", "--fresh", "-q"], in: folder.path)
            let said = quiet.output.split(separator: "\n").map(String.init)
            #expect(quiet.status == 0 && said.first?.hasPrefix("built ") == true && !said.contains { $0.hasPrefix("  fetched ") }, "\(quiet.output)")
            #expect(said.contains { $0.hasPrefix("  failed these 9: ") }, "\(quiet.output)")
        }
    }

    @Test("a build's concurrency is at most 1024, on the command line and in a declaration (a task and a connection each)")
    func concurrencyBound() async throws {
        let folder = try TemporaryFolder()
        let flag = try await run(packagerExecutable, ["build", "--seed", "http://127.0.0.1:9/", "--concurrency", "99999999999", "-o", folder.path + "/o.zip"])
        #expect(flag.status == 2 && flag.output.contains("--concurrency must be 1 to 1024"), "\(flag.output)")
        try folder.file("site.yml", "seeds: [\"http://127.0.0.1:9/\"]\nconcurrency: {total: 5000}\n")
        let declared = try await run(packagerExecutable, ["build", folder.path + "/site.yml", "-o", folder.path + "/o.zip"])
        #expect(declared.status == 2 && declared.output.contains("site.yml:2:22: concurrency.total must be 1 to 1024"), "\(declared.output)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/o.zip"))
    }
}
