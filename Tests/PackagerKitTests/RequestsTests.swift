import Foundation
import HTTPTypes
import OfflineBundle
import Synchronization
import TestSupport
import Testing

@testable import PackagerKit

/// An API on the test origin: a search answered by the POST body, a list in two representations (by `Accept`), a
/// greeting in two languages (`Vary: Accept-Language`), a 404, a private answer for a bearer, and lists paged three ways.
func serveAPI(_ origin: Origin) {
    origin.route("/api/search") { request in
        guard request.method == "POST" else { return .text("{\"error\": \"POST only\"}", type: "application/json", status: 405, headers: [("Allow", "POST")]) }
        let query = (try? JSONSerialization.jsonObject(with: request.body) as? [String: String])?["q"] ?? ""
        let hits = ["a": "apple", "b": "banana"][query].map { "[\"\($0)\"]" } ?? "[]"
        return .text("{\"hits\": \(hits), \"query_ms\": \(Int.random(in: 1...999))}", type: "application/json")
    }
    origin.route("/api/items") { request in
        let accept = request.headers["accept"] ?? "*/*"
        if accept.contains("text/csv") { return .text("id,name\n1,apple\n", type: "text/csv", headers: [("Vary", "Accept")]) }
        if accept.contains("json") || accept.contains("*/*") {
            return .text("[{\"id\": 1, \"name\": \"apple\"}]", type: "application/json", headers: [("Vary", "Accept")])
        }
        return .text("not acceptable", type: "text/plain", status: 406, headers: [("Vary", "Accept")])
    }
    origin.route("/api/greeting") { request in
        let french = (request.headers["accept-language"] ?? "").hasPrefix("fr")
        return .text(
            french ? "bonjour" : "hallo", type: "text/plain",
            headers: [("Content-Language", french ? "fr" : "de"), ("Vary", "Accept-Language")])
    }
    origin.set("/api/missing", .text("{\"error\": \"no such thing\"}", type: "application/json", status: 404))
    origin.route("/api/private") { request in
        request.headers["authorization"] == "Bearer s3cret-t0ken-value"
            ? .text("{\"secret\": \"the full answer\"}", type: "application/json")
            : .text("{\"public\": true}", type: "application/json")
    }
    for page in 1...3 {
        let next = page < 3 ? [("Link", "</api/pages?page=\(page + 1)>; rel=\"next\", </api/pages?page=1>; rel=\"first\"")] : []
        origin.set("/api/pages?page=\(page)", .text("[\"row \(page)\"]", type: "application/json", headers: next + [("X-Total-Count", "3")]))
        let cursor = page < 3 ? "\"\(origin.base)/api/cursor?after=\(page)\"" : "null"
        origin.set(
            page == 1 ? "/api/cursor" : "/api/cursor?after=\(page - 1)", .text("{\"rows\": [\(page)], \"next_url\": \(cursor)}", type: "application/json"))
    }
    // Columns in the order asked (the request is sent as declared).
    origin.set("/api/sql?sql=select+name&_col=type&_col=name", .text("[\"type\", \"name\"]", type: "application/json"))
    origin.set("/api/sql?sql=select+name&_col=name&_col=type", .text("[\"name\", \"type\"]", type: "application/json"))
    origin.set("/api/headed", .text("[1]", type: "application/json", headers: [("Next-Page", "/api/headed?p=2")]))
    origin.set("/api/headed?p=2", .text("[2]", type: "application/json"))
    // A list whose last page links back to its first.
    origin.set("/api/loop", .text("[1]", type: "application/json", headers: [("Link", "</api/loop?p=2>; rel=next")]))
    origin.set("/api/loop?p=2", .text("[2]", type: "application/json", headers: [("Link", "</api/loop>; rel=next")]))
}

