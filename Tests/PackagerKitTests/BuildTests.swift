import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// A small site on a real loopback server: HTML, CSS with url() and @import, srcset, a redirect chain, a broken link,
/// a flaky resource, a slow one, a blocked script, a substituted logo and a robots.txt rule.
func serveSite(_ origin: Origin) {
    let html = "text/html; charset=utf-8"
    origin.set(
        "/",
        .text(
            """
            <!doctype html><html><head>
            <link rel="stylesheet" href="/css/site.css"><link rel="icon" href="favicon.ico">
            <link rel="preload" href="/data/flaky.json" as="fetch">
            <script src="/ads/tracker.js"></script>
            <style>.hero { background: url('img/hero.jpg') }</style>
            </head><body>
            <img src="/assets/logo.svg" alt="logo">
            <img src="img/a-1x.png" srcset="img/a-1x.png 1x, img/a-2x.png 2x">
            <picture><source srcset="img/wide.webp 800w"><img src="img/slow.png"></picture>
            <a href="about.html">About</a> <a href="about.html?utm_source=news#team">About again</a>
            <a href="/old">Old docs</a> <a href="/missing.html">Broken</a> <a href="/private/notes.html">Private</a>
            <a href="http://other.invalid/">Elsewhere</a> <a href="mailto:team@example.com">Mail</a>
            <!-- <a href="/commented.html">not a link</a> -->
            </body></html>
            """, type: html,
            headers: [
                ("ETag", "\"home-1\""), ("Last-Modified", "Sat, 21 Nov 2026 10:00:00 GMT"), ("Cache-Control", "max-age=60"),
                ("Set-Cookie", "session=abc"), ("X-Internal", "debug"),
            ]))
    origin.set("/about.html", .text("<html><body><a href=\"/\">Home</a><img src=\"img/a-1x.png\"></body></html>", type: html))
    origin.set("/css/site.css", .text("@import url(\"base.css\");\nbody { background: url(../img/bg.png) }\n/* url(/css/ignored.png) */", type: "text/css"))
    origin.set("/css/base.css", .text("@font-face { font-family: X; src: url('/fonts/x.woff2') format('woff2') }", type: "text/css"))
    for image in ["/img/a-1x.png", "/img/a-2x.png", "/img/bg.png", "/img/hero.jpg", "/img/wide.webp", "/favicon.ico", "/fonts/x.woff2"] {
        origin.set(image, Origin.Resource(headers: [("Content-Type", "application/octet-stream")], body: Array(image.utf8) + [0, 1, 2, 3]))
    }
    var slow = Origin.Resource(headers: [("Content-Type", "image/png")], body: Array(noise(20_000, seed: 3)))
    slow.delay = 1.0
    origin.set("/img/slow.png", slow)
    var flaky = Origin.Resource.text("{\"ok\": true}", type: "application/json")
    flaky.failures = 1
    flaky.retryAfter = "1"
    origin.set("/data/flaky.json", flaky)
    origin.set("/old", .redirect("/older", status: 301))
    origin.set("/older", .redirect("/docs/", status: 302))
    origin.set("/docs/", .text("<html><body><h1>Docs</h1><a href=\"../about.html\">About</a></body></html>", type: html))
    origin.set("/private/notes.html", .text("<p>private</p>", type: html))
    origin.set("/ads/tracker.js", .text("track()", type: "text/javascript"))
    origin.set("/robots.txt", .text("User-agent: *\nDisallow: /private/\n", type: "text/plain"))
}

