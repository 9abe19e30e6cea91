import Foundation
import HTTPTypes
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// A miss said against the nearest recorded request: what a person needs to fix the declaration or the client.
@Suite("near misses: the nearest recorded request and what differed")
struct MissExplanationTests {
    static let api = "http://api.example"

    /// A list with a second page, a search answered by its POST body, items negotiated on Accept.
    static func bundle(_ folder: TemporaryFolder) throws -> String {
        var writer = BundleWriter()
        func add(_ path: String, type: String = "application/json", body: String, request: RecordedRequest? = nil) {
            var entry = RecordedExchange(url: api + path, headers: [("content-type", type)], body: .data(Data(body.utf8)))
            entry.request = request
            writer.add(entry)
        }
        add("/list?page=2", body: "[2]")
        add("/list?page=1&sort=name", body: "[1]")
        add(
            "/search", body: "{\"hits\": 1}",
            request: RecordedRequest(method: "POST", headers: [.init(name: "content-type", value: "application/json")], body: Data("{\"q\":\"a\"}".utf8)))
        add(
            "/items", body: "[]",
            request: RecordedRequest(
                headers: [.init(name: "accept", value: "application/json")], keyHeaders: [.init(name: "accept", value: "application/json")]))
        let path = folder.path + "/api.zip"
        try writer.write(to: path)
        return path
    }

