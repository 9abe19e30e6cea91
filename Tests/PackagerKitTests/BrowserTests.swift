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

    @Test("check --browser submits a page's search form with a word: the query the bundle cannot answer is listed, near its page; answered under ignore-query")
    func searchFormSubmitted() async throws {
        let folder = try TemporaryFolder()
        try folder.file(
            "site/index.html",
            """
            <html><body><form action="search.html" class="search"><input type="text" name="q"><input type="hidden" name="area" value="default">
            </form><form method="post" action="login"><input name="user"></form></body></html>
            """)
        try folder.file("site/search.html", "<html><body><p>results</p></body></html>")
        let root = folder.path + "/site"
        // The query matters: search.html?q=a&area=default is not in the bundle.
        _ = try await run(packagerExecutable, ["pack", root, "--base-url", "https://site.example/", "--query-matters", "-o", folder.path + "/strict.zip"])
        let result = try await run(packagerExecutable, ["check", folder.path + "/strict.zip", "--browser", "--json"])
        #expect(result.status == 1, "\(result.output)")
        struct Combined: Decodable { var browser: BrowserCheck.Report }
        let report = try JSONDecoder().decode(Combined.self, from: Data(result.output.utf8)).browser
        // The GET form's URL, once (`/` and `/index.html` are one page); the POST form is not submitted.
        #expect(report.unanswered.map(\.url) == ["https://site.example/search.html?q=a&area=default"], "\(report.unanswered)")
        #expect(report.unanswered.first?.nearMiss?.contains("query parameter q=a not recorded") == true, "\(report.unanswered)")
        // Packed as a static server answers (the query ignored): answered.
        _ = try await run(packagerExecutable, ["pack", root, "--base-url", "https://site.example/", "-o", folder.path + "/b.zip"])
        let passed = try await run(packagerExecutable, ["check", folder.path + "/b.zip", "--browser"])
        #expect(passed.status == 0, "\(passed.output)")
    }

    @Test(
        "check --browser asks for the addresses a page's script writes with history.replaceState (a reload there must be answered); build --browser records them"
    )
    func replacedAddressesChecked() async throws {
        let folder = try TemporaryFolder()
        try folder.file(
            "site/index.html",
            "<html><body><p>list</p><script>history.replaceState(null, '', 'index.html?view=compact#top');</script></body></html>")
        let root = folder.path + "/site"
        _ = try await run(packagerExecutable, ["pack", root, "--base-url", "https://site.example/", "--query-matters", "-o", folder.path + "/strict.zip"])
        let result = try await run(packagerExecutable, ["check", folder.path + "/strict.zip", "--browser", "--json"])
        #expect(result.status == 1, "\(result.output)")
        struct Combined: Decodable { var browser: BrowserCheck.Report }
        let report = try JSONDecoder().decode(Combined.self, from: Data(result.output.utf8)).browser
        #expect(report.unanswered.map(\.url) == ["https://site.example/index.html?view=compact"], "\(report.unanswered)")
        _ = try await run(packagerExecutable, ["pack", root, "--base-url", "https://site.example/", "-o", folder.path + "/b.zip"])
        let passed = try await run(packagerExecutable, ["check", folder.path + "/b.zip", "--browser"])
        #expect(passed.status == 0, "\(passed.output)")

        // A crawl with the browser asks the origin for the address too.
        try await withOrigin { origin in
            let page = "<html><body><script>history.replaceState({}, '', '/?tab=2');</script></body></html>"
            origin.set("/", .text(page, type: "text/html"))
            origin.set("/?tab=2", .text(page, type: "text/html"))
            let built = try await run(
                packagerExecutable, ["build", "--seed", origin.base + "/", "--no-robots", "--browser", "-o", folder.path + "/built.zip"])
            #expect(built.status == 0, "\(built.output)")
            #expect(origin.count("/?tab=2") >= 1)
            #expect(try MountedBundle(path: folder.path + "/built.zip").entry(for: origin.base + "/?tab=2")?.status == 200)
        }
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

    @Test(
        "declared behaviours (a click, typing a word, a script) load what the generic ones do not, on the pages they name; check --browser --behaviors runs them offline"
    )
    func declaredBehaviours() async throws {
        try await withOrigin { origin in
            origin.set(
                "/",
                .text(
                    #"<html><head><script src="app.js"></script></head><body><button id="more">more</button><input id="find"></body></html>"#, type: "text/html"
                ))
            origin.set(
                "/app.js",
                .text(
                    """
                    document.addEventListener('DOMContentLoaded', () => {
                      document.getElementById('more').addEventListener('click', () => fetch('more.json'));
                      document.getElementById('find').addEventListener('input', e => { if (e.target.value.length > 3) fetch('words/' + e.target.value + '.json'); });
                    });
                    window.later = () => fetch('later.json');
                    """, type: "text/javascript"))
            for path in ["/more.json", "/words/zebra.json", "/later.json"] { origin.set(path, .text("{}", type: "application/json")) }
            let folder = try TemporaryFolder()
            func declaration(_ name: String, behaviors: String) throws -> String {
                try folder.file(
                    name,
                    """
                    seeds: [\(origin.base)/]
                    output: \(folder.path)/\(name).zip
                    robots: false
                    ignore-query: none
                    browser:
                      enabled: true
                    \(behaviors)
                    """)
                return folder.path + "/" + name
            }
            // The generic behaviours alone: the button is no menu, the input no search box.
            let plain = try await run(packagerExecutable, ["build", try declaration("plain", behaviors: "")])
            #expect(plain.status == 0, "\(plain.output)")
            let plainBundle = try MountedBundle(path: folder.path + "/plain.zip")
            for path in ["/more.json", "/words/zebra.json", "/later.json"] { #expect(plainBundle.entry(for: origin.base + path) == nil, "\(path)") }

            let declared = try declaration(
                "declared",
                behaviors: """
                      behaviors:
                        - click: "#more"
                        - type: "#find"
                          text: zebra
                        - script: "window.later()"
                          pages: "*/index.html"
                    """)
            let built = try await run(packagerExecutable, ["build", declared])
            #expect(built.status == 0, "\(built.output)")
            let bundle = try MountedBundle(path: folder.path + "/declared.zip")
            for path in ["/more.json", "/words/zebra.json"] { #expect(bundle.entry(for: origin.base + path)?.status == 200, "\(path)") }
            // The script is limited to pages named index.html, and the seed is `/`.
            #expect(bundle.entry(for: origin.base + "/later.json") == nil)

            // Offline, the same behaviours ask the bundle for what they asked the origin: all answered.
            let check = try await run(packagerExecutable, ["check", folder.path + "/declared.zip", "--browser", "--behaviors", declared])
            #expect(check.status == 0, "\(check.output)")
            // The plain bundle lacks what they load: check says so, with the script that asked.
            let missing = try await run(packagerExecutable, ["check", folder.path + "/plain.zip", "--browser", "--behaviors", declared])
            #expect(
                missing.status == 1 && missing.output.contains(origin.base + "/more.json") && missing.output.contains("words/zebra.json"), "\(missing.output)")
        }
    }

    @Test(
        "hostile pages are bounded, reported with the page, and never fail the build: a load that never ends, dialogs, a navigation away, 300 frames, off-scope requests"
    )
    func hostilePages() async throws {
        try await withOrigin { origin in
            let pages = ["slow", "dialogs", "away", "frames", "offscope"]
            origin.set("/", .text("<html><body>" + pages.map { "<a href=\"\($0).html\">\($0)</a>" }.joined() + "</body></html>", type: "text/html"))
            // Its image takes longer than the page timeout: the load event never comes in time.
            origin.set("/slow.html", .text(#"<html><body><img src="slow.png"></body></html>"#, type: "text/html"))
            var slow = Origin.Resource.text("png", type: "image/png")
            slow.delay = 8
            origin.set("/slow.png", slow)
            // Dialogs block the page's script until they are dismissed; what it asks for after them is still found.
            origin.set(
                "/dialogs.html",
                .text("<html><body><script>alert('a'); confirm('b'); prompt('c'); fetch('after-dialogs.json');</script></body></html>", type: "text/html"))
            origin.set("/after-dialogs.json", .text("{}", type: "application/json"))
            // A page that sends itself elsewhere: the visit stays, and the target is a link.
            origin.set(
                "/away.html",
                .text("<html><body><script>setTimeout(() => { location.href = 'elsewhere.html'; }, 50);</script></body></html>", type: "text/html"))
            origin.set("/elsewhere.html", .text("<html><body>elsewhere</body></html>", type: "text/html"))
            origin.set(
                "/frames.html",
                .text(
                    "<html><body><script>for (let i = 0; i < 300; i++) { const f = document.createElement('iframe'); f.src = 'frame.html#' + i; document.body.appendChild(f); }</script></body></html>",
                    type: "text/html"))
            origin.set("/frame.html", .text("<html><body>frame</body></html>", type: "text/html"))
            origin.set(
                "/offscope.html",
                .text(
                    "<html><body><script>fetch('http://offscope.invalid/x.json'); fetch('http://127.0.0.1:1/closed.json'); fetch('inscope.json');</script></body></html>",
                    type: "text/html"))
            origin.set("/inscope.json", .text("{}", type: "application/json"))
            let folder = try TemporaryFolder()
            try folder.file(
                "d.yml",
                """
                seeds: [\(origin.base)/]
                output: \(folder.path)/b.zip
                robots: false
                ignore-query: none
                timeouts: {request: 10s}
                retries: {attempts: 1, backoff: 100ms}
                browser: {enabled: true, pages: all, page-timeout: 5}
                """)
            // A request timeout well past what the origin takes: it runs in this process, sharing two cores with the other
            // browser tests' Chromiums, and once took past 3 s to answer the seed (a failed seed fails the build). The
            // page timeout (5 s; its image takes 8) is what bounds the slow page.
            let started = Date()
            let result = try await run(packagerExecutable, ["build", folder.path + "/d.yml", "--json"])
            let seconds = Date().timeIntervalSince(started)
            #expect(result.status == 0, "\(result.output)")
            let report = try JSONDecoder().decode(BuildReport.self, from: Data(result.output.utf8))
            // Each page waits at most its timeout; the whole build is bounded by pages x timeout, not by what they do.
            #expect(seconds < 60, "\(seconds) s")
            // The slow page is reported with its page; 300 frames may take past the timeout too. No other page is, but for
            // a browser too loaded to answer a command within the 5 s (the browser tests share two cores): that is the
            // machine, and the page's links are still followed (its target is checked below). (With 2 s, three dialogs
            // once took past the timeout under the browser pass's load.)
            let problems = Dictionary(report.browserProblems.map { ($0.page, $0.reason) }, uniquingKeysWith: { a, _ in a })
            #expect(problems[origin.base + "/slow.html"]?.contains("did not finish loading in 5 s") == true, "\(report.browserProblems)")
            // So is a page that navigates away and did not finish loading in the 5 s (once, in a full run of the suite on
            // 2026-11-30, with the other browser tests' Chromiums: its target is still crawled, checked below).
            let behaviour = problems.filter {
                !$0.value.contains("no answer from the browser in") && !($0.key == origin.base + "/away.html" && $0.value.contains("did not finish loading"))
            }
            #expect(Set(behaviour.keys).isSubset(of: [origin.base + "/slow.html", origin.base + "/frames.html"]), "\(report.browserProblems)")
            let bundle = try MountedBundle(path: folder.path + "/b.zip")
            for path in ["/after-dialogs.json", "/elsewhere.html", "/frame.html", "/inscope.json"] {
                #expect(bundle.entry(for: origin.base + path)?.status == 200, "\(path)")
            }
            #expect(!bundle.entries.contains { $0.key.contains("offscope.invalid") || $0.key.contains("127.0.0.1:1/") })
        }
    }

    @Test("a browser killed in the middle of a page ends that visit at once with the reason, and the crawl's pool starts it again for the next page")
    func browserKilled() async throws {
        try await withOrigin { origin in
            origin.set("/", .text(#"<html><body><img src="slow.png"></body></html>"#, type: "text/html"))
            var slow = Origin.Resource.text("png", type: "image/png")
            slow.delay = 9
            origin.set("/slow.png", slow)
            origin.set("/ok.html", .text("<html><body>ok</body></html>", type: "text/html"))
            let folder = try TemporaryFolder()
            var settings = Declaration.Browser()
            settings.pageTimeout = 30
            let pool = try BrowserPool(settings: settings, profile: folder.path + "/profile") { host, _, _ in host == "127.0.0.1" }
            let first = try #require(await pool.browserProcess)
            async let visit = pool.visit(origin.base + "/") { _ in .proceed() }
            try await Task.sleep(for: .seconds(2))
            // The whole browser, as a crash would end it (its process group: the wrapper script, the browser, its renderers).
            let killedAt = Date()
            kill(-first, SIGKILL)
            let killed = await visit
            // Not the page timeout (30 s), nor the image (9 s after it was asked for, at most 7 s after the kill): the
            // visit sees the browser go. Counted from the kill: on a loaded machine the browser's start and the sleep
            // before the kill can take seconds of their own.
            let seconds = Date().timeIntervalSince(killedAt)
            // Killed before its tab opened (a slow start) or while the page loaded: either way the visit ends, saying so.
            #expect(seconds < 5 && killed.problem?.hasSuffix("the browser exited") == true, "\(seconds) s: \(killed.problem ?? "no problem")")
            let next = await pool.visit(origin.base + "/ok.html") { _ in .proceed() }
            #expect(next.problem == nil && next.requests.contains { $0.request.url == origin.base + "/ok.html" }, "\(next.problem ?? "")")
            #expect(await pool.browserProcess != first)
            await pool.close()
        }
    }

    @Test("a page that navigates itself away while a command runs on it is not a problem: what it asked for stays recorded")
    func navigationDuringACommand() async throws {
        try await withOrigin { origin in
            origin.set("/", .text(#"<html><body><script>fetch('early.json')</script></body></html>"#, type: "text/html"))
            origin.set("/early.json", .text("{}", type: "application/json"))
            origin.set("/elsewhere.html", .text("<html><body>elsewhere</body></html>", type: "text/html"))
            let folder = try TemporaryFolder()
            let browser = try DevTools.launch(executable: try #require(chromium), profile: folder.path + "/profile")
            defer { browser.close() }
            // The probe navigates and then waits: the browser ends the awaited evaluation with "navigated or closed".
            let probe = "new Promise(done => { location.href = 'elsewhere.html'; setTimeout(() => done('stayed'), 5000); })"
            let visit = await PageVisit.visit(origin.base + "/", in: browser, timeout: 10, probe: probe) { _ in .proceed() }
            #expect(visit.problem == nil, "\(visit.problem ?? "")")
            #expect(visit.probe == nil)
            #expect(visit.requests.contains { $0.request.url == origin.base + "/early.json" }, "\(visit.requests.map(\.request.url))")
        }
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

    /// A documentation generator's output that Debian ships, and how its search is asked and counted.
    struct Generator: Sendable, CustomTestStringConvertible {
        var name: String
        /// The Debian package, and the folder it installs the site in.
        var package: String
        var root: String
        /// The page the crawl starts from (depth 0: it and what it needs, not the whole site; the suite shares two
        /// cores with timing tests).
        var seed: String
        /// The page the search is run on, with its query when the generator reads one.
        var search: String
        /// Files that only scripts load (the static crawl cannot find them).
        var scriptLoaded: [String]
        /// A JavaScript expression that gives the number of results, as a string, once their count has settled.
        var probe: String
        var testDescription: String { name }
    }

    /// Waits until `ready` holds, runs `start` once, then waits for the count of elements `results` selects to settle
    /// (the same for a second) and gives it; 45 s at most in all (a search in a Web Worker, offline, once took past
    /// 20 s with the browser tests sharing two cores).
    static func searchProbe(ready: String = "true", start: String = "", results: String) -> String {
        """
        new Promise(done => {
          let waited = 0, last = -1, steady = 0, started = false;
          const tick = setInterval(() => {
            let ready = false;
            try { ready = !!(\(ready)); } catch (e) {}
            if (!started && ready) { started = true; try { \(start) } catch (e) {} }
            const count = started ? document.querySelectorAll(\(PageVisit.Behaviours.literal(results))).length : -1;
            steady = count === last ? steady + 1 : 0;
            last = count;
            if ((count > 0 && steady >= 10) || ++waited > 450) { clearInterval(tick); done(String(count)); }
          }, 100);
        })
        """
    }

    static let generators: [Generator] = [
        Generator(
            name: "Sphinx (python3.11-doc)", package: "python3.11-doc", root: "/usr/share/doc/python3.11/html", seed: "/search.html",
            search: "/search.html?q=dictionary&check_keywords=yes&area=default",
            scriptLoaded: ["/_static/glossary.json"], probe: searchProbe(results: "ul.search li")),
        Generator(
            // script.js inserts search.js and the five search indexes as script elements on every page.
            name: "javadoc (openjdk-17-doc)", package: "openjdk-17-doc", root: "/usr/share/doc/openjdk-17-doc/api", seed: "/index.html",
            search: "/index.html", scriptLoaded: ["/search.js", "/member-search-index.js", "/type-search-index.js", "/tag-search-index.js"],
            probe: searchProbe(
                ready: "typeof memberSearchIndex !== 'undefined' && typeof typeSearchIndex !== 'undefined' && jQuery('#search-input').catcomplete('instance')",
                start: "jQuery('#search-input').val('HashMap').catcomplete('search', 'HashMap');",
                results: "ul.ui-autocomplete li:not(.ui-autocomplete-category)")),
        Generator(
            // main.js loads the search code and its index when the page is asked for with ?search=.
            name: "rustdoc (rust-doc)", package: "rust-doc", root: "/usr/share/doc/rust-doc/html", seed: "/std/index.html",
            search: "/std/index.html?search=HashMap", scriptLoaded: ["/search1.63.0.js", "/search-index1.63.0.js"],
            probe: searchProbe(results: "#search .search-results a")),
        Generator(
            // The search runs in a Web Worker, which loads lunr and the index itself.
            name: "MkDocs (mkdocs-doc)", package: "mkdocs-doc", root: "/usr/share/doc/mkdocs/html", seed: "/index.html",
            search: "/index.html?q=theme", scriptLoaded: ["/search/worker.js", "/search/lunr.js", "/search/search_index.json"],
            probe: searchProbe(results: "#mkdocs-search-results article")),
    ]

    /// The generators whose documentation package is installed: a missing one is not run (and not reported as passed).
    static let installedGenerators = generators.filter { FileManager.default.fileExists(atPath: $0.root + $0.seed) }

    @Test(
        "documentation that Debian ships, from nginx, built with --browser: its search finds as many results offline from the bundle as from nginx",
        .enabled(if: RealServer.installed.contains("nginx"), "nginx is not installed"),
        .enabled(if: !installedGenerators.isEmpty, "none of the documentation packages is installed (make deps installs them)"),
        arguments: installedGenerators)
    func searchOffline(generator: Generator) async throws {
        let folder = try TemporaryFolder()
        let server = try await RealServer.start("nginx", root: generator.root, state: folder.path + "/server")
        defer { server.stop() }
        let arguments = ["build", "--seed", server.base + generator.seed, "--max-depth", "0", "--no-robots"]
        // Without the browser, the crawl misses what only scripts load.
        let plain = try await run(packagerExecutable, arguments + ["-o", folder.path + "/plain.zip"])
        #expect(plain.status == 0, "\(plain.output)")
        let plainLoader = try OfflineLoader(path: folder.path + "/plain.zip")
        #expect(generator.scriptLoaded.allSatisfy { plainLoader.response(for: BundleRequest(url: server.base + $0)) == nil })
        let built = try await run(packagerExecutable, arguments + ["--browser", "-o", folder.path + "/b.zip"])
        #expect(built.status == 0, "\(built.output)")
        let loader = try OfflineLoader(path: folder.path + "/b.zip")
        for path in generator.scriptLoaded {
            #expect(loader.response(for: BundleRequest(url: server.base + path))?.status == 200, "\(generator.name): \(path)\n\(built.output)")
        }
        let browser = try DevTools.launch(executable: try #require(chromium), profile: folder.path + "/profile")
        defer { browser.close() }
        let search = server.base + generator.search
        // Without the generic behaviours, which type into search boxes: MkDocs' box takes the query once its Web Worker
        // has built the index, so the typing replaced the query or not by how fast that was (0 results, or 141).
        let quiet = PageVisit.Behaviours(generic: false)
        let live = await PageVisit.visit(search, in: browser, timeout: 30, behaviours: quiet, probe: generator.probe) { _ in .proceed() }
        // Offline: the bundle answers; what it does not hold (result pages fetched for their summaries) fails.
        let offline = await PageVisit.visit(search, in: browser, timeout: 30, behaviours: quiet, probe: generator.probe) {
            await BrowserCheck.answer($0, from: loader)
        }
        let liveCount = Int(live.probe ?? "") ?? 0
        print("\(generator.name): \(liveCount) results from nginx, \(offline.probe ?? "-") offline from the bundle")
        #expect(liveCount > 0, "\(generator.name): \(live.problem ?? "") \(live.probe ?? "-")")
        #expect(offline.probe.flatMap(Int.init) == liveCount, "\(generator.name): \(offline.problem ?? "") \(offline.probe ?? "-") of \(liveCount)")
    }

    /// Doxygen, from Debian: its HTML of libarchive's and zlib's headers (real C documentation, generated at the test).
    static let doxygen = ["/usr/bin/doxygen"].first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(
        "a search that loads its index in pieces, one per first letter typed (Doxygen's, from nginx): build --browser holds every piece, and a search for any word finds offline what it finds from nginx",
        .enabled(if: RealServer.installed.contains("nginx"), "nginx is not installed"),
        .enabled(if: doxygen != nil, "doxygen is not installed (make deps installs it)"),
        .enabled(if: FileManager.default.fileExists(atPath: "/usr/include/archive.h"), "libarchive-dev is not installed"))
    func piecewiseSearchIndex() async throws {
        let folder = try TemporaryFolder()
        try folder.file(
            "Doxyfile",
            """
            INPUT = /usr/include/archive.h /usr/include/archive_entry.h /usr/include/zlib.h
            OUTPUT_DIRECTORY = \(folder.path)/out
            EXTRACT_ALL = YES
            GENERATE_LATEX = NO
            SEARCHENGINE = YES
            SERVER_BASED_SEARCH = NO
            QUIET = YES
            WARNINGS = NO
            """)
        let generated = try await run(try #require(Self.doxygen), [folder.path + "/Doxyfile"], in: folder.path)
        #expect(generated.status == 0, "\(generated.output)")
        let root = folder.path + "/out/html"
        let pieces = try FileManager.default.contentsOfDirectory(atPath: root + "/search").filter { $0.hasPrefix("all_") && $0.hasSuffix(".js") }
        #expect(pieces.count > 10, "\(pieces)")
        let server = try await RealServer.start("nginx", root: root, state: folder.path + "/server")
        defer { server.stop() }
        let built = try await run(
            packagerExecutable, ["build", "--seed", server.base + "/index.html", "--max-depth", "0", "--no-robots", "--browser", "-o", folder.path + "/b.zip"])
        #expect(built.status == 0, "\(built.output)")
        // Every piece of the index, not only the one the letter `a` loads.
        let loader = try OfflineLoader(path: folder.path + "/b.zip")
        let missing = pieces.sorted().filter { loader.response(for: BundleRequest(url: server.base + "/search/" + $0))?.status != 200 }
        #expect(missing.isEmpty, "\(missing)\n\(built.output)")
        // The build says it swept the seed's box, and that typing loaded pieces.
        #expect(built.output.contains("search box swept on \(server.base)/index.html: "), "\(built.output)")
        #expect(!built.output.contains("loaded nothing"), "\(built.output)")
        // The results frame with any word: the query-less page was recorded, and the origin ignores queries (H2).
        #expect(loader.response(for: BundleRequest(url: server.base + "/search/all_1.html?archive_entry"))?.status == 200)

        // Searched as a user would, two words of other first letters, from nginx and then offline from the bundle.
        let browser = try DevTools.launch(executable: try #require(chromium), profile: folder.path + "/profile")
        defer { browser.close() }
        let quiet = PageVisit.Behaviours(generic: false)
        for word in ["inflate", "z_stream"] {
            let probe = """
                new Promise(done => {
                  let waited = 0, last = -1, steady = 0;
                  document.getElementById('MSearchField').value = '\(word)';
                  searchBox.Search();
                  const tick = setInterval(() => {
                    let count = -1;
                    try {
                      const results = document.getElementById('MSearchResults').contentDocument;
                      count = Array.from(results.querySelectorAll('.SRResult')).filter(e => e.style.display === 'block').length;
                    } catch (e) {}
                    steady = count === last ? steady + 1 : 0;
                    last = count;
                    if ((count > 0 && steady >= 10) || ++waited > 300) { clearInterval(tick); done(String(count)); }
                  }, 100);
                })
                """
            let page = server.base + "/index.html"
            let live = await PageVisit.visit(page, in: browser, timeout: 30, behaviours: quiet, probe: probe) { _ in .proceed() }
            let offline = await PageVisit.visit(page, in: browser, timeout: 30, behaviours: quiet, probe: probe) {
                await BrowserCheck.answer($0, from: loader)
            }
            let liveCount = Int(live.probe ?? "") ?? 0
            #expect(liveCount > 0, "\(word): \(live.problem ?? "") \(live.probe ?? "-")")
            #expect(offline.probe.flatMap(Int.init) == liveCount, "\(word): \(offline.problem ?? "") \(offline.probe ?? "-") of \(liveCount)")
        }
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
            // Fetched with the declared bearer: kept for requests that carry one (security review 3, S3), not for others.
            let bundle = try MountedBundle(path: folder.path + "/b.zip")
            #expect(bundle.entry(for: BundleRequest(url: origin.base + "/data.json", headers: fields([("Authorization", "Bearer any")])))?.status == 200)
            #expect(bundle.entry(for: BundleRequest(url: origin.base + "/data.json")) == nil)
        }
    }
}

/// The third security review's S1 and S12: every connection the browser opens goes through the crawl's scope, whatever
/// opens it (a WebSocket, a worker, a pop-up, WebRTC), and `check --browser` lets nothing out at all.
@Suite(
    "the browser kept in scope: connections past the DevTools interception", .enabled(if: chromium != nil, "Chromium is not installed: \(DevTools.installHint)")
)
struct BrowserConfinementTests {
    /// Logs every TCP connection (its first line) and UDP datagram on one port, on every address: prints the port, then
    /// a line per connection or datagram to `log`.
    static let listener = """
        import socket, sys, threading
        log = open(sys.argv[1], 'a', buffering=1)
        tcp = socket.socket(); tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); tcp.bind(('0.0.0.0', 0)); tcp.listen(64)
        port = tcp.getsockname()[1]
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(('0.0.0.0', port))
        def datagrams():
            while True:
                data, peer = udp.recvfrom(65536); log.write('UDP %d bytes\\n' % len(data))
        threading.Thread(target=datagrams, daemon=True).start()
        print(port, flush=True)
        while True:
            conn, peer = tcp.accept(); conn.settimeout(2)
            try: first = conn.recv(4096).split(b'\\r\\n')[0].decode('latin-1')
            except Exception: first = '(nothing)'
            log.write('TCP ' + first + '\\n'); conn.close()
        """

    /// A page that tries every way out the review found to the listener's port, then a fetch in scope.
    static func hostilePage(off port: Int) -> String {
        """
        <html><body><script>
        const off = '127.0.0.1:\(port)', zero = '0.0.0.0:\(port)';
        try { new WebSocket('ws://' + off + '/ws'); } catch (e) {}
        try { new WebSocket('ws://' + zero + '/ws-zero'); } catch (e) {}
        try { window.open('http://' + off + '/window-open'); } catch (e) {}
        try { window.open('http://' + zero + '/window-open-zero'); } catch (e) {}
        const code = (s) => URL.createObjectURL(new Blob([s], {type: 'text/javascript'}));
        try { new Worker(code("new WebSocket('ws://" + off + "/worker-ws');")); } catch (e) {}
        try { new SharedWorker(code("fetch('http://" + off + "/shared-fetch').catch(() => {});")); } catch (e) {}
        try {
          const pc = new RTCPeerConnection({iceServers: [{urls: 'stun:' + off}]});
          pc.createDataChannel('x'); pc.createOffer().then(o => pc.setLocalDescription(o));
        } catch (e) {}
        fetch('inscope.json');
        </script></body></html>
        """
    }

    /// Starts the listener; its port and process.
    static func startListener(_ folder: TemporaryFolder) async throws -> (Int, Process) {
        try folder.file("listener.py", listener)
        let pipe = Pipe()
        let process = try launch("/usr/bin/env", ["python3", folder.path + "/listener.py", folder.path + "/off.log"], output: pipe)
        let line = try await firstLine(of: pipe)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            throw TestSetupError("the listener did not start: \(line)")
        }
        return (port, process)
    }

    @Test(
        "build --browser: WebSockets (page and worker), pop-ups, a shared worker's fetch and WebRTC reach no off-scope host; the page's fetch in scope still goes"
    )
    func buildKeepsThePageInScope() async throws {
        let folder = try TemporaryFolder()
        let (port, listener) = try await Self.startListener(folder)
        defer { listener.terminate() }
        try await withOrigin { origin in
            origin.set("/", .text(Self.hostilePage(off: port), type: "text/html"))
            origin.set("/inscope.json", .text("{}", type: "application/json"))
            try folder.file(
                "d.yml",
                """
                seeds: [\(origin.base)/]
                output: \(folder.path)/b.zip
                robots: false
                ignore-query: none
                retries: {attempts: 0}
                browser: {enabled: true, pages: all, page-timeout: 4}
                """)
            let result = try await run(packagerExecutable, ["build", folder.path + "/d.yml"])
            #expect(result.status == 0, "\(result.output)")
            // The page's own fetch went through the proxy to the origin, and was recorded.
            #expect(try MountedBundle(path: folder.path + "/b.zip").entry(for: origin.base + "/inscope.json")?.status == 200)
            #expect(origin.requests.contains { $0.path == "/inscope.json" && ($0.headers["user-agent"] ?? "").contains("HeadlessChrome") })
        }
        // Whatever was still on its way has had its time.
        try await Task.sleep(for: .seconds(1))
        let log = (try? String(contentsOfFile: folder.path + "/off.log", encoding: .utf8)) ?? ""
        #expect(log.isEmpty, "reached the off-scope listener:\n\(log)")
    }

    @Test("check --browser: the same page in a bundle sends nothing anywhere, WebRTC included")
    func checkLetsNothingOut() async throws {
        let folder = try TemporaryFolder()
        let (port, listener) = try await Self.startListener(folder)
        defer { listener.terminate() }
        try folder.file("site/index.html", Self.hostilePage(off: port))
        try folder.file("site/inscope.json", "{}")
        _ = try await run(packagerExecutable, ["pack", folder.path + "/site", "--base-url", "https://site.example/", "-o", folder.path + "/b.zip"])
        let result = try await run(packagerExecutable, ["check", folder.path + "/b.zip", "--browser"])
        #expect(result.output.contains("index.html") || result.status <= 1, "\(result.output)")
        try await Task.sleep(for: .seconds(1))
        let log = (try? String(contentsOfFile: folder.path + "/off.log", encoding: .utf8)) ?? ""
        #expect(log.isEmpty, "reached the listener from check --browser:\n\(log)")
    }
}

@Suite("BrowserProxy: the browser's one way out, deciding each connection")
struct BrowserProxyTests {
    @Test("a plain request and a CONNECT reach a host only when allowed; one connection carries one request; malformed heads are refused")
    func decidesEveryConnection() async throws {
        try await withOrigins { allowed, other in
            allowed.set("/a.txt", .text("allowed", type: "text/plain"))
            other.set("/b.txt", .text("other", type: "text/plain"))
            let allowedPort = try #require(Int(allowed.base.split(separator: ":").last ?? ""))
            let proxy = try await BrowserProxy.start { host, port, _ in host == "127.0.0.1" && port == allowedPort }
            let via = ["-s", "-x", "http://127.0.0.1:\(proxy.port)", "-w", " %{http_code}"]
            #expect(try await run("curl", via + [allowed.base + "/a.txt"]).output == "allowed 200")
            #expect(try await run("curl", via + [other.base + "/b.txt"]).output.hasSuffix(" 403"))
            // A tunnel (as Chromium opens for HTTPS and WebSockets): allowed, the bytes go through; refused, a 403.
            #expect(try await run("curl", via + ["-p", allowed.base + "/a.txt"]).output == "allowed 200")
            let tunnel = try await run("curl", via + ["-p", other.base + "/b.txt"])
            #expect(tunnel.status != 0 && !tunnel.output.contains("other"), "\(tunnel.output)")
            #expect(other.count("/b.txt") == 0, "the other host was never reached")
            #expect(proxy.refusedConnections.count == 2, "\(proxy.refusedConnections)")
            // Keep-alive on the browser's side cannot carry a second, undecided request to the host of the first.
            let twice = try await run("curl", via + [allowed.base + "/a.txt", "--next"] + via + [other.base + "/b.txt"])
            #expect(twice.output.contains("allowed 200") && !twice.output.contains("other"), "\(twice.output)")
            // A large answer to a slow reader comes whole: the host's end waits for every byte relayed.
            allowed.set("/big.bin", Origin.Resource(status: 200, headers: [("Content-Type", "application/octet-stream")], body: Array(noise(4 << 20, seed: 7))))
            let big = try await run("curl", via + ["--limit-rate", "4M", "-o", "/dev/null", "-w", " %{size_download}", allowed.base + "/big.bin"])
            #expect(big.output.hasSuffix(" \(4 << 20)"), "\(big.output)")
            await proxy.stop()
        }
        #expect(throws: BrowserProxy.Refusal.self) { try BrowserProxy.parse(head: Array("GET /relative HTTP/1.1\r\nHost: x".utf8)) }
        #expect(throws: BrowserProxy.Refusal(status: 501, reason: "a request body in chunks")) {
            try BrowserProxy.parse(head: Array("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked".utf8))
        }
        let parsed = try BrowserProxy.parse(
            head: Array("GET http://a.example:8080/p?q=1#f HTTP/1.1\r\nHost: a.example:8080\r\nProxy-Connection: keep-alive".utf8))
        #expect(parsed.host == "a.example" && parsed.port == 8080 && !parsed.tunnel)
        #expect(String(decoding: parsed.head, as: UTF8.self) == "GET /p?q=1 HTTP/1.1\r\nHost: a.example:8080\r\nConnection: close\r\n\r\n")
        #expect(try BrowserProxy.parse(head: Array("CONNECT [::1]:443 HTTP/1.1".utf8)) == BrowserProxy.Target(host: "::1", port: 443, tunnel: true))
    }
}
