import Foundation
import HTTPTypes
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// Query strings on static content (docs/FORMAT.md §4.6, H2): `search.html?q=…` answered by `search.html` where the
/// origin ignores the query, and nowhere else.
@Suite("ignore-query: a query no entry has, answered as a static server answers it")
struct IgnoreQueryTests {
    static func site(_ folder: TemporaryFolder) throws -> String {
        try folder.file("site/index.html", "<html><a href=\"search.html\">search</a><a href=\"api/list.json?page=1\">list</a></html>")
        try folder.file("site/search.html", "<html><p>search page</p></html>")
        try folder.file("site/api/list.json", "[1]")
        return folder.path + "/site"
    }

    @Test(
        "a crawl of a real static server learns that it ignores queries; a query-sensitive origin teaches no rule",
        arguments: RealServer.installed.prefix(2))
    func crawlLearns(kind: String) async throws {
        let folder = try TemporaryFolder()
        let root = try Self.site(folder)
        let server = try await RealServer.start(kind, root: root, state: folder.path + "/server")
        defer { server.stop() }
        let base = server.base
        var declaration = try DeclarationParser().parse("seeds: [\(base)/]\nrobots: false\n")
        let report = try await Builder(declaration: declaration, options: .init(output: folder.path + "/static.zip")).run()
        #expect(report.succeeded, "\(report.failures)")
        let bundle = try MountedBundle(path: folder.path + "/static.zip")
        #expect(bundle.rules.ignoreQuery == [base + "/*"])
        let loader = OfflineLoader(bundles: [bundle])
        let search = try #require(loader.response(for: BundleRequest(url: base + "/search.html?q=dictionary&check_keywords=yes")))
        #expect(search.status == 200)
        #expect(try search.bodyData() == Data("<html><p>search page</p></html>".utf8))
        // The path the crawl recorded with a query keeps its query: another page of it is a miss, not page 1.
        #expect(loader.response(for: BundleRequest(url: base + "/api/list.json?page=1")) != nil)
        #expect(loader.response(for: BundleRequest(url: base + "/api/list.json?page=2")) == nil)
        #expect(loader.response(for: BundleRequest(url: base + "/missing.html?q=x")) == nil)

        // Declared: nowhere, or for given patterns only; the probe is not made.
        declaration.ignoreQuery = .none
        _ = try await Builder(declaration: declaration, options: .init(output: folder.path + "/none.zip")).run()
        #expect(try MountedBundle(path: folder.path + "/none.zip").rules.ignoreQuery.isEmpty)
        declaration = try DeclarationParser().parse("seeds: [\(base)/]\nrobots: false\nignore-query: ['\(base)/search*']\n")
        _ = try await Builder(declaration: declaration, options: .init(output: folder.path + "/declared.zip")).run()
        #expect(try MountedBundle(path: folder.path + "/declared.zip").rules.ignoreQuery == [base + "/search*"])
    }

    @Test("a path recorded with queries whose answers are all the page's own still ignores the query; one whose answers differ does not")
    func recordedQueriesThatChangeNothing() throws {
        let folder = try TemporaryFolder()
        let base = "http://docs.example"
        var writer = BundleWriter(options: .init(rules: BundleRules(ignoreQuery: [base + "/*"])))
        func add(_ path: String, _ body: String, status: Int = 200) {
            writer.add(.init(url: base + path, status: status, headers: [("content-type", "text/html")], body: .data(Data(body.utf8))))
        }
        // A search page the browser visited with two words: the origin answered the page itself each time.
        add("/search.html", "<p>search</p>")
        add("/search.html?q=a", "<p>search</p>")
        add("/search.html?q=b", "<p>search</p>")
        // A list whose second page differs: the query matters there.
        add("/list.html", "<p>page 1</p>")
        add("/list.html?page=2", "<p>page 2</p>")
        // The same body under another status is another answer.
        add("/item.html", "<p>item</p>")
        add("/item.html?id=9", "<p>item</p>", status: 404)
        // Queried versions with no query-less entry: nothing to answer from.
        add("/feed.xml?v=1", "<feed/>")
        try writer.write(to: folder.path + "/b.zip")
        let loader = try OfflineLoader(path: folder.path + "/b.zip")
        let search = try #require(loader.response(for: BundleRequest(url: base + "/search.html?q=dictionary")))
        #expect(search.status == 200)
        #expect(try search.bodyData() == Data("<p>search</p>".utf8))
        #expect(loader.response(for: BundleRequest(url: base + "/list.html?page=9")) == nil)
        #expect(try loader.response(for: BundleRequest(url: base + "/list.html?page=2"))?.bodyData() == Data("<p>page 2</p>".utf8))
        #expect(loader.response(for: BundleRequest(url: base + "/item.html?id=1")) == nil)
        #expect(loader.response(for: BundleRequest(url: base + "/feed.xml?v=2")) == nil)
    }

    @Test("packed files ignore the query; --query-matters packs without the rule")
    func packIgnoresQuery() async throws {
        let folder = try TemporaryFolder()
        let root = try Self.site(folder)
        let packed = try await run(packagerExecutable, ["pack", root, "--base-url", "https://docs.example/", "-o", folder.path + "/p.zip"])
        #expect(packed.status == 0, "\(packed.output)")
        let loader = try OfflineLoader(path: folder.path + "/p.zip")
        #expect(loader.response(for: BundleRequest(url: "https://docs.example/search.html?q=x"))?.status == 200)
        let strict = try await run(
            packagerExecutable, ["pack", root, "--base-url", "https://docs.example/", "--query-matters", "-o", folder.path + "/q.zip"])
        #expect(strict.status == 0, "\(strict.output)")
        #expect(try OfflineLoader(path: folder.path + "/q.zip").response(for: BundleRequest(url: "https://docs.example/search.html?q=x")) == nil)
        // `packager serve` answers the query from the file, as nginx would.
        try await withServe(folder.path + "/p.zip") { base, _ in
            let page = try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", base + "/search.html?q=dictionary&area=default"])
            #expect(page.output == "200")
        }
    }

    @Test("a declaration's ignore-query is auto, none or patterns; anything else is refused with its line")
    func declaration() throws {
        #expect(try DeclarationParser().parse("seeds: [https://a.example/]\n").ignoreQuery == .auto)
        #expect(try DeclarationParser().parse("seeds: [https://a.example/]\nignore-query: none\n").ignoreQuery == .none)
        #expect(
            try DeclarationParser().parse("seeds: [https://a.example/]\nignore-query: 'https://a.example/*'\n").ignoreQuery
                == .patterns(["https://a.example/*"]))
        #expect(throws: PackagerError.self) { try DeclarationParser().parse("seeds: [https://a.example/]\nignore-query: {a: 1}\n") }
    }
}
