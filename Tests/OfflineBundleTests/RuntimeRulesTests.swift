import Foundation
import HTTPTypes
import OfflineBundle
import PackagerKit
import TestSupport
import Testing

@Suite("runtime rules, Age and the last-seen cache, through the loader")
struct RuntimeRulesTests {
    let origin = "https://docs.example.com"

    @Test("Age is present on bundle answers and grows with time")
    func ageGrows() async throws {
        let folder = try TemporaryFolder()
        let loader = try runtimeLoader(origin: origin, folder: folder, policy: .bundleOnly)
        let first = try #require(loader.response(for: BundleRequest(url: origin + "/")))
        let before = try #require(first.header("age").flatMap(Int.init))
        #expect(before >= 100 && before < 200)
        #expect(first.source == .bundle("release.zip"))
        try await Task.sleep(for: .milliseconds(1100))
        let after = try #require(loader.response(for: BundleRequest(url: origin + "/"))?.header("age").flatMap(Int.init))
        #expect(after > before)
        // Rules and the hotfix bundle say what answered.
        #expect(loader.response(for: BundleRequest(url: origin + "/flags.json"))?.source == .rule)
        #expect(loader.response(for: BundleRequest(url: origin + "/hotfix.txt"))?.source == .bundle("hotfix.zip"))
        #expect(loader.response(for: BundleRequest(url: "https://elsewhere.example/tracker/x"))?.status == 204)
    }

    @Test("a rule added later wins over earlier rules and the bundles; the loader it came from is unchanged")
    func precedence() throws {
        let folder = try TemporaryFolder()
        let loader = try runtimeLoader(origin: origin, folder: folder, policy: .bundleFirst)
        let stricter = try loader.adding(OfflineRules(block: ["*/override.txt"], overrides: [PolicyOverride(.host("docs.example.com"), policy: .bundleOnly)]))
        #expect(stricter.response(for: BundleRequest(url: origin + "/override.txt"))?.status == 204)
        #expect(try loader.response(for: BundleRequest(url: origin + "/override.txt"))?.bodyData() == Data("from the rule".utf8))
        #expect(stricter.policy(for: origin + "/") == .bundleOnly && loader.policy(for: origin + "/") == .bundleFirst)
        // A missing file is refused when the rule is added, named.
        let error = try #require(throws: BundleError.self) { try loader.adding(OfflineRules(substitutions: [.url(origin + "/x", file: "/nonexistent/x.js")])) }
        #expect(error.message.contains("/nonexistent/x.js"))
    }

    @Test("a folder substitution answers its files, never a hidden one or one outside it, and a POST to a blocked URL is blocked")
    func folderAndMethods() throws {
        let folder = try TemporaryFolder()
        try folder.file("assets/app.css", "body{}")
        try folder.file("assets/.env", "SECRET=1")
        try folder.file("outside.txt", "not yours")
        try FileManager.default.createSymbolicLink(atPath: folder.path + "/assets/link.txt", withDestinationPath: folder.path + "/outside.txt")
        let base = try runtimeLoader(origin: origin, folder: folder, policy: .networkFirst(timeout: .seconds(5)))
        // A prefix without its trailing slash names the folder all the same.
        let loader = try base.adding(OfflineRules(substitutions: [.prefix("https://cdn.example.com/assets", folder: folder.path + "/assets")]))
        #expect(try loader.response(for: BundleRequest(url: "https://cdn.example.com/assets/app.css"))?.bodyData() == Data("body{}".utf8))
        for path in ["/assets/.env", "/assets/link.txt", "/assets/%2e%2e%2foutside.txt", "/assets/missing.css"] {
            #expect(loader.response(for: BundleRequest(url: "https://cdn.example.com" + path))?.status == 404, "\(path)")
        }
        // Dot segments are resolved before matching: this URL is not under the prefix at all.
        #expect(loader.response(for: BundleRequest(url: "https://cdn.example.com/assets/%2e%2e/outside.txt"))?.status == nil)
        #expect(loader.response(for: BundleRequest(url: "https://cdn.example.com/assets-old/x"))?.status == nil)
        // Any method to a blocked URL is answered 204 and planned off the network; other POSTs go to the network.
        for url in [origin + "/tracker/beacon", origin + "/runtime-blocked/beacon"] {
            guard case .answer(let answer) = loader.plan(for: BundleRequest(method: "POST", url: url)), answer.status == 204 else {
                Issue.record("a POST to \(url) was not blocked")
                continue
            }
        }
        guard case .network = loader.plan(for: BundleRequest(method: "POST", url: origin + "/")) else {
            Issue.record("a POST to an unblocked URL should go to the network")
            return
        }
    }

    @Test("a rules file with a mistake says which line and what is wrong")
    func rulesFileErrors() throws {
        for (text, wanted) in [
            ("block: [\"*/a/*\"]\nsubstitution: []\n", "rules.yml:2:1: unknown key 'substitution'"),
            ("substitutions:\n  - url: https://a.example/x\n", "rules.yml:2:5: a substitution needs either"),
            ("policies:\n  - host: a.example\n    policy: sometimes\n", "rules.yml:3:13: unknown policy 'sometimes'"),
            ("substitutions:\n  - url: ftp://a.example/x\n    file: x\n", "rules.yml:2:10: substitution url 'ftp://a.example/x'"),
        ] {
            let error = try #require(throws: BundleError.self) { try OfflineRules(yaml: text) }
            #expect(error.message.hasPrefix(wanted), "\(error.message)")
        }
        let rules = try OfflineRules(yaml: "policies:\n  - url: \"https://*/live/*\"\n    policy: network-first\n    timeout: 1.5s\n")
        #expect(rules.overrides.first?.policy == .networkFirst(timeout: .milliseconds(1500)))
    }