@Suite("declared requests: methods, bodies, variants, fixtures, pagination")
struct RequestsTests {
    static func declaration(_ base: String, output: String, extra: String = "") -> String {
        """
        output: \(output)
        robots: false
        requests:
          - url: \(base)/api/search
            method: POST
            headers: {Content-Type: application/json}
            body: '{"q": "a"}'
            volatile: [/query_ms]
          - url: \(base)/api/search
            method: POST
            headers: {Content-Type: application/json}
            body: '{"q": "b"}'
            volatile: [/query_ms]
          - url: \(base)/api/items
            headers: {Accept: application/json}
          - url: \(base)/api/items
            headers: {Accept: text/csv}
          - url: \(base)/api/greeting
            headers: {Accept-Language: fr}
          - url: \(base)/api/greeting
            headers: {Accept-Language: de}
          - url: \(base)/api/missing
            status: 404
          - url: \(base)/api/private
            headers: {Authorization: "Bearer ${API_TOKEN}"}
          - \(base)/api/pages?page=1
          - url: \(base)/api/cursor
            paginate: {json: /next_url}
          - url: \(base)/api/headed
            paginate: {header: Next-Page}
          - \(base)/api/sql?sql=select+name&_col=type&_col=name
          - \(base)/api/sql?sql=select+name&_col=name&_col=type
        \(extra)
        """
    }