    @Test("each kind of difference is named: a query parameter, the method, a header, the body, a path with nothing recorded")
    func kinds() throws {
        let folder = try TemporaryFolder()
        let loader = try OfflineLoader(path: try Self.bundle(folder), policy: .bundleOnly)
        func explain(_ path: String, method: String = "GET", headers: [(String, String)] = [], body: String? = nil) throws -> MissExplanation {
            var fields = HTTPFields()
            for (name, value) in headers { fields.append(HTTPField(name: try #require(HTTPField.Name(name)), value: value)) }
            let request = BundleRequest(method: method, url: Self.api + path, headers: fields, body: body.map { Data($0.utf8) })
            #expect(loader.response(for: request) == nil, "\(method) \(path) should miss")
            return try #require(loader.explainMiss(request))
        }
        let page = try explain("/list?page=3")
        #expect(page.kind == .query && page.nearest == Self.api + "/list?page=2", "\(page)")
        #expect(page.differences == ["query parameter page=3, recorded page=2"], "\(page)")
        #expect(page.description == "nearest GET http://api.example/list?page=2: query parameter page=3, recorded page=2")
        // The nearest is the one that differs least: a cache-busting parameter more than page 2.
        let busted = try explain("/list?page=2&_=1733000000")
        #expect(busted.nearest == Self.api + "/list?page=2" && busted.differences == ["query parameter _=1733000000 not recorded"], "\(busted)")
        // A GET's body does not count against a GET recorded without one (H19 rule 2): only the query is named.
        let withBody = try explain("/list?page=4", body: "ignored")
        #expect(withBody.kind == .query && withBody.differences.count == 1 && !withBody.description.contains("body"), "\(withBody)")
        let missing = try explain("/list?sort=name")
        #expect(missing.differences == ["no query parameter page, recorded page=1"], "\(missing)")
        let method = try explain("/search")
        #expect(method.kind == .method && method.differences.first == "method GET, recorded POST", "\(method)")
        let body = try explain("/search", method: "POST", headers: [("content-type", "application/json")], body: "{\"q\":\"b\"}")
        #expect(body.kind == .body && body.differences.count == 1 && body.differences[0].hasPrefix("a body of 9 bytes, recorded another"), "\(body)")
        let header = try explain("/items", headers: [("accept", "text/csv")])
        #expect(header.kind == .header && header.differences == ["header accept: text/csv, recorded application/json"], "\(header)")
        // A path nothing was recorded under, a typo away from one that was: named.
        let typo = try explain("/lsit?page=2")
        #expect(typo.kind == .path && typo.description == "nothing recorded under http://api.example/lsit (recorded: http://api.example/list)", "\(typo)")
        let nothing = try explain("/nowhere?x=1")
        #expect(nothing.kind == .path && nothing.nearest == nil && nothing.description == "nothing recorded under http://api.example/nowhere", "\(nothing)")
        // What answers is no miss.
        #expect(loader.explainMiss(BundleRequest(url: Self.api + "/list?page=2")) == nil)
        // A value a client sent reaches a header field as visible ASCII only.
        let hostile = try explain("/list?page=%0D%0AX-Evil:%201")
        #expect(hostile.fieldValue.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }, "\(hostile.fieldValue)")
    }

    @Test("H19 rule 2: a GET's body counts only where a GET was recorded with one; a POST's body always counts where POSTs were recorded")
    func bodyCountsWhereRecorded() throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter()
        writer.add(.init(url: Self.api + "/q", headers: [("content-type", "text/plain")], body: .data(Data("plain".utf8))))
        var post = RecordedExchange(url: Self.api + "/q", headers: [("content-type", "text/plain")], body: .data(Data("posted".utf8)))
        post.request = RecordedRequest(method: "POST", body: Data("a".utf8))
        writer.add(post)
        try writer.write(to: folder.path + "/q.zip")
        let bundle = try MountedBundle(path: folder.path + "/q.zip")
        // A GET with a body, at a URL whose GET was recorded without one: the plain entry, as from an integration
        // that did not collect the body (matchesBody says no).
        #expect(!bundle.matchesBody(method: "GET", url: Self.api + "/q"))
        let get = try #require(bundle.entry(for: BundleRequest(method: "GET", url: Self.api + "/q", body: Data("{\"q\": 1}".utf8))))
        #expect(get.key == Self.api + "/q")
        #expect(bundle.matchesBody(method: "POST", url: Self.api + "/q"))
        #expect(bundle.entry(for: BundleRequest(method: "POST", url: Self.api + "/q", body: Data("a".utf8)))?.key.hasPrefix(Self.api + "/q m=POST b=") == true)
        #expect(bundle.entry(for: BundleRequest(method: "POST", url: Self.api + "/q", body: Data("b".utf8))) == nil)
    }

    @Test("serve: the access log and /metrics explain a miss; --explain-misses puts it in the 404's X-Offline-Miss")
    func serveExplains() async throws {
        let folder = try TemporaryFolder()
        let bundle = try Self.bundle(folder)
        let log = folder.path + "/access.log"
        let admin = try freePort()
        try await withServe(
            bundle,
            ["--origin", Self.api, "--explain-misses", "--access-log", log, "--admin-port", String(admin)]
        ) { base, _ in
            let miss = try await run("curl", ["-s", "-D", "-", "-o", "/dev/null", base + "/list?page=3"])
            #expect(miss.output.hasPrefix("HTTP/1.1 404"), "\(miss.output)")
            #expect(
                miss.output.lowercased().contains(
                    "x-offline-miss: nearest get http://api.example/list?page=2: query parameter page=3, recorded page=2"), "\(miss.output)")
            let hit = try await run("curl", ["-s", "-D", "-", "-o", "/dev/null", base + "/list?page=2"])
            #expect(hit.output.hasPrefix("HTTP/1.1 200") && !hit.output.lowercased().contains("x-offline-miss"), "\(hit.output)")
            let metrics = try await run("curl", ["-s", "http://127.0.0.1:\(admin)/metrics"])
            #expect(metrics.output.contains("packager_http_misses_total{kind=\"query\"} 1"), "\(metrics.output)")
        }
        let lines = try String(contentsOfFile: log, encoding: .utf8)
        #expect(
            lines.contains(
                "\"GET /list?page=3 HTTP/1.1\" 404 0 \"-\" \"miss: nearest GET http://api.example/list?page=2: query parameter page=3, recorded page=2\""),
            "\(lines)")
    }
}