    @Test("the last-seen cache keeps what it may, evicts the least recently used past its size, and survives a reopen")
    func lastSeenCache() throws {
        let folder = try TemporaryFolder()
        let cache = try LastSeenCache(directory: folder.path + "/seen", maxBytes: 3000)
        let loader = try runtimeLoader(origin: origin, folder: folder, policy: .networkFirst(timeout: .seconds(5)), options: LoaderOptions(lastSeen: cache))
        let body = Data(repeating: 0x61, count: 300)
        let headers: HTTPFields = [.contentType: "text/plain"]
        func request(_ path: String, _ extra: HTTPFields = [:]) -> BundleRequest { BundleRequest(url: origin + path, headers: extra) }
        #expect(loader.remember(request("/a"), status: 200, headers: headers, body: body))
        #expect(!loader.remember(request("/b"), status: 200, headers: [.cacheControl: "no-store"], body: body))
        #expect(!loader.remember(request("/c"), status: 200, headers: [.cacheControl: "private, max-age=60"], body: body))
        #expect(!loader.remember(request("/d", [.authorization: "Bearer x"]), status: 200, headers: headers, body: body))
        #expect(!loader.remember(request("/e"), status: 404, headers: headers, body: body))
        #expect(!loader.remember(BundleRequest(url: "https://other.example/a"), status: 200, headers: headers, body: body))
        #expect(!loader.remember(request("/big"), status: 200, headers: headers, body: Data(count: 1000)))
        // The kept response answers before the bundle (which has no /a), with its Age.
        let kept = try #require(loader.response(for: request("/a")))
        #expect(try kept.source == .lastSeen && kept.bodyData() == body && kept.header("age") != nil)
        // Fill past 3000 bytes: the least recently used go first; /a was used last, after /f.. were written.
        for i in 0..<6 { #expect(loader.remember(request("/f\(i)"), status: 200, headers: headers, body: body)) }
        _ = loader.response(for: request("/f5"))
        for i in 6..<8 { #expect(loader.remember(request("/f\(i)"), status: 200, headers: headers, body: body)) }
        #expect(cache.bytesUsed <= 3000)
        #expect(loader.response(for: request("/f0")) == nil)
        #expect(loader.response(for: request("/f5"))?.source == .lastSeen)
        // A minimum lifetime refuses responses that say they go stale sooner, or say nothing.
        let strict = try LastSeenCache(directory: folder.path + "/strict", maxBytes: 1 << 20, minimumLifetime: .seconds(60))
        let strictLoader = try runtimeLoader(origin: origin, folder: folder, policy: .bundleFirst, options: LoaderOptions(lastSeen: strict))
        #expect(!strictLoader.remember(request("/g"), status: 200, headers: headers, body: body))
        #expect(!strictLoader.remember(request("/g"), status: 200, headers: [.cacheControl: "max-age=30"], body: body))
        #expect(strictLoader.remember(request("/g"), status: 200, headers: [.cacheControl: "max-age=600"], body: body))
        // Reopened (a restart): the kept files are found again; no temporary file is left.
        let reopened = try LastSeenCache(directory: folder.path + "/seen", maxBytes: 3000)
        #expect(reopened.bytesUsed == cache.bytesUsed)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path + "/seen").allSatisfy { !$0.hasPrefix(".tmp-") })
    }
}

@Suite("bundle-first told to answer only 2xx entries")
struct OnlySuccessTests {
    @Test("a recorded redirect or error asks the network; the entry answers when the network cannot")
    func onlySuccess() throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        let bundle = try MountedBundle(path: folder.path + "/b.zip")
        let strict = OfflineLoader(bundles: [bundle], policy: .bundleFirst, options: LoaderOptions(bundleFirstAnswersOnlySuccess: true))
        let plain = OfflineLoader(bundles: [bundle], policy: .bundleFirst)
        let gone = BundleRequest(url: "https://docs.example.com/gone.html")
        guard case .network = strict.plan(for: gone) else {
            Issue.record("a recorded 404 should ask the network")
            return
        }
        guard case .answer(let answer) = plain.plan(for: gone), answer.status == 404 else {
            Issue.record("without the option the recorded 404 answers")
            return
        }
        #expect(strict.fallback(for: gone, networkAnswered: false)?.status == 404)
        guard case .answer(let page) = strict.plan(for: BundleRequest(url: "https://docs.example.com/")), page.status == 200 else {
            Issue.record("a 200 entry still answers")
            return
        }
        // A blocked entry (204) is a 2xx: still answered, never the network.
        guard case .answer(let blocked) = strict.plan(for: BundleRequest(url: "https://docs.example.com/ads.js")), blocked.status == 204 else {
            Issue.record("a blocked entry still answers")
            return
        }
    }
}