    @Test(
        "a declared POST, two Accept variants, two languages, a 404 fixture, a bearer's answer and three kinds of paged list are kept and answered by request")
    func builtAndAnswered() async throws {
        try await withOrigin { origin in
            serveAPI(origin)
            let folder = try TemporaryFolder()
            try folder.file("api.yml", Self.declaration(origin.base, output: folder.path + "/api.zip"))
            let result = try await run("/usr/bin/env", ["API_TOKEN=s3cret-t0ken-value", packagerExecutable, "build", folder.path + "/api.yml"])
            #expect(result.status == 0, "\(result.output)")
            let loader = try OfflineLoader(path: folder.path + "/api.zip")
            func ask(_ path: String, _ headers: HTTPFields = [:], method: String = "GET", body: String? = nil) -> (Int, String)? {
                guard
                    let response = loader.response(
                        for: BundleRequest(method: method, url: origin.base + path, headers: headers, body: body.map { Data($0.utf8) })),
                    let data = try? response.bodyData()
                else { return nil }
                return (response.status, String(decoding: data, as: UTF8.self))
            }
            // By method and body.
            #expect(ask("/api/search", method: "POST", body: "{\"q\": \"a\"}")?.1.contains("apple") == true)
            #expect(ask("/api/search", method: "POST", body: "{\"q\": \"b\"}")?.1.contains("banana") == true)
            #expect(ask("/api/search", method: "POST", body: "{\"q\": \"c\"}") == nil, "a body not recorded is a miss")
            #expect(ask("/api/search", method: "GET") == nil, "a GET is not the POST")
            // By Accept, as content negotiation chooses; a type neither variant is, is a miss (the origin said 406).
            #expect(ask("/api/items", [.accept: "application/json"])?.1.hasPrefix("[") == true)
            #expect(ask("/api/items", [.accept: "text/csv"])?.1.hasPrefix("id,name") == true)
            #expect(ask("/api/items", [.accept: "text/csv;q=0.5, application/json;q=0.9"])?.1.hasPrefix("[") == true)
            #expect(ask("/api/items", [.accept: "text/*"])?.1.hasPrefix("id,name") == true)
            #expect(ask("/api/items", [.accept: "application/xml"]) == nil)
            #expect(ask("/api/items")?.1.hasPrefix("[") == true, "no Accept takes any; the JSON comes first")
            // By Accept-Language (the response's Vary made it part of the key).
            #expect(ask("/api/greeting", [.acceptLanguage: "fr-CH, de;q=0.5"])?.1 == "bonjour")
            #expect(ask("/api/greeting", [.acceptLanguage: "de"])?.1 == "hallo")
            #expect(ask("/api/greeting", [.acceptLanguage: "es"]) == nil)
            // The 404 is a fixture.
            #expect(ask("/api/missing")?.0 == 404)
            // The bearer's answer goes to a request with a bearer, not to one without.
            #expect(ask("/api/private", [.authorization: "Bearer any-token"])?.1.contains("the full answer") == true)
            #expect(ask("/api/private") == nil)
            #expect(ask("/api/private", [.authorization: "Basic dXNlcjpwYXNz"]) == nil)
            // Every page of each list, to its last.
            for page in 1...3 { #expect(ask("/api/pages?page=\(page)")?.1 == "[\"row \(page)\"]", "page \(page)") }
            #expect(loader.response(for: BundleRequest(url: origin.base + "/api/pages?page=2"))?.header("x-total-count") == "3")
            #expect(ask("/api/cursor?after=2")?.1.contains("\"rows\": [3]") == true)
            #expect(ask("/api/headed?p=2")?.1 == "[2]")
            // A query declared with `+` is found with `%20` (URLComponents' spelling); one name's values keep their order.
            #expect(ask("/api/sql?sql=select%20name&_col=type&_col=name")?.1 == "[\"type\", \"name\"]")
            #expect(ask("/api/sql?_col=name&sql=select+name&_col=type")?.1 == "[\"name\", \"type\"]")
            #expect(ask("/api/sql?sql=select%2Bname&_col=type&_col=name") == nil)

            // The token is nowhere in the bundle.
            let bytes = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/api.zip"))
            #expect(bytes.range(of: Data("s3cret-t0ken-value".utf8)) == nil)
            let unzipped = try await run("/usr/bin/unzip", ["-p", folder.path + "/api.zip", "manifest.json"])
            #expect(!unzipped.output.contains("s3cret") && unzipped.output.contains("\"method\": \"POST\""), "\(unzipped.output.prefix(2000))")
        }
    }

    @Test("pagination: a loop is named, and a page limit is said; a request whose answer does not vary on the headers that tell it from another is named")
    func paginationAndCollisions() async throws {
        try await withOrigin { origin in
            serveAPI(origin)
            origin.set("/api/plain", .text("same", type: "text/plain"))
            let folder = try TemporaryFolder()
            try folder.file(
                "loop.yml",
                """
                output: \(folder.path)/loop.zip
                robots: false
                requests:
                  - url: \(origin.base)/api/loop
                """)
            let loop = try await run(packagerExecutable, ["build", folder.path + "/loop.yml"])
            #expect(loop.status != 0 && loop.output.contains("pagination loop: page 3 is \(origin.base)/api/loop again"), "\(loop.output)")

            try folder.file(
                "limit.yml",
                """
                output: \(folder.path)/limit.zip
                robots: false
                requests:
                  - url: \(origin.base)/api/pages?page=1
                    paginate: {link: true, max-pages: 2}
                """)
            let limited = try await run(packagerExecutable, ["build", folder.path + "/limit.yml"])
            #expect(limited.status == 0 && limited.output.contains("stopped after 2 pages (paginate.max-pages)"), "\(limited.output)")

            try folder.file(
                "same.yml",
                """
                output: \(folder.path)/same.zip
                robots: false
                requests:
                  - url: \(origin.base)/api/plain
                    headers: {Accept-Language: fr}
                  - url: \(origin.base)/api/plain
                    headers: {Accept-Language: de}
                """)
            let same = try await run(packagerExecutable, ["build", folder.path + "/same.yml"])
            #expect(same.status != 0 && same.output.contains("would be kept under the same key as the answer to the request on line"), "\(same.output)")
            #expect(!FileManager.default.fileExists(atPath: folder.path + "/same.zip"))
        }
    }

    @Test("a declared status that does not come fails the build, named with its line")
    func unexpectedStatus() async throws {
        try await withOrigin { origin in
            serveAPI(origin)
            let folder = try TemporaryFolder()
            try folder.file(
                "d.yml",
                """
                output: \(folder.path)/x.zip
                robots: false
                requests:
                  - url: \(origin.base)/api/missing
                    status: 200
                """)
            let result = try await run(packagerExecutable, ["build", folder.path + "/d.yml"])
            #expect(result.status != 0 && result.output.contains("HTTP 404, where the declaration expects 200 (requests, line 4)"), "\(result.output)")
        }
    }
}

@Suite("declared requests: verify, refresh and diff, with volatile JSON fields")
struct RequestsFreshnessTests {
    /// An API whose answers carry a query time that changes on every request, a list that grows a page, and a POST.
    final class API: Sendable {
        let name = Mutex("Auckland")
        let pages = Mutex(2)

