import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// Headless Chromium (Debian's chromium-headless-shell) driven over the DevTools protocol: skipped, with the reason,
/// where it is not installed (`make deps` and CI install it).
let chromium = DevTools.findExecutable()

@Suite("the browser: check --browser offline, build --browser", .enabled(if: chromium != nil, "Chromium is not installed: \(DevTools.installHint)"))
struct BrowserTests {
    /// A site whose scripts load what no link names: a script inserted by a script, JSON fetched on load, a search page
    /// that reads its query, and a file fetched only when the search box is typed into.
    static func site(_ folder: TemporaryFolder, withMissing: Bool) throws -> String {
        try folder.file(
            "site/index.html",
            """
            <html><head><script src="app.js"></script></head>
            <body><input type="search" id="q"><a href="search.html">search</a><div id="out"></div></body></html>
            """)
        try folder.file(
            "site/app.js",
            """
            const s = document.createElement('script'); s.src = 'inserted.js'; document.head.appendChild(s);
            fetch('data/menu.json').then(r => r.json()).then(m => { document.getElementById('out').textContent = m.title; });
            document.addEventListener('DOMContentLoaded', () => {
              document.getElementById('q').addEventListener('input', () => { fetch('data/index.json'); });
            });
            """)
        try folder.file("site/inserted.js", "window.inserted = true;")
        try folder.file("site/data/menu.json", "{\"title\": \"Menu\"}")
        if !withMissing { try folder.file("site/data/index.json", "[\"a\"]") }
        try folder.file(
            "site/search.html",
            """
            <html><body><ul id="results"></ul><script>
            const q = new URLSearchParams(location.search).get('q') || '';
            fetch('data/menu.json').then(r => r.json()).then(m => {
              if (q && m.title.toLowerCase().includes(q)) { const li = document.createElement('li'); li.textContent = m.title; document.getElementById('results').appendChild(li); }
            });
            </script></body></html>
            """)
        return folder.path + "/site"
    }

    @Test("check --browser opens the pages offline and lists exactly what the bundle cannot answer, with the script that asked")
    func checkListsWhatIsMissing() async throws {
        let folder = try TemporaryFolder()
        let root = try Self.site(folder, withMissing: true)
        _ = try await run(packagerExecutable, ["pack", root, "--base-url", "https://site.example/", "-o", folder.path + "/b.zip"])
        let result = try await run(
            packagerExecutable,
            ["check", folder.path + "/b.zip", "--browser", "--json", "--open", "https://site.example/search.html?q=menu"])
        #expect(result.status == 1, "\(result.output)")
        // One JSON document: the integrity check's report and the browser's.
        struct Combined: Decodable { var browser: BrowserCheck.Report }
        let report = try JSONDecoder().decode(Combined.self, from: Data(result.output.utf8)).browser
        // `/` and `/index.html` are one page; the search page; the search page with its query.
        #expect(report.pages == 3 && report.problems.isEmpty, "\(report)")
        #expect(report.unanswered.map(\.url) == ["https://site.example/data/index.json"], "\(report.unanswered)")
        #expect(report.unanswered.first?.initiator == "https://site.example/app.js" && ["Fetch", "XHR"].contains(report.unanswered.first?.type ?? ""))
        // The script-inserted script, the JSON fetched on load and the search page with its query were all answered.
        #expect(report.answered >= 6, "\(report)")

        // With the file in the bundle: nothing is missing.
        let complete = try TemporaryFolder()
        let full = try Self.site(complete, withMissing: false)
        _ = try await run(packagerExecutable, ["pack", full, "--base-url", "https://site.example/", "-o", complete.path + "/b.zip"])
        let passed = try await run(packagerExecutable, ["check", complete.path + "/b.zip", "--browser"])
        #expect(passed.status == 0 && passed.output.contains("browser: 2 pages opened offline"), "\(passed.output)")
    }

