import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// What a hostile page, redirect or sitemap can make the crawler do, tried with two real loopback origins
/// (`127.0.0.1:A` and `localhost:B`: two origins, and two host names for the same machine).
@Suite("crawl security: headers, scope and refused ports, on two real origins")
struct CrawlSecurityTests {
    let html = "text/html; charset=utf-8"

    func declaration(_ yaml: String, environment: [String: String] = [:]) throws -> Declaration {
        try DeclarationParser(environment: environment).parse(yaml)
    }

    @Test("a declared header goes only to the origins it is declared for, in the crawl and in verify")
    func headersStayWithTheirOrigin() async throws {
        try await withOrigins { a, b in
            let other = "http://localhost:\(b.port)"
            a.set("/", .text("<html><img src=\"\(other)/pixel.png\"><a href=\"/page.html\">p</a></html>", type: html))
            a.set("/page.html", .text("<html>page</html>", type: html, headers: [("ETag", "\"p1\"")]))
            b.set("/pixel.png", Origin.Resource(headers: [("Content-Type", "image/png"), ("ETag", "\"px\"")], body: [1, 2, 3]))
            let folder = try TemporaryFolder()
            let yaml = """
                seeds: [\(a.base)/]
                output: \(folder.path)/x.zip
                headers:
                  Authorization: Bearer ${TOKEN}
                  X-For-B:
                    value: only-b
                    origins: [\(other)]
                scope:
                  hosts: [\(a.base), \(other)]
                """
            let declared = try declaration(yaml, environment: ["TOKEN": "s3cr3t-t0ken-value"])
            let report = try await Builder(declaration: declared).run()
            #expect(report.succeeded, "\(report.failures)")
            #expect(b.count("/pixel.png") == 1, "the requisite on the other origin is fetched")
            // The origin the header is declared for (by default, the seeds') gets it; the other never does.
            #expect(a.requests.allSatisfy { $0.headers["authorization"] == "Bearer s3cr3t-t0ken-value" && $0.headers["x-for-b"] == nil })
            #expect(!b.requests.isEmpty && b.requests.allSatisfy { $0.headers["authorization"] == nil && $0.headers["x-for-b"] == "only-b" })

            // verify, with the same declaration, applies the same rule.
            let before = (a.requests.count, b.requests.count)
            _ = try await Verifier(options: .init(declaration: declared)).verify(bundleAt: folder.path + "/x.zip")
            #expect(a.requests.count > before.0 && b.requests.count > before.1)
            #expect(a.requests.dropFirst(before.0).allSatisfy { $0.headers["authorization"] != nil })
            #expect(b.requests.dropFirst(before.1).allSatisfy { $0.headers["authorization"] == nil })
        }
    }

    @Test("redirects, nested sitemaps and robots.txt redirects out of scope are not fetched; the redirect is recorded, its target skipped")
    func redirectsStayInScope() async throws {
        try await withOrigins { a, b in
            let other = "http://localhost:\(b.port)"
            a.set("/redir", .redirect(other + "/internal", status: 302))
            a.set("/robots.txt", .redirect(other + "/robots.txt", status: 301))
            a.set(
                "/sitemap.xml",
                .text(
                    "<sitemapindex><sitemap><loc>\(other)/sitemap2.xml</loc></sitemap><sitemap><loc>\(a.base)/sitemap3.xml</loc></sitemap></sitemapindex>",
                    type: "application/xml"))
            a.set("/sitemap3.xml", .text("<urlset><url><loc>\(a.base)/page.html</loc></url></urlset>", type: "application/xml"))
            a.set("/page.html", .text("<html>in scope</html>", type: html))
            b.set("/internal", .text("secret internal page", type: "text/plain"))
            b.set("/sitemap2.xml", .text("<urlset><url><loc>\(other)/x</loc></url></urlset>", type: "application/xml"))
            b.set("/robots.txt", .text("User-agent: *\nDisallow:\n", type: "text/plain"))
            let folder = try TemporaryFolder()
            var declared = Declaration()
            declared.seeds = [a.base + "/redir"]
            declared.sitemaps = [a.base + "/sitemap.xml"]
            declared.output = folder.path + "/x.zip"
            // The second origin's host is named (a header goes there), so only the scope keeps it out.
            declared.headers = [.init(name: "X-For-B", value: "1", origins: [other])]
            let report = try await Builder(declaration: declared).run()
            #expect(b.requests.isEmpty, "\(b.requests.map(\.path))")
            let bundle = try MountedBundle(path: folder.path + "/x.zip")
            #expect(bundle.entry(for: a.base + "/redir")?.status == 302)
            #expect(bundle.entry(for: other + "/internal") == nil && bundle.entry(for: a.base + "/page.html") != nil)
            let skipped = report.skipped.keys.joined(separator: "\n")
            #expect(skipped.contains("redirect target \(other)/internal (from \(a.base)/redir): origin \(other) is not in scope"), "\(skipped)")
            #expect(skipped.contains("origin \(other) is not in scope"))
        }
    }