        func serve(_ origin: Origin) {
            origin.route("/api/rows") { [self] _ in
                let name = self.name.withLock { $0 }
                return .text(
                    "{\"rows\": [{\"id\": 1, \"name\": \"\(name)\"}, {\"id\": 2, \"name\": \"Wellington\"}], \"query_ms\": \(Double.random(in: 0.1...99))}",
                    type: "application/json")
            }
            for page in 1...3 {
                origin.route(page == 1 ? "/api/list" : "/api/list?page=\(page)") { [self] _ in
                    let last = self.pages.withLock { $0 }
                    let next = page < last ? [("Link", "</api/list?page=\(page + 1)>; rel=\"next\"")] : []
                    return .text("[\(page)]", type: "application/json", headers: next)
                }
            }
            origin.route("/api/echo") { request in
                .text("{\"echo\": \(String(decoding: request.body, as: UTF8.self)), \"query_ms\": \(Int.random(in: 1...99))}", type: "application/json")
            }
        }
    }

    @Test(
        "verify gives 0 false alarms over 5 runs while query_ms changes, then names the changed field; diff names it too; refresh walks a list's new page; a POST is re-sent only when asked"
    )
    func volatileFieldsAndPages() async throws {
        let api = API()
        try await withOrigin { origin in
            api.serve(origin)
            let folder = try TemporaryFolder()
            try folder.file(
                "api.yml",
                """
                output: \(folder.path)/api.zip
                robots: false
                requests:
                  - url: \(origin.base)/api/rows
                    volatile: [/query_ms]
                  - url: \(origin.base)/api/list
                  - url: \(origin.base)/api/echo
                    method: POST
                    body: '{"a": 1}'
                    volatile: [/query_ms]
                """)
            let declaration = folder.path + "/api.yml"
            let built = try await run(packagerExecutable, ["build", declaration])
            #expect(built.status == 0, "\(built.output)")
            // A second build: the bodies differ (query_ms), the bundles answer alike.
            try folder.file("again.yml", try String(contentsOfFile: declaration, encoding: .utf8).replacingOccurrences(of: "/api.zip", with: "/again.zip"))
            _ = try await run(packagerExecutable, ["build", folder.path + "/again.yml"])
            let same = try await run(packagerExecutable, ["diff", folder.path + "/api.zip", folder.path + "/again.zip"])
            #expect(same.status == 0 && same.output.contains("0 changed"), "\(same.output)")

            for run in 1...5 {
                let verified = try await TestSupport.run(
                    packagerExecutable, ["verify", folder.path + "/api.zip", "--declaration", declaration, "--format", "json"])
                let report = try JSONDecoder().decode(VerifyReport.self, from: Data(verified.output.utf8))
                let verdicts = Dictionary(report.entries.map { ($0.url, $0.verdict) }, uniquingKeysWith: { a, _ in a })
                #expect(verified.status == 0, "run \(run): \(verified.output)")
                #expect(verdicts[origin.base + "/api/rows"] == .fresh && verdicts[origin.base + "/api/list"] == .fresh, "run \(run): \(verdicts)")
                // The POST is not sent again by default.
                #expect(verdicts.first { $0.key.contains("m=POST") }?.value == .unverifiable)
            }
            let resent = try await run(
                packagerExecutable, ["verify", folder.path + "/api.zip", "--declaration", declaration, "--resend-unsafe", "--format", "json"])
            let resentReport = try JSONDecoder().decode(VerifyReport.self, from: Data(resent.output.utf8))
            #expect(resentReport.entries.first { $0.url.contains("m=POST") }?.verdict == .fresh, "\(resent.output)")
            #expect(origin.requests.filter { $0.method == "POST" }.count == 3, "two builds and one --resend-unsafe")

            // A real change: stale, with the field named; refresh records it, and walks the list's new page.
            api.name.withLock { $0 = "Tāmaki Makaurau" }
            api.pages.withLock { $0 = 3 }
            let stale = try await run(packagerExecutable, ["verify", folder.path + "/api.zip", "--declaration", declaration])
            #expect(stale.status == 1 && stale.output.contains("/rows/0/name") && stale.output.contains("Tāmaki Makaurau"), "\(stale.output)")
            let refreshed = try await run(
                packagerExecutable, ["refresh", folder.path + "/api.zip", "--declaration", declaration, "-o", folder.path + "/new.zip"])
            #expect(refreshed.status == 0, "\(refreshed.output)")
            let loader = try OfflineLoader(path: folder.path + "/new.zip")
            #expect(loader.response(for: BundleRequest(url: origin.base + "/api/list?page=3")) != nil, "the new last page was walked to")
            let body = try loader.response(for: BundleRequest(url: origin.base + "/api/rows"))?.bodyData()
            #expect(body.map { String(decoding: $0, as: UTF8.self).contains("Tāmaki Makaurau") } == true)
            // The POST's entry was carried over under its key, with its request.
            #expect(loader.response(for: BundleRequest(method: "POST", url: origin.base + "/api/echo", body: Data("{\"a\": 1}".utf8))) != nil)
            let diff = try await run(packagerExecutable, ["diff", folder.path + "/api.zip", folder.path + "/new.zip"])
            #expect(diff.status == 1 && diff.output.contains("/rows/0/name: \"Auckland\" -> \"Tāmaki Makaurau\""), "\(diff.output)")
            #expect(diff.output.contains("+ \(origin.base)/api/list?page=3"), "\(diff.output)")
            #expect(!diff.output.contains("query_ms"), "\(diff.output)")
        }
    }

