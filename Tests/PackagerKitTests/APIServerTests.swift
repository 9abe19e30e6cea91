import Foundation
import HTTPTypes
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

let datasette = APIServer.find("datasette")
let kinto = APIServer.find("kinto")
let isoCodes = "/usr/share/iso-codes/json/iso_3166-2.json"

/// Datasette (PyPI) serving a SQLite database built from Debian's iso-codes: 5,127 subdivisions, paged by 500 with
/// `Link: rel=next` and `next_url`, and a `query_ms` that changes on every answer.
@Suite(
    "Datasette: a paged table frozen to its last row; verify quiet while query_ms changes, then naming the changed field",
    .enabled(if: datasette != nil, "Datasette is not installed: \(APIServer.installHint)"),
    .enabled(if: FileManager.default.fileExists(atPath: isoCodes), "iso-codes is not installed (apt-get install iso-codes)"))
struct DatasetteTests {
    static func database(at path: String) async throws {
        let script = """
            import json, sqlite3, sys
            rows = json.load(open('\(isoCodes)'))['3166-2']
            db = sqlite3.connect(sys.argv[1])
            db.execute('create table subdivisions (code text primary key, name text, type text, parent text)')
            db.executemany('insert into subdivisions values (?, ?, ?, ?)', [(r['code'], r['name'], r['type'], r.get('parent')) for r in rows])
            db.commit()
            """
        let made = try await run("python3", ["-c", script, path])
        #expect(made.status == 0, "\(made.output)")
    }

    static func rename(_ code: String, to name: String, in path: String) async throws {
        let script =
            "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute('update subdivisions set name = ? where code = ?', (sys.argv[2], sys.argv[3])); db.commit()"
        _ = try await run("python3", ["-c", script, path, name, code])
    }