    @Test("a search page asked for with its query is answered from the bundle (the query ignored, as the origin did), and so is all it asks for")
    func searchWorksOffline() async throws {
        let folder = try TemporaryFolder()
        let root = try Self.site(folder, withMissing: false)
        _ = try await run(packagerExecutable, ["pack", root, "--base-url", "https://site.example/", "-o", folder.path + "/b.zip"])
        let loader = try OfflineLoader(path: folder.path + "/b.zip")
        let browser = try DevTools.launch(executable: try #require(chromium), profile: folder.path + "/profile", offline: true)
        defer { browser.close() }
        let visit = await PageVisit.visit("https://site.example/search.html?q=menu", in: browser, timeout: 20) {
            await BrowserCheck.answer($0, from: loader)
        }
        #expect(visit.problem == nil)
        #expect(visit.requests.allSatisfy { $0.decision == .answered }, "\(visit.requests.map { ($0.request.url, $0.decision) })")
        let results = try await browser.send("Target.getTargets")
        #expect(!results["targetInfos"].array.isEmpty)
    }

    @Test(
        "build --browser crawls what scripts load (an inserted script, JSON fetched on load and on typing into the search box); the bundle then passes check --browser",
        arguments: RealServer.installed.prefix(1))
    func buildWithBrowser(kind: String) async throws {
        let folder = try TemporaryFolder()
        let root = try Self.site(folder, withMissing: false)
        let server = try await RealServer.start(kind, root: root, state: folder.path + "/server")
        defer { server.stop() }
        let plain = try await run(packagerExecutable, ["build", "--seed", server.base + "/", "--no-robots", "-o", folder.path + "/plain.zip"])
        #expect(plain.status == 0, "\(plain.output)")
        let plainBundle = try MountedBundle(path: folder.path + "/plain.zip")
        for path in ["/inserted.js", "/data/menu.json", "/data/index.json"] { #expect(plainBundle.entry(for: server.base + path) == nil, "\(path)") }

        let rendered = try await run(packagerExecutable, ["build", "--seed", server.base + "/", "--no-robots", "--browser", "-o", folder.path + "/b.zip"])
        #expect(rendered.status == 0, "\(rendered.output)")
        let bundle = try MountedBundle(path: folder.path + "/b.zip")
        for path in ["/", "/app.js", "/inserted.js", "/data/menu.json", "/data/index.json", "/search.html"] {
            #expect(bundle.entry(for: server.base + path)?.status == 200, "\(path)")
        }
        let check = try await run(packagerExecutable, ["check", folder.path + "/b.zip", "--browser", "--open", server.base + "/search.html?q=menu"])
        #expect(check.status == 0, "\(check.output)")
    }

    @Test("--browser without Chromium says how to install it")
    func missingChromium() async throws {
        let folder = try TemporaryFolder()
        let result = try await run(
            "/usr/bin/env",
            [
                "PACKAGER_CHROMIUM=/nonexistent/chromium", packagerExecutable, "build", "--seed", "http://127.0.0.1:1/", "--browser", "-o",
                folder.path + "/x.zip",
            ])
        #expect(
            result.status != 0 && result.output.contains("cannot start the browser") && result.output.contains("apt-get install chromium-headless-shell"),
            "\(result.output)")
    }

    static let pythonDocs = "/usr/share/doc/python3.11/html"

    /// Waits for Sphinx's search to list its results (the count steady for a second, at most 15 s), and counts them.
    static let sphinxResults = """
        new Promise(done => {
          let waited = 0, last = -1, steady = 0;
          const tick = setInterval(() => {
            const count = document.querySelectorAll('ul.search li').length;
            steady = count === last ? steady + 1 : 0;
            last = count;
            if ((count > 0 && steady >= 10) || ++waited > 150) { clearInterval(tick); done(String(count)); }
          }, 100);
        })
        """

    @Test(
        "python3.11-doc's search page from nginx, built with --browser: its search finds as many results offline from the bundle as from nginx",
        .enabled(if: FileManager.default.fileExists(atPath: pythonDocs + "/search.html") && RealServer.installed.contains("nginx")))
    func pythonDocsSearchOffline() async throws {
        let folder = try TemporaryFolder()
        let server = try await RealServer.start("nginx", root: Self.pythonDocs, state: folder.path + "/server")
        defer { server.stop() }
        // The search page and what it needs, not the whole site: the suite shares two cores with timing tests. The search
        // index and the glossary are loaded by scripts, which only the browser finds.
        let built = try await run(
            packagerExecutable,
            ["build", "--seed", server.base + "/search.html", "--max-depth", "0", "--no-robots", "--browser", "-o", folder.path + "/py.zip"])
        #expect(built.status == 0, "\(built.output)")
        let loader = try OfflineLoader(path: folder.path + "/py.zip")
        for path in ["/searchindex.js", "/_static/glossary.json", "/_static/searchtools.js"] {
            #expect(loader.response(for: BundleRequest(url: server.base + path))?.status == 200, "\(path)")
        }
        let browser = try DevTools.launch(executable: try #require(chromium), profile: folder.path + "/profile")
        defer { browser.close() }
        let search = server.base + "/search.html?q=dictionary&check_keywords=yes&area=default"
        let live = await PageVisit.visit(search, in: browser, timeout: 30, probe: Self.sphinxResults) { _ in .proceed() }
        // Offline: the bundle answers; the result pages it does not hold (fetched for their summaries) fail.
        let offline = await PageVisit.visit(search, in: browser, timeout: 30, probe: Self.sphinxResults) { await BrowserCheck.answer($0, from: loader) }
        let liveCount = Int(live.probe ?? "") ?? 0
        print("python3.11-doc search for 'dictionary': \(liveCount) results from nginx, \(offline.probe ?? "-") offline from the bundle")
        #expect(liveCount > 100, "\(live.problem ?? "") \(live.probe ?? "-")")
        #expect(offline.probe.flatMap(Int.init) == liveCount, "\(offline.problem ?? "") \(offline.probe ?? "-") of \(liveCount)")
    }

    @Test("the browser's own requests carry the headers declared for their origin, and obey robots.txt")
    func browserRequestsFollowTheDeclaration() async throws {
        try await withOrigin { origin in
            origin.set("/", .text("<html><head><script src=\"app.js\"></script></head><body>home</body></html>", type: "text/html"))
            origin.set("/app.js", .text("fetch('data.json'); fetch('private/secret.json');", type: "text/javascript"))
            origin.set("/data.json", .text("{}", type: "application/json"))
            origin.set("/private/secret.json", .text("{}", type: "application/json"))
            origin.set("/robots.txt", .text("User-agent: *\nDisallow: /private/\n", type: "text/plain"))
            let folder = try TemporaryFolder()
            try folder.file(
                "d.yml",
                """
                seeds: [\(origin.base)/]
                output: \(folder.path)/b.zip
                browser: true
                ignore-query: none
                headers:
                  Authorization: Bearer declared-token
                """)
            let result = try await run(packagerExecutable, ["build", folder.path + "/d.yml"])
            #expect(result.status == 0, "\(result.output)")
            let fromBrowser = origin.requests.filter { ($0.headers["user-agent"] ?? "").contains("HeadlessChrome") }
            #expect(fromBrowser.contains { $0.path == "/data.json" }, "\(origin.requests.map { "\($0.path) \($0.headers["user-agent"] ?? "")" })")
            #expect(fromBrowser.allSatisfy { $0.headers["authorization"] == "Bearer declared-token" }, "\(fromBrowser.map(\.headers))")
            // Disallowed by robots.txt: asked by neither the browser nor the crawl.
            #expect(origin.count("/private/secret.json") == 0)
            #expect(try MountedBundle(path: folder.path + "/b.zip").entry(for: origin.base + "/data.json")?.status == 200)
        }
    }
}