    @Test("scope is an origin: other ports, https to http, link-local and unnamed private addresses are out of it")
    func scopeIsAnOrigin() throws {
        var declared = Declaration()
        declared.seeds = ["https://docs.example.com/", "http://127.0.0.1:8080/"]
        declared.scope.requisitesFromAnyHost = true
        let scope = CrawlScope(declared)
        #expect(scope.decide("https://docs.example.com/a", role: .link) == .fetch)
        #expect(scope.decide("https://docs.example.com:8443/a", role: .link) == .outOfScope("origin https://docs.example.com:8443 is not in scope"))
        #expect(scope.decide("http://docs.example.com/a", role: .link) == .outOfScope("origin http://docs.example.com is not in scope"))
        #expect(scope.decide("http://127.0.0.1:8080/x", role: .link) == .fetch)
        #expect(
            scope.decide("http://127.0.0.1:6379/", role: .link)
                == .outOfScope("127.0.0.1 is a loopback address on an origin no declaration names (http://127.0.0.1:6379)"))
        // Requisites from any host: still never link-local or metadata, and loopback only on a named host.
        #expect(scope.decide("https://cdn.example.net/x.css", role: .requisite) == .fetch)
        for hostile in [
            "http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://metadata.google.internal/", "http://0.0.0.0/",
            "http://[::ffff:169.254.169.254]/",
        ] {
            guard case .outOfScope(let reason) = scope.decide(hostile, role: .requisite) else {
                Issue.record("\(hostile) was not refused")
                continue
            }
            #expect(reason.contains("never fetched"), "\(hostile): \(reason)")
        }
        // 127.0.0.1 is named by a seed, 127.0.0.2 is not, in whichever form an attacker writes it.
        for unnamed in [
            "http://localhost:2375/", "http://2130706434/", "http://0x7f.2/", "http://127.2/", "http://0177.0.0.2/", "http://10.0.0.1/",
            "http://192.168.1.1/", "http://[::1]/", "http://[::ffff:127.0.0.2]/",
        ] {
            guard case .outOfScope(let reason) = scope.decide(unnamed, role: .requisite) else {
                Issue.record("\(unnamed) was not refused")
                continue
            }
            #expect(reason.contains("no declaration names"), "\(unnamed): \(reason)")
        }
        // 127.0.0.1:8080 is named (by a seed); another port of it is not, even for a requisite from any host.
        #expect(scope.decide("http://127.0.0.1:8080/x.png", role: .requisite) == .fetch)
        #expect(scope.decide("http://2130706433:8080/x.png", role: .requisite) == .fetch)
        guard case .outOfScope(let otherPort) = scope.decide("http://127.0.0.1:6379/x.png", role: .requisite) else {
            Issue.record("another port of a named loopback host was admitted")
            return
        }
        #expect(otherPort.contains("no declaration names"))
        // Any number of leading zeros, as glibc reads them.
        for padded in [
            "http://" + String(repeating: "0", count: 40) + "177.0.0.2/", "http://0x" + String(repeating: "0", count: 40) + "7f000002/",
            "http://" + String(repeating: "0", count: 40) + "251.254.169.254/latest/",
        ] {
            guard case .outOfScope = scope.decide(padded, role: .requisite) else {
                Issue.record("\(padded) was not refused")
                continue
            }
        }
        // A declared URL on a link-local address is refused too.
        #expect(scope.decide("http://169.254.169.254/", role: .seed, named: true) != .fetch)
    }

    @Test("scope.hosts takes origins and host patterns; a malformed one is refused with its line")
    func scopeHostsForms() throws {
        let declared = try declaration(
            """
            seeds: [http://docs.example.com/]
            scope:
              hosts: [docs.example.com, "*.cdn.example.com", "https://api.example.com:8443", "localhost:8080"]
            """)
        let scope = CrawlScope(declared)
        #expect(scope.decide("http://docs.example.com/a", role: .link) == .fetch)
        #expect(scope.decide("https://docs.example.com/a", role: .link) == .fetch)
        #expect(scope.decide("https://img.cdn.example.com/a", role: .link) == .fetch)
        // Plain http only where the declaration's own URLs use it.
        #expect(scope.decide("http://img.cdn.example.com/a", role: .link) != .fetch)
        #expect(scope.decide("https://api.example.com:8443/v1", role: .link) == .fetch)
        #expect(scope.decide("https://api.example.com/v1", role: .link) != .fetch)
        #expect(scope.decide("https://localhost:8080/", role: .link) == .fetch)
        #expect(scope.decide("https://localhost:8081/", role: .link) != .fetch)
        #expect(throws: PackagerError.self) { try declaration("seeds: [http://a.example/]\nscope:\n  hosts: [ftp://a.example]\n") }
        do {
            _ = try declaration("seeds: [http://a.example/]\nscope:\n  hosts: [\"a.example:99999\"]\n")
            Issue.record("a port over 65535 was accepted")
        } catch let error as PackagerError {
            #expect(error.message.contains("3:") && error.message.contains("port"), "\(error.message)")
        }
    }

    @Test("an in-scope port that refuses connections fails after its retries' backoff, and its other URLs fail at once")
    func refusedPortFailsFast() async throws {
        try await withOrigin { a in
            let closed = try closedPort()
            let links = (1...6).map { "<a href=\"http://127.0.0.1:\(closed)/p\($0).html\">x</a>" }.joined()
            a.set("/", .text("<html>\(links)</html>", type: html))
            let folder = try TemporaryFolder()
            var declared = Declaration()
            declared.seeds = [a.base + "/"]
            declared.scope.hosts = [a.base, "http://127.0.0.1:\(closed)"]
            declared.output = folder.path + "/x.zip"
            // A long connect timeout: an attempt that waited for it (as AsyncHTTPClient's own re-dialling did) would
            // make the build take minutes; refused dials fail at once, so only the retries' backoff is waited for.
            declared.timeouts.connect = 30
            let started = Date()
            let report = try await Builder(declaration: declared).run()
            let seconds = Date().timeIntervalSince(started)
            // Default retries: 3, with 0.5 s backoff doubled and jittered: at most 0.5 + 1 + 2 = 3.5 s of waiting (about
            // 2.2 s for the whole build on an idle machine; 42 s before, with a 10 s connect timeout). The bound is
            // under one connect timeout, with room for a test machine loaded by the other suites.
            #expect(seconds < 25, "took \(seconds) s")
            let failed = report.failures.filter { $0.url.contains(":\(closed)/") }
            // robots.txt of the closed origin is what is tried first; the pages then are not tried again.
            #expect(failed.count == 6, "\(report.failures)")
            #expect(failed.allSatisfy { $0.reason.contains("could not be reached") || $0.reason.contains("cannot connect") }, "\(failed)")
        }
    }

    @Test("--no-parent, --include and --exclude keep a quick run where it is told")
    func quickRunStaysBelowItsFolder() async throws {
        try await withOrigin { a in
            a.set(
                "/docs/index.html",
                .text(
                    "<html><link rel=stylesheet href=/static/site.css><a href=../other.html>o</a><a href=sub/page.html>s</a><a href=sub/skip.html>k</a></html>",
                    type: html))
            a.set("/docs/sub/page.html", .text("<html>below</html>", type: html))
            a.set("/docs/sub/skip.html", .text("<html>excluded</html>", type: html))
            a.set("/other.html", .text("<html>above</html>", type: html))
            a.set("/static/site.css", .text("body{}", type: "text/css"))
            let folder = try TemporaryFolder()
            let result = try await run(
                packagerExecutable, ["build", "--seed", a.base + "/docs/index.html", "--no-parent", "--exclude", "*skip*", "-o", "x.zip"], in: folder.path)
            #expect(result.status == 0, "\(result.output)")
            let bundle = try MountedBundle(path: folder.path + "/x.zip")
            #expect(bundle.entry(for: a.base + "/docs/sub/page.html") != nil)
            #expect(bundle.entry(for: a.base + "/static/site.css") != nil, "requisites come from anywhere in scope")
            #expect(bundle.entry(for: a.base + "/other.html") == nil && a.count("/other.html") == 0)
            #expect(bundle.entry(for: a.base + "/docs/sub/skip.html") == nil && a.count("/docs/sub/skip.html") == 0)
            #expect(result.output.contains("above the seeds' folders (no-parent)"))
        }
    }

    @Test("a secret echoed without its prefix, or in a redirect's Location, is never stored or reported")
    func secretsInResponses() async throws {
        try await withOrigin { a in
            let token = "tok-8f2c91d4e7"
            a.set("/", .text("<html><a href=/go>go</a></html>", type: html, headers: [("Link", "<\(a.base)/x?access=\(token)>; rel=preload")]))
            a.set("/go", .redirect("/callback?token=\(token)", status: 302))
            let folder = try TemporaryFolder()
            let declared = try declaration(
                "seeds: [\(a.base)/]\noutput: \(folder.path)/x.zip\nheaders: {Authorization: \"Bearer ${TOKEN}\"}\n", environment: ["TOKEN": token])
            let report = try await Builder(declaration: declared).run()
            #expect(a.count("/callback?token=\(token)") == 0)
            let data = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/x.zip"))
            #expect(data.range(of: Data(token.utf8)) == nil)
            let json = try JSONEncoder().encode(report)
            #expect(json.range(of: Data(token.utf8)) == nil)
            #expect(report.failures.contains { $0.reason.contains("carries a secret") })
        }
    }

    @Test("a secret percent-encoded in a Location, a link, a requisite or a Link header, or double-encoded, is never taken in, stored or reported")
    func encodedSecretsInResponses() async throws {
        try await withOrigin { a in
            let token = "supersecret123"
            let encoded = "supersecre%74123"
            // The links are on a page of their own: a page whose body carries the secret as it is is not stored (its links
            // are still followed), and the seed must be, for the bundle to be written.
            a.set("/", .text("<html><a href=/links.html>links</a></html>", type: html))
            a.set(
                "/links.html",
                .text(
                    "<html><a href=/login>in</a><a href=\"/x?token=\(token)\">x</a><a href=\"/y?t=super%2573ecret123\">y</a>"
                        + "<img src=\"/p/\(encoded)/i.png\"><a href=\"/q?a=Bearer+\(token)\">q</a></html>", type: html,
                    headers: [("Link", "</p?t=\(encoded)>; rel=preload")]))
            a.set("/login", .redirect("/cb?code=\(encoded)", status: 302))
            let folder = try TemporaryFolder()
            let declared = try declaration(
                "seeds: [\(a.base)/]\noutput: \(folder.path)/x.zip\nheaders: {Authorization: \"Bearer ${TOKEN}\"}\n", environment: ["TOKEN": token])
            let report = try await Builder(declaration: declared).run()
            // None of them was asked for: the origin saw only the seed and the redirect.
            // (And the seed again, with and without a query no link carries, to learn whether the origin ignores queries.)
            #expect(
                Set(a.requests.map(\.path).filter { !$0.contains("packager-query-probe=") }) == ["/", "/robots.txt", "/links.html", "/login"],
                "\(a.requests.map(\.path))")
            // The page of links carries the secret as it is: not stored, and said so.
            #expect(report.failures.contains { $0.url == a.base + "/links.html" && $0.reason.contains("carries a secret") }, "\(report.failures)")
            // No file the build wrote, and no report, holds the secret in any form.
            let data = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/x.zip"))
            for form in [token, encoded, "super%2573ecret123"] {
                #expect(data.range(of: Data(form.utf8)) == nil, "\(form) in the bundle")
                #expect(try JSONEncoder().encode(report).range(of: Data(form.utf8)) == nil, "\(form) in the report")
            }
            // Each one named, with [secret] where the secret was.
            let dropped = report.skipped.keys.filter { $0.hasPrefix("carries a secret from the environment: ") }.sorted()
            #expect(dropped.count == 4, "\(report.skipped)")
            #expect(dropped.allSatisfy { $0.contains("[secret]") }, "\(dropped)")
            #expect(report.failures.contains { $0.reason.contains("carries a secret") })
        }
    }

    @Test("verify and refresh keep the crawl's address policy: keys on loopback are not asked unless named or allowed, on link-local never")
    func verifyAddressPolicy() async throws {
        try await withOrigin { a in
            a.set("/page", .text("<p>internal</p>", type: html))
            let folder = try TemporaryFolder()
            let site = try TemporaryFolder()
            try site.file("page", "<p>old</p>")
            for (base, name) in [(a.base, "loop"), ("http://169.254.169.254", "meta")] {
                _ = try Packer(options: .init(baseURL: base + "/")).pack(source: site.path, output: folder.path + "/\(name).zip")
            }
            let refused = try await Verifier().verify(bundleAt: folder.path + "/loop.zip")
            #expect(refused.entries.allSatisfy { $0.verdict == .unreachable && ($0.error ?? "").contains("loopback address") }, "\(refused.entries)")
            #expect(a.requests.isEmpty)
            let refresher = Refresher()
            _ = try? await refresher.refresh(bundleAt: folder.path + "/loop.zip", output: folder.path + "/new.zip")
            #expect(a.requests.isEmpty)
            // Named by a declaration, or allowed by the flag: asked.
            let named = try await Verifier(options: .init(declaration: declaration("urls: [\(a.base)/page]\n"))).verify(bundleAt: folder.path + "/loop.zip")
            #expect(named.entries.contains { $0.verdict == .stale })
            var allowing = Verifier.Options()
            allowing.allowPrivateAddresses = true
            allowing.retries.attempts = 0
            let allowed = try await Verifier(options: allowing).verify(bundleAt: folder.path + "/loop.zip")
            #expect(allowed.entries.contains { $0.verdict == .stale })
            // A link-local key is never asked, even when private addresses are allowed.
            let meta = try await Verifier(options: allowing).verify(bundleAt: folder.path + "/meta.zip")
            #expect(meta.entries.allSatisfy { $0.verdict == .unreachable && ($0.error ?? "").contains("link-local") }, "\(meta.entries)")
        }
    }

    @Test("metadata services outside 169.254/16 and addresses wrapped in NAT64 or IPv4-mapped IPv6 are classed as what they reach")
    func addressClasses() {
        for host in ["100.100.100.200", "192.0.0.192", "[fd00:ec2::254]", "169.254.169.254", "0.0.0.0", "[64:ff9b::a9fe:a9fe]", "[::ffff:169.254.169.254]"] {
            #expect(AddressClass(host: host) == .linkLocal, "\(host)")
        }
        #expect(AddressClass(host: "[64:ff9b::7f00:1]") == .loopback)
        #expect(AddressClass(host: "[64:ff9b::10.0.0.1]") == .privateNetwork)
        #expect(AddressClass(host: "100.100.100.201") == .privateNetwork)
        #expect(AddressClass(host: "[fd00:ec2::253]") == .privateNetwork)
        #expect(AddressClass(host: "8.8.8.8") == .other)
        // With private addresses allowed, a metadata service is still never asked.
        let policy = AddressPolicy(allowPrivate: true)
        #expect(policy.refusal(forURL: "http://100.100.100.200/latest/meta-data/")?.allowable == false)
        #expect(policy.refusal(forURL: "http://10.0.0.1/") == nil)
    }

    @Test("a body over scope.max-body (a gzip bomb's decoded size) fails its URL and is not stored")
    func bodyOverMaxBody() async throws {
        try await withOrigin { a in
            // Text that gzip shrinks by a few times only (AsyncHTTPClient refuses ratios past 1000 by itself).
            let decoded = Array(noise(3 << 20, seed: 5).base64EncodedData())
            let gzipped = try Data(contentsOf: URL(fileURLWithPath: gzipFile(decoded)))
            a.set("/bomb", Origin.Resource(headers: [("Content-Type", "text/html"), ("Content-Encoding", "gzip")], body: Array(gzipped)))
            a.set("/", .text("<a href=/bomb>b</a>", type: html))
            let folder = try TemporaryFolder()
            let report = try await Builder(declaration: declaration("seeds: [\(a.base)/]\noutput: \(folder.path)/x.zip\nscope: {max-body: 1MiB}\n")).run()
            #expect(report.failures.contains { $0.url.hasSuffix("/bomb") && $0.reason.contains("max-body") }, "\(report.failures)")
            #expect(try MountedBundle(path: folder.path + "/x.zip").entry(for: a.base + "/bomb") == nil)
        }
    }

    /// `bytes` gzipped into a temporary file, whose path is returned.
    func gzipFile(_ bytes: [UInt8]) throws -> String {
        let path = NSTemporaryDirectory() + "/bomb-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        _ = try run("gzip", ["-9", "-f", path])
        return path + ".gz"
    }

    /// Whether this machine's own name resolves to a loopback or private address (it does on Debian and in
    /// containers, through /etc/hosts).
    static let hostNameIsLocal: Bool = {
        let classes = HostResolver().classes(of: ProcessInfo.processInfo.hostName)
        return classes.contains(.loopback) || classes.contains(.privateNetwork)
    }()

    @Test("a name that resolves to a loopback or private address (through /etc/hosts) is refused unless named", .enabled(if: hostNameIsLocal))
    func resolvedNamesAreJudged() throws {
        var declared = Declaration()
        declared.seeds = ["https://docs.example.com/"]
        declared.scope.requisitesFromAnyHost = true
        let name = ProcessInfo.processInfo.hostName
        guard case .outOfScope(let reason) = CrawlScope(declared).decide("http://\(name):6379/", role: .requisite) else {
            Issue.record("\(name) was not refused")
            return
        }
        #expect(reason.contains("\(name) resolves to a"), "\(reason)")
        // Named by the declaration: trusted as given.
        declared.scope.hosts = ["https://docs.example.com", "http://\(name):6379"]
        #expect(CrawlScope(declared).decide("http://\(name):6379/", role: .link) == .fetch)
    }
}