    @Test("a POST answered 303 is followed by a GET of the target, as clients follow it; a 307 keeps the POST")
    func postRedirects() throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter()
        var post = RecordedExchange(url: "https://api.example/form", status: 303, headers: [("location", "/done")])
        post.request = RecordedRequest(method: "POST", body: Data("a=1".utf8))
        writer.add(post)
        var kept = RecordedExchange(url: "https://api.example/keep", status: 307, headers: [("location", "/again")])
        kept.request = RecordedRequest(method: "POST", body: Data("a=1".utf8))
        writer.add(kept)
        var again = RecordedExchange(url: "https://api.example/again", headers: [("content-type", "text/plain")], body: .data(Data("posted".utf8)))
        again.request = RecordedRequest(method: "POST", body: Data("a=1".utf8))
        writer.add(again)
        writer.add(.init(url: "https://api.example/done", headers: [("content-type", "text/plain")], body: .data(Data("done".utf8))))
        try writer.write(to: folder.path + "/r.zip")
        let loader = try OfflineLoader(path: folder.path + "/r.zip")
        let followed = loader.response(
            for: BundleRequest(method: "POST", url: "https://api.example/form", body: Data("a=1".utf8)), followingRedirects: 10)
        #expect(followed?.url == "https://api.example/done")
        #expect(try followed?.response.bodyData() == Data("done".utf8))
        let kept307 = loader.response(
            for: BundleRequest(method: "POST", url: "https://api.example/keep", body: Data("a=1".utf8)), followingRedirects: 10)
        #expect(kept307?.url == "https://api.example/again")
        #expect(try kept307?.response.bodyData() == Data("posted".utf8))
    }

    @Test("the manifest search verify runs first finds a mark anywhere, and nothing that is not there")
    func byteSearch() {
        let text = Array("{\"key\": \"x\", \"request\": {}}".utf8)
        #expect(Verifier.contains(text, Array("\"request\": ".utf8)))
        #expect(!Verifier.contains(text, Array("\"volatile\": ".utf8)))
        #expect(Verifier.contains(Array("aab".utf8), Array("ab".utf8)) && !Verifier.contains(Array("a".utf8), Array("ab".utf8)))
        #expect(Verifier.contains(Array("xyzab".utf8), Array("ab".utf8)) && !Verifier.contains(Array("xyza".utf8), Array("ab".utf8)))
    }
}

@Suite("declared requests: secrets in bodies and literal credentials (security review 3, S9)")
struct RequestSecretsTests {
    /// What the search answers, changed by the test.
    final class Hits: Sendable {
        let word = Mutex("apple")
    }