    @Test(
        "11 pages of 500 rows kept and walked offline to row 5,127; 5 verify runs with 0 false alarms; a renamed row found stale by its field, refreshed, and named by diff"
    )
    func pagedTable() async throws {
        let folder = try TemporaryFolder()
        let db = folder.path + "/iso.db"
        try await Self.database(at: db)
        let server = try await APIServer.start(
            try #require(datasette), ["serve", db, "--host", "127.0.0.1", "-p", "{port}"], probe: "/-/versions.json")
        defer { server.stop() }
        let first = server.base + "/iso/subdivisions.json?_shape=objects&_size=500"
        try folder.file(
            "api.yml",
            """
            output: \(folder.path)/iso.zip
            robots: false
            requests:
              - url: \(first)
                volatile: [/query_ms]
            """)
        let built = try await run(packagerExecutable, ["build", folder.path + "/api.yml"])
        #expect(built.status == 0, "\(built.output)")

        // A client pages through the bundle by next_url, as it would through Datasette.
        let loader = try OfflineLoader(path: folder.path + "/iso.zip")
        var url: String? = first
        var rows: [[String: Any]] = []
        var pages = 0
        while let next = url, pages < 20 {
            let response = try #require(loader.response(for: BundleRequest(url: next)), "page \(pages + 1): \(next)")
            let page = try #require(try JSONSerialization.jsonObject(with: try response.bodyData()) as? [String: Any])
            rows += page["rows"] as? [[String: Any]] ?? []
            url = page["next_url"] as? String
            pages += 1
        }
        #expect(pages == 11 && rows.count == 5_127, "\(pages) pages, \(rows.count) rows")
        #expect(rows.last?["code"] as? String == "ZW-MW")

        let declaration = folder.path + "/api.yml"
        for run in 1...5 {
            let verified = try await TestSupport.run(packagerExecutable, ["verify", folder.path + "/iso.zip", "--declaration", declaration])
            #expect(verified.status == 0 && verified.output.contains("11 entries: 11 fresh"), "run \(run): \(verified.output)")
        }
        try await Self.rename("NZ-AUK", to: "Tāmaki Makaurau", in: db)
        let stale = try await run(packagerExecutable, ["verify", folder.path + "/iso.zip", "--declaration", declaration])
        #expect(
            stale.status == 1 && stale.output.contains("10 fresh, 1 stale") && stale.output.contains("/name") && stale.output.contains("Tāmaki Makaurau"),
            "\(stale.output)")
        let refreshed = try await run(packagerExecutable, ["refresh", folder.path + "/iso.zip", "--declaration", declaration, "-o", folder.path + "/new.zip"])
        #expect(refreshed.status == 0, "\(refreshed.output)")
        let diff = try await run(packagerExecutable, ["diff", folder.path + "/iso.zip", folder.path + "/new.zip"])
        #expect(
            diff.status == 1 && diff.output.contains("/name: \"Auckland\" -> \"Tāmaki Makaurau\"") && diff.output.contains("1 changed, 10 unchanged"),
            "\(diff.output)")
        #expect(!diff.output.contains("query_ms"))
    }

    /// Whether datasette-graphql (PyPI) is installed beside Datasette.
    static let graphQL: Bool = {
        guard let datasette else { return false }
        let lib = URL(fileURLWithPath: datasette).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("lib").path
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: lib)) ?? []
        return versions.contains { FileManager.default.fileExists(atPath: lib + "/" + $0 + "/site-packages/datasette_graphql") }
    }()

    @Test(
        "datasette-graphql: a query sent formatted otherwise, with its variables in another order and another request id, gets the recorded answer; another variable misses, named by its pointer",
        .enabled(if: graphQL, "datasette-graphql is not installed: .venv-api/bin/pip install datasette-graphql (make deps does)"))
    func graphQLMatchedCanonically() async throws {
        let folder = try TemporaryFolder()
        let db = folder.path + "/iso.db"
        try await Self.database(at: db)
        let server = try await APIServer.start(try #require(datasette), ["serve", db, "--host", "127.0.0.1", "-p", "{port}"], probe: "/-/versions.json")
        defer { server.stop() }
        // The variable is not named `code`: a body with a `code` field (an OAuth code) is kept as a secret, its digest alone.
        let query = "query S($wanted: String) { subdivisions(filter: {code: {eq: $wanted}}) { nodes { code name type } } }"
        try folder.file(
            "api.yml",
            """
            output: \(folder.path)/graphql.zip
            robots: false
            requests:
              - url: \(server.base)/graphql
                method: POST
                headers: {Content-Type: application/json}
                body: '{"query": "\(query)", "variables": {"wanted": "FR-75", "requestId": "build-1"}, "operationName": "S"}'
                match: {graphql: canonical, ignore: [/variables/requestId]}
            """)
        let built = try await run(packagerExecutable, ["build", folder.path + "/api.yml"])
        #expect(built.status == 0, "\(built.output)")
        server.stop()

        let loader = try OfflineLoader(path: folder.path + "/graphql.zip", policy: .bundleOnly)
        func post(_ body: String) -> BundleRequest {
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return BundleRequest(method: "POST", url: server.base + "/graphql", headers: headers, body: Data(body.utf8))
        }
        // What a client's GraphQL library sends: the document pretty-printed, its members and variables in its order.
        let pretty =
            "query S(\\n  $wanted: String\\n) {\\n  subdivisions(filter: {code: {eq: $wanted}}) {\\n    nodes {\\n      code,\\n      name\\n      type\\n    }\\n  }\\n}\\n"
        let sent = #"{"operationName": "S", "variables": {"requestId": "client-77", "wanted": "FR-75"}, "query": "\#(pretty)"}"#
        let answer = try #require(
            loader.response(for: post(sent)), "the reformatted query missed: \(loader.explainMiss(post(sent)).map(String.init(describing:)) ?? "-")")
        #expect(String(decoding: try answer.bodyData(), as: UTF8.self).contains("Paris"))
        // Another variable is another request: a miss, named by its JSON pointer.
        let other = #"{"operationName": "S", "variables": {"wanted": "FR-13"}, "query": "\#(pretty)"}"#
        #expect(loader.response(for: post(other)) == nil)
        let why = try #require(loader.explainMiss(post(other)))
        #expect(why.kind == .body && why.differences == [#"body /variables/wanted: "FR-13", recorded "FR-75""#], "\(why)")
        // packager serve matches the same way, with the origin stopped.
        let (serve, base) = try await startServe(folder.path + "/graphql.zip", ["--explain-misses"])
        let served = try? await run("curl", ["-s", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", sent, base + "/graphql"])
        let missed = try? await run(
            "curl", ["-s", "-D", "-", "-o", "/dev/null", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", other, base + "/graphql"])
        serve.terminate()
        try await offPool { serve.waitUntilExit() }
        #expect(served?.output.contains("Paris") == true, "\(served?.output ?? "-")")
        #expect(
            missed?.output.contains("x-offline-miss: nearest POST") == true && missed?.output.contains("/variables/wanted") == true, "\(missed?.output ?? "-")")
    }
}

/// Kinto (PyPI), in memory, with Basic auth: records created by POST, a list paged by the `Next-Page` header (whose
/// token changes on every answer), ETags, and a 401 for a request without a credential.
@Suite(
    "Kinto: a declared POST, a list paged by Next-Page, a 401 fixture, replayed by credential",
    .enabled(if: kinto != nil, "Kinto is not installed: \(APIServer.installHint)"))
struct KintoTests {
    /// Kinto in memory with Basic auth, its files in `folder`.
    static func start(in folder: TemporaryFolder) async throws -> APIServer {
        try await APIServer.startKinto(try #require(kinto), in: folder)
    }

    @Test("a batch POST declared with match json-body: a client that sends the document with its members in another order gets the answer")
    func batchMatchedCanonically() async throws {
        let folder = try TemporaryFolder()
        let server = try await Self.start(in: folder)
        defer { server.stop() }
        let records = server.base + "/v1/buckets/default/collections/tasks/records"
        for n in 1...3 {
            _ = try await run(
                "curl", ["-s", "-u", "alice:wonderland", "-H", "Content-Type: application/json", "-d", "{\"data\": {\"title\": \"task \(n)\"}}", records])
        }
        let auth = "Basic " + Data("alice:wonderland".utf8).base64EncodedString()
        let batch = #"{"defaults": {"method": "GET"}, "requests": [{"path": "/buckets/default/collections/tasks/records?_sort=title"}]}"#
        try folder.file(
            "api.yml",
            """
            output: \(folder.path)/batch.zip
            robots: false
            requests:
              - url: \(server.base)/v1/batch
                method: POST
                headers: {Authorization: "${KINTO_AUTH}", Content-Type: application/json}
                body: '\(batch)'
                match: {json-body: canonical}
            """)
        let built = try await run("/usr/bin/env", ["KINTO_AUTH=" + auth, packagerExecutable, "build", folder.path + "/api.yml"])
        #expect(built.status == 0, "\(built.output)")
        let loader = try OfflineLoader(path: folder.path + "/batch.zip")
        func post(_ body: String) -> BundleResponse? {
            loader.response(
                for: BundleRequest(
                    method: "POST", url: server.base + "/v1/batch", headers: [.authorization: "Basic eDp5", .contentType: "application/json"],
                    body: Data(body.utf8)))
        }
        // As a client's JSON encoder writes it: other member order, no spaces.
        let reordered = #"{"requests":[{"path":"/buckets/default/collections/tasks/records?_sort=title"}],"defaults":{"method":"GET"}}"#
        let answer = try #require(post(reordered))
        let body = try #require(try JSONSerialization.jsonObject(with: try answer.bodyData()) as? [String: Any])
        let responses = try #require(body["responses"] as? [[String: Any]])
        let titles = ((responses.first?["body"] as? [String: Any])?["data"] as? [[String: Any]])?.compactMap { $0["title"] as? String }
        #expect(titles == ["task 1", "task 2", "task 3"], "\(body)")
        // Another path is another request.
        #expect(post(#"{"requests":[{"path":"/buckets/default/collections/tasks/records"}],"defaults":{"method":"GET"}}"#) == nil)
    }

    @Test(
        "five records paged by two, a POST and a 401 kept; a Basic credential gets the list, no credential the 401; verify finds them fresh and leaves the POST alone"
    )
    func recordsAndCredentials() async throws {
        let folder = try TemporaryFolder()
        let server = try await Self.start(in: folder)
        defer { server.stop() }
        let records = server.base + "/v1/buckets/default/collections/tasks/records"
        for n in 1...5 {
            _ = try await run(
                "curl", ["-s", "-u", "alice:wonderland", "-H", "Content-Type: application/json", "-d", "{\"data\": {\"title\": \"task \(n)\"}}", records])
        }
        let auth = "Basic " + Data("alice:wonderland".utf8).base64EncodedString()
        try folder.file(
            "api.yml",
            """
            output: \(folder.path)/kinto.zip
            robots: false
            requests:
              - url: \(records)?_limit=2&_sort=title
                headers: {Authorization: "${KINTO_AUTH}"}
                paginate: {header: Next-Page}
              - url: \(server.base)/v1/buckets/default/collections/notes/records
                method: POST
                headers: {Authorization: "${KINTO_AUTH}", Content-Type: application/json}
                body: '{"data": {"title": "frozen"}}'
                status: 201
              - url: \(records)?_limit=2&_sort=title
                status: 401
            """)
        let built = try await run("/usr/bin/env", ["KINTO_AUTH=" + auth, packagerExecutable, "build", folder.path + "/api.yml"])
        #expect(built.status == 0, "\(built.output)")
        let bundle = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/kinto.zip"))
        #expect(bundle.range(of: Data("wonderland".utf8)) == nil && bundle.range(of: Data(auth.utf8)) == nil)

        // Any Basic credential gets the list, paged by Next-Page to its end; none gets the 401.
        let loader = try OfflineLoader(path: folder.path + "/kinto.zip")
        var url: String? = records + "?_limit=2&_sort=title"
        var titles: [String] = []
        while let next = url, titles.count < 10 {
            let response = try #require(loader.response(for: BundleRequest(url: next, headers: [.authorization: "Basic b3RoZXI6dXNlcg=="])), "\(next)")
            let page = try #require(try JSONSerialization.jsonObject(with: try response.bodyData()) as? [String: Any])
            titles += (page["data"] as? [[String: Any]] ?? []).compactMap { $0["title"] as? String }
            url = response.header("next-page")
        }
        #expect(titles == (1...5).map { "task \($0)" })
        #expect(loader.response(for: BundleRequest(url: records + "?_limit=2&_sort=title"))?.status == 401)
        let created = loader.response(
            for: BundleRequest(
                method: "POST", url: server.base + "/v1/buckets/default/collections/notes/records", headers: [.authorization: "Basic eDp5"],
                body: Data("{\"data\": {\"title\": \"frozen\"}}".utf8)))
        #expect(created?.status == 201)

        let verified = try await run(
            "/usr/bin/env", ["KINTO_AUTH=" + auth, packagerExecutable, "verify", folder.path + "/kinto.zip", "--declaration", folder.path + "/api.yml"])
        #expect(verified.status == 0 && verified.output.contains("5 entries: 4 fresh, 1 unverifiable"), "\(verified.output)")
        // Without the declaration, the credential is not there to send: those entries are not asked (an anonymous
        // answer would call them stale, and refresh would store the 401 under the credential's key).
        let anonymous = try await run(packagerExecutable, ["verify", folder.path + "/kinto.zip", "--allow-private-addresses"])
        #expect(anonymous.output.contains("not sent: the value of authorization is a secret the bundle does not keep"), "\(anonymous.output)")
        #expect(!anonymous.output.contains("stale"), "\(anonymous.output)")
    }
}