@Suite("packager build crawls a real site into a bundle")
struct BuildTests {
    @Test("the bundle holds exactly the expected entries, with the expected headers, and no secret")
    func crawlsTheSite() async throws {
        try await withOrigin { origin in
            serveSite(origin)
            let folder = try TemporaryFolder()
            try folder.file("local/logo.svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"/>")
            let secret = "s3cr3t-token-\(UUID().uuidString)"
            let yaml = """
                output: out/site.bundle.zip
                seeds: ["\(origin.base)/"]
                headers:
                  Authorization: Bearer ${SITE_TOKEN}
                  Accept-Language: en
                retries: {attempts: 2, backoff: 100ms}
                substitutions:
                  - url: \(origin.base)/assets/logo.svg
                    file: local/logo.svg
                block: ["*/ads/*"]
                drop-query-parameters: ["utm_*"]
                """
            try folder.file("packager.yml", yaml)
            try FileManager.default.createDirectory(atPath: folder.path + "/out", withIntermediateDirectories: true)
            let declaration = try DeclarationParser(environment: ["SITE_TOKEN": secret]).parse(contentsOf: folder.path + "/packager.yml")
            let report = try await Builder(declaration: declaration).run()

            #expect(report.succeeded)
            #expect(
                report.failures.map(\.url) == ["\(origin.base)/missing.html"],
                "\(report.failures.map { "\($0.url): \($0.reason)" }) \(origin.requests.map(\.path).filter { $0.contains("bg") })")
            #expect(report.failures.first?.status == 404 && report.failures.first?.declared == false)
            #expect(report.skipped["disallowed by robots.txt"] == 1)
            #expect(report.skipped["origin http://other.invalid is not in scope"] == 1)

            let bundle = try MountedBundle(path: folder.path + "/out/site.bundle.zip")
            let bearer = fields([("Authorization", "Bearer any")])
            let keys = Set(bundle.entries.map(\.key))
            // Fetched with the declared bearer: keyed by it (security review 3, S3); the blocked and substituted entries
            // were never fetched, and are plain.
            let expected = Set(
                [
                    "/", "/about.html", "/css/site.css", "/css/base.css", "/img/a-1x.png", "/img/a-2x.png", "/img/bg.png", "/img/hero.jpg", "/img/wide.webp",
                    "/img/slow.png", "/favicon.ico", "/fonts/x.woff2", "/data/flaky.json", "/old", "/older", "/docs/", "/missing.html",
                ].map { origin.base + $0 + " h=authorization:bearer" } + ["/ads/tracker.js", "/assets/logo.svg"].map { origin.base + $0 })
            #expect(keys == expected, "extra: \(keys.subtracting(expected)), missing: \(expected.subtracting(keys))")

            let home = try #require(bundle.entry(for: BundleRequest(url: origin.base + "/", headers: bearer)))
            #expect(home.kind == .recorded && home.status == 200)
            #expect(home.header("etag") == "\"home-1\"")
            #expect(home.header("last-modified") == "Sat, 21 Nov 2026 10:00:00 GMT")
            #expect(home.header("cache-control") == "max-age=60")
            #expect(home.header("content-type") == "text/html; charset=utf-8")
            #expect(home.header("set-cookie") == nil && home.header("x-internal") == nil)

            // Format version 2 and later record where validators came from, when each response was fetched, the origin's Date, and
            // the declaration's rules, all read back through the runtime API.
            #expect(bundle.formatVersion == Int(BundleFormat.version))
            #expect(!home.etagSynthesized && !home.lastModifiedSynthesized)
            let fetched = try #require(home.fetchedAt)
            #expect(abs(fetched.timeIntervalSinceNow) < 120)
            #expect(try abs(#require(home.originDate).timeIntervalSince(fetched)) < 5)
            #expect(try abs(#require(bundle.createdAt).timeIntervalSince(fetched)) < 120)
            #expect(bundle.rules.block == ["*/ads/*"] && bundle.rules.dropQueryParameters == ["utm_*"])
            #expect(bundle.rules.substitutions == [origin.base + "/assets/logo.svg"] && bundle.rules.substitutionPrefixes.isEmpty)
            #expect(bundle.rules.blockPattern(matching: "http://new-ads.example/ads/pixel.gif") == "*/ads/*")
            #expect(bundle.rules.blockPattern(matching: origin.base + "/") == nil)

            let blocked = try #require(bundle.entry(for: origin.base + "/ads/tracker.js"))
            #expect(blocked.kind == .blocked && blocked.body == nil)
            #expect(origin.count("/ads/tracker.js") == 0)

            let logo = try #require(bundle.entry(for: origin.base + "/assets/logo.svg"))
            #expect(logo.kind == .substituted)
            // A local file has no origin validator: its ETag is synthesized from the digest, and says so.
            #expect(logo.etagSynthesized && logo.header("etag") == "\"" + (logo.body?.sha256.prefix(32) ?? "") + "\"")
            #expect(logo.fetchedAt == nil)
            #expect(try bundle.body(of: logo) == Data("<svg xmlns=\"http://www.w3.org/2000/svg\"/>".utf8))
            #expect(origin.count("/assets/logo.svg") == 0)

            let flaky = try #require(bundle.entry(for: BundleRequest(url: origin.base + "/data/flaky.json", headers: bearer)))
            #expect(try bundle.body(of: flaky) == Data("{\"ok\": true}".utf8))
            #expect(origin.count("/data/flaky.json") == 2)

            let slow = try #require(bundle.entry(for: BundleRequest(url: origin.base + "/img/slow.png", headers: bearer)))
            #expect(try bundle.body(of: slow) == noise(20_000, seed: 3))

            let hop1 = try #require(bundle.entry(for: BundleRequest(url: origin.base + "/old", headers: bearer)))
            let hop2 = try #require(bundle.entry(for: BundleRequest(url: origin.base + "/older", headers: bearer)))
            #expect(hop1.status == 301 && hop1.header("location") == "/older")
            #expect(hop2.status == 302 && hop2.header("location") == "/docs/")
            #expect(try #require(bundle.entry(for: BundleRequest(url: origin.base + "/missing.html", headers: bearer))).status == 404)

            // Every key was fetched once, robots.txt once, with the declared headers; then one page again, with and without
            // a query, to learn whether the origin ignores queries (this one does not: it answers 404 to the query).
            let probes = origin.requests.filter { $0.path.contains("packager-query-probe=") }
            #expect(probes.count == 1)
            #expect(bundle.rules.ignoreQuery.isEmpty)
            let pageRequests = origin.requests.filter { $0.path != "/robots.txt" && !$0.path.contains("packager-query-probe=") }
            #expect(pageRequests.count == Set(pageRequests.map(\.path)).count + 2)  // the flaky one twice, the probed page twice
            #expect(origin.count("/robots.txt") == 1)
            #expect(origin.count("/private/notes.html") == 0)
            #expect(pageRequests.allSatisfy { $0.headers["authorization"] == "Bearer \(secret)" && $0.headers["accept-language"] == "en" })

            // The secret is nowhere in the bundle's bytes, and the bundle passes standard tools.
            let bytes = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/out/site.bundle.zip"))
            #expect(bytes.range(of: Data(secret.utf8)) == nil)
            #expect(try await run("unzip", ["-tq", folder.path + "/out/site.bundle.zip"]).status == 0)
            #expect(Checker.check(path: folder.path + "/out/site.bundle.zip").issues.isEmpty)
            #expect(try folder.contents() == ["local", "out", "packager.yml"])
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path + "/out") == ["site.bundle.zip"])
        }
    }

    @Test("a seed that stays unreachable is retried, reported, and no bundle is written")
    func unreachableSeed() async throws {
        let folder = try TemporaryFolder()
        var declaration = Declaration()
        declaration.seeds = ["http://127.0.0.1:9/"]
        declaration.retries.attempts = 2
        declaration.retries.backoff = 0.05
        declaration.respectRobots = false
        // AsyncHTTPClient keeps trying to connect until the connect timeout; keep the test short.
        declaration.timeouts.connect = 0.5
        let report = try await Builder(declaration: declaration, options: .init(output: folder.path + "/x.zip")).run()
        #expect(!report.succeeded)
        let failure = try #require(report.failures.first)
        #expect(failure.declared && failure.attempts == 3 && failure.url == "http://127.0.0.1:9/")
        #expect(try folder.contents().isEmpty)
    }

    @Test("redirect loops and 503 bursts past the retries are failures with their cause")
    func redirectLoopAndBursts() async throws {
        try await withOrigin { origin in
            origin.set("/", .text("<a href=\"/a\">a</a><a href=\"/busy\">busy</a>", type: "text/html"))
            origin.set("/a", .redirect("/b"))
            origin.set("/b", .redirect("/a"))
            var busy = Origin.Resource.text("ok", type: "text/plain")
            busy.failures = 10
            origin.set("/busy", busy)
            let folder = try TemporaryFolder()
            var declaration = Declaration()
            declaration.seeds = [origin.base + "/"]
            declaration.retries.attempts = 2
            declaration.retries.backoff = 0.05
            var report = try await Builder(declaration: declaration, options: .init(output: folder.path + "/x.zip")).run()
            #expect(report.succeeded)
            let reasons = Dictionary(uniqueKeysWithValues: report.failures.map { ($0.url, $0.reason) })
            #expect(reasons[origin.base + "/a"]?.contains("redirect loop") == true)
            #expect(reasons[origin.base + "/busy"] == "HTTP 503")
            #expect(origin.count("/busy") == 3)
            // With max-errors 1 the same crawl fails, and leaves nothing behind.
            let again = try TemporaryFolder()
            report = try await Builder(declaration: declaration, options: .init(output: again.path + "/x.zip", maxErrors: 1)).run()
            #expect(!report.succeeded)
            #expect(try again.contents().isEmpty)
        }
    }

    @Test("a declared URL that redirects to a failure fails the build")
    func declaredRedirectFailure() async throws {
        try await withOrigin { origin in
            origin.set("/docs", .redirect("/docs/"))
            var down = Origin.Resource.text("later", type: "text/html")
            down.failures = 100
            origin.set("/docs/", down)
            let folder = try TemporaryFolder()
            var declaration = Declaration()
            declaration.seeds = [origin.base + "/docs"]
            declaration.retries.attempts = 1
            declaration.retries.backoff = 0.05
            let report = try await Builder(declaration: declaration, options: .init(output: folder.path + "/x.zip")).run()
            #expect(!report.succeeded)
            #expect(report.failures.map(\.url) == [origin.base + "/docs/"] && report.failures.first?.declared == true)
            #expect(try folder.contents().isEmpty)
        }
    }

    @Test("gzip-encoded responses: stored decoded by default, or as sent, and their links found either way", arguments: [false, true])
    func contentEncoding(encoded: Bool) async throws {
        let folder = try TemporaryFolder()
        try folder.file("page.html", "<html><body><img src=\"/pic.png\"><a href=\"/next.html\">next</a></body></html>")
        _ = try await run("gzip", ["-k", "-n", folder.path + "/page.html"])
        let gzipped = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/page.html.gz"))
        try await withOrigin { origin in
            origin.set("/", Origin.Resource(headers: [("Content-Type", "text/html"), ("Content-Encoding", "gzip")], body: Array(gzipped)))
            origin.set("/pic.png", Origin.Resource(headers: [("Content-Type", "image/png")], body: [1, 2, 3]))
            origin.set("/next.html", .text("<p>next</p>", type: "text/html"))
            var declaration = Declaration()
            declaration.seeds = [origin.base + "/"]
            declaration.contentEncoding = encoded ? .encoded : .decoded
            let report = try await Builder(declaration: declaration, options: .init(output: folder.path + "/x.zip")).run()
            #expect(report.succeeded && report.entries == 3)
            let bundle = try MountedBundle(path: folder.path + "/x.zip")
            let page = try #require(bundle.entry(for: origin.base + "/"))
            let html = try String(contentsOfFile: folder.path + "/page.html", encoding: .utf8)
            if encoded {
                #expect(try page.header("content-encoding") == "gzip" && bundle.body(of: page) == gzipped)
            } else {
                #expect(try page.header("content-encoding") == nil && bundle.body(of: page) == Data(html.utf8))
            }
            let manifestText = try await run("unzip", ["-p", folder.path + "/x.zip", "manifest.json"]).output
            let manifest = try JSONDecoder().decode(Manifest.self, from: Data(manifestText.utf8))
            #expect(manifest.entries.first { $0.key == origin.base + "/" }?.contentEncoding == (encoded ? "gzip" : "identity"))
        }
    }

    @Test("pages listed in a declared sitemap (and a sitemap index) are crawled; meta refresh is followed")
    func sitemaps() async throws {
        try await withOrigin { origin in
            let base = origin.base
            origin.set(
                "/sitemap-index.xml", .text("<sitemapindex><sitemap><loc>\(base)/sitemap-pages.xml</loc></sitemap></sitemapindex>", type: "application/xml"))
            origin.set(
                "/sitemap-pages.xml",
                .text("<urlset><url><loc>\(base)/a.html</loc></url><url><loc>\(base)/b.html?x=1&amp;y=2</loc></url></urlset>", type: "application/xml"))
            origin.set("/a.html", .text("<meta http-equiv=\"refresh\" content=\"0; url=/c.html\"><p>a</p>", type: "text/html"))
            origin.set("/b.html?x=1&y=2", .text("<p>b</p>", type: "text/html"))
            origin.set("/c.html", .text("<p>c</p>", type: "text/html"))
            let folder = try TemporaryFolder()
            var declaration = Declaration()
            declaration.sitemaps = [base + "/sitemap-index.xml"]
            let report = try await Builder(declaration: declaration, options: .init(output: folder.path + "/s.zip")).run()
            #expect(report.succeeded && report.failures.isEmpty)
            let keys = Set(try MountedBundle(path: folder.path + "/s.zip").entries.map(\.key))
            let expected = ["/sitemap-index.xml", "/sitemap-pages.xml", "/a.html", "/b.html?x=1&y=2", "/c.html"].map { base + $0 }
            #expect(keys == Set(expected))
        }
    }
}