    @Test(
        "a body with ${ENV} and a body-file marked secret are kept as their digest alone: not in the manifest, the bundle or the HAR export; verify and refresh send them again from --declaration; a literal credential header is warned about and never stored"
    )
    func secretBodies() async throws {
        let hits = Hits()
        try await withOrigin { origin in
            // Logs in only with the password; answers a search by its key.
            origin.route("/login") { request in
                let body = String(decoding: request.body, as: UTF8.self)
                return body.contains("BODY-PASSWORD-from-env")
                    ? .text("{\"ok\": true}", type: "application/json") : .text("{\"ok\": false}", type: "application/json", status: 401)
            }
            origin.route("/search") { request in
                String(decoding: request.body, as: UTF8.self).contains("FILE-API-KEY-xyz")
                    ? .text("[\"\(hits.word.withLock { $0 })\"]", type: "application/json") : .text("[]", type: "application/json", status: 403)
            }
            let folder = try TemporaryFolder()
            try folder.file("search.json", "{\"q\":\"a\",\"api_key\":\"FILE-API-KEY-xyz\"}")
            try folder.file(
                "api.yml",
                """
                output: \(folder.path)/api.zip
                robots: false
                headers:
                  X-Literal-Key: LITERAL-KEY-abcdef123
                requests:
                  - url: \(origin.base)/login
                    method: POST
                    body: '{"user":"ci","password":"${LOGIN_PASSWORD}","price":"$5"}'
                  - url: \(origin.base)/search
                    method: POST
                    body-file: search.json
                    secret: true
                """)
            let declaration = folder.path + "/api.yml"
            let built = try await run("/usr/bin/env", ["LOGIN_PASSWORD=BODY-PASSWORD-from-env", packagerExecutable, "build", declaration])
            #expect(built.status == 0, "\(built.output)")
            #expect(built.output.contains("warning: \(declaration):4:18: "), "\(built.output)")
            #expect(built.output.contains("header 'X-Literal-Key' is a credential written into the declaration"), "\(built.output)")
            // What the origin got: the password from the environment, `$5` as written, the literal key.
            let login = try #require(origin.requests.first { $0.path == "/login" })
            #expect(String(decoding: login.body, as: UTF8.self) == "{\"user\":\"ci\",\"password\":\"BODY-PASSWORD-from-env\",\"price\":\"$5\"}")
            #expect(login.headers["x-literal-key"] == "LITERAL-KEY-abcdef123")

            let secrets = ["BODY-PASSWORD-from-env", "FILE-API-KEY-xyz", "LITERAL-KEY-abcdef123"]
            let bytes = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/api.zip"))
            for secret in secrets { #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret) is in the bundle") }
            let manifest = try await run("/usr/bin/unzip", ["-p", folder.path + "/api.zip", "manifest.json"])
            for secret in secrets { #expect(!manifest.output.contains(secret), "\(secret) is in manifest.json") }
            #expect(manifest.output.components(separatedBy: "\"bodySecret\": true").count - 1 == 2, "\(manifest.output)")
            #expect(!manifest.output.contains("\"body\": \"") && !manifest.output.contains("bodyBase64"), "\(manifest.output)")
            let exported = try await run(packagerExecutable, ["export", folder.path + "/api.zip", "--format", "har", "-o", folder.path + "/api.har"])
            #expect(exported.status == 0, "\(exported.output)")
            let har = try String(contentsOfFile: folder.path + "/api.har", encoding: .utf8)
            for secret in secrets { #expect(!har.contains(secret), "\(secret) is in the HAR export") }
            #expect(!har.contains("postData") && har.contains("the request body held a secret"), "\(har)")
            // The key still names the body: the bundle answers the request sent with it, and no other.
            let loader = try OfflineLoader(path: folder.path + "/api.zip")
            let sent = Data("{\"q\":\"a\",\"api_key\":\"FILE-API-KEY-xyz\"}".utf8)
            #expect(try loader.response(for: BundleRequest(method: "POST", url: origin.base + "/search", body: sent))?.bodyData() == Data("[\"apple\"]".utf8))
            #expect(loader.response(for: BundleRequest(method: "POST", url: origin.base + "/search", body: Data("{}".utf8))) == nil)

            // Without the declaration, verify cannot send the bodies, and says why.
            let blind = try await run(packagerExecutable, ["verify", folder.path + "/api.zip", "--resend-unsafe", "--format", "json"])
            let blindReport = try JSONDecoder().decode(VerifyReport.self, from: Data(blind.output.utf8))
            #expect(blindReport.entries.count == 2 && blindReport.entries.allSatisfy { $0.verdict == .unverifiable }, "\(blind.output)")
            #expect(blindReport.entries.allSatisfy { $0.error?.contains("request body is a secret the bundle does not keep") == true }, "\(blind.output)")
            // With it, they are sent as declared, and fresh.
            let before = origin.requests.count
            let verified = try await run(
                "/usr/bin/env",
                [
                    "LOGIN_PASSWORD=BODY-PASSWORD-from-env", packagerExecutable, "verify", folder.path + "/api.zip", "--declaration", declaration,
                    "--resend-unsafe", "--format", "json",
                ])
            let report = try JSONDecoder().decode(VerifyReport.self, from: Data(verified.output.utf8))
            #expect(verified.status == 0 && report.entries.allSatisfy { $0.verdict == .fresh }, "\(verified.output)")
            #expect(origin.requests.dropFirst(before).filter { $0.path == "/search" && $0.body == sent }.count == 1)
            for secret in secrets { #expect(!verified.output.contains(secret)) }
            // Refresh sends a changed one again too, records the new answer under the same key, and keeps the body out.
            hits.word.withLock { $0 = "banana" }
            let refreshed = try await run(
                "/usr/bin/env",
                [
                    "LOGIN_PASSWORD=BODY-PASSWORD-from-env", packagerExecutable, "refresh", folder.path + "/api.zip", "--declaration", declaration,
                    "--resend-unsafe", "-o", folder.path + "/new.zip",
                ])
            #expect(refreshed.status == 0, "\(refreshed.output)")
            let renewed = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/new.zip"))
            for secret in secrets { #expect(renewed.range(of: Data(secret.utf8)) == nil, "\(secret) is in the refreshed bundle") }
            let again = try OfflineLoader(path: folder.path + "/new.zip")
            #expect(try again.response(for: BundleRequest(method: "POST", url: origin.base + "/search", body: sent))?.bodyData() == Data("[\"banana\"]".utf8))
            let remanifest = try await run("/usr/bin/unzip", ["-p", folder.path + "/new.zip", "manifest.json"])
            for secret in secrets { #expect(!remanifest.output.contains(secret), "\(secret) is in the refreshed manifest.json") }
            #expect(remanifest.output.components(separatedBy: "\"bodySecret\": true").count - 1 == 2, "\(remanifest.output)")
        }
    }

    @Test("${NAME} in a body: an unset variable is refused, $${ is a literal ${; secret: true needs a body; a vary on a literal credential is refused")
    func parsing() throws {
        let parser = DeclarationParser(environment: ["PW": "hunter2-long-enough"])
        let declared = try parser.parse(
            """
            requests:
              - url: https://api.example/a
                method: POST
                body: 'a=$${PW}&b=${PW}&c=$$'
              - url: https://api.example/b
                method: POST
                body: 'plain $1'
                secret: true
            """)
        #expect(declared.requests[0].body == Data("a=${PW}&b=hunter2-long-enough&c=$$".utf8))
        #expect(declared.requests[0].bodySecret && declared.requests[1].bodySecret)
        #expect(declared.secrets.contains("hunter2-long-enough"))
        #expect(declared.warnings.isEmpty)
        // A password written out makes the body a secret all the same, and is warned about.
        let literal = try parser.parse("requests:\n  - url: https://api.example/a\n    method: POST\n    body: 'user=ci&password=abc'")
        #expect(literal.requests[0].bodySecret)
        #expect(literal.warnings.count == 1)
        let expected = "packager.yml:4:11: the request body has a 'password' field written out: it is kept as its digest only"
        #expect(literal.warnings.first?.hasPrefix(expected) == true)
        let problems = [
            (
                "requests:\n  - url: https://api.example/a\n    method: POST\n    body: '${NOPE}'",
                "environment variable NOPE is not set (it is used in a request body)"
            ),
            ("requests:\n  - url: https://api.example/a\n    secret: true", "secret: true marks the request body as a secret, and this request has none"),
            ("requests:\n  - url: https://api.example/a\n    headers: {X-Api-Key: abc}\n    vary: [X-Api-Key]", "holds a secret: it cannot choose an answer"),
        ]
        for (text, expected) in problems {
            #expect(throws: PackagerError.self) { try parser.parse(text) }
            do { _ = try parser.parse(text) } catch { #expect("\(error)".contains(expected), "\(error)") }
        }
    }
}
