import Foundation
import HTTPTypes
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

let mitmdump = APIServer.find("mitmdump")

@Suite("HAR 1.2: pack --from-har and export --format har")
struct HARTests {
    static func har(_ entries: [String]) -> String {
        "{\"log\": {\"version\": \"1.2\", \"creator\": {\"name\": \"test\", \"version\": \"1\"}, \"entries\": [\(entries.joined(separator: ","))]}}"
    }

    static func entry(
        _ method: String, _ url: String, status: Int, type: String = "application/json", text: String? = "{}", encoding: String? = nil,
        requestHeaders: String = "[]", responseHeaders: String = "[]", postData: String? = nil, size: Int? = nil, extra: String = ""
    ) -> String {
        let content =
            "{\"size\": \(size ?? text?.utf8.count ?? 0), \"mimeType\": \"\(type)\""
            + (text.map { ", \"text\": \(String(decoding: try! JSONEncoder().encode($0), as: UTF8.self))" } ?? "")
            + (encoding.map { ", \"encoding\": \"\($0)\"" } ?? "") + "}"
        return """
            {"startedDateTime": "2026-01-02T03:04:05.123Z", "time": 1\(extra),
             "request": {"method": "\(method)", "url": "\(url)", "httpVersion": "HTTP/1.1", "headers": \(requestHeaders), "queryString": [], "cookies": [],
                         "headersSize": -1, "bodySize": 0\(postData.map { ", \"postData\": \($0)" } ?? "")},
             "response": {"status": \(status), "statusText": "", "httpVersion": "HTTP/1.1", "headers": \(responseHeaders), "cookies": [],
                          "content": \(content), "redirectURL": "", "headersSize": -1, "bodySize": -1},
             "cache": {}, "timings": {"send": 0, "wait": 0, "receive": 0}}
            """
    }

    @Test("a recording with what a bundle cannot hold: each left out, named by entry number; credentials never stored; the rest answered by request")
    func importSkipsAndStrips() async throws {
        let folder = try TemporaryFolder()
        let png = Data([0x89, 0x50, 0x4E, 0x47, 0, 1, 2, 255])
        try folder.file(
            "s.har",
            Self.har([
                Self.entry(
                    "GET", "https://api.example/items", status: 200, text: "[1]",
                    requestHeaders: #"[{"name": "Accept", "value": "application/json"}, {"name": "Cookie", "value": "session=s3cret-cookie-value"}]"#,
                    responseHeaders:
                        #"[{"name": "Content-Type", "value": "application/json"}, {"name": "Vary", "value": "Accept"}, {"name": "Set-Cookie", "value": "a=b"}, {"name": "Content-Encoding", "value": "br"}]"#
                ),
                Self.entry(
                    "POST", "https://api.example/search", status: 200, text: "[\"apple\"]",
                    requestHeaders: #"[{"name": "Authorization", "value": "Bearer s3cret-token-value"}]"#,
                    postData: #"{"mimeType": "application/json", "text": "{\"q\": \"a\"}"}"#),
                Self.entry("GET", "https://api.example/logo.png", status: 200, type: "image/png", text: png.base64EncodedString(), encoding: "base64"),
                Self.entry("GET", "wss://api.example/live", status: 101, text: nil),
                Self.entry("GET", "data:image/png;base64,AAAA", status: 200),
                Self.entry("GET", "https://ads.example/pixel", status: 0, text: nil),
                Self.entry("GET", "https://api.example/cached", status: 304, text: nil),
                Self.entry("GET", "https://api.example/big", status: 200, text: nil, size: 5000),
                Self.entry(
                    "GET", "https://api.example/items", status: 200, text: "[1, 2]", requestHeaders: #"[{"name": "Accept", "value": "application/json"}]"#,
                    responseHeaders: #"[{"name": "Content-Type", "value": "application/json"}, {"name": "Vary", "value": "Accept"}]"#),
                Self.entry("GET", "https://api.example/qp", status: 200, text: "iVBORw0KGgo=", encoding: "quoted-printable"),
                #"{"request": {"method": "GET", "url": "https://api.example/nocontent", "headers": []}, "response": {"status": 200, "headers": []}}"#,
                Self.entry("GET", "https://api.example/moved", status: 301, text: ""),
                #"{"request": {"method": "GET", "url": "https://api.example/old"}, "response": {"status": 302, "headers": [], "content": {"size": 0, "text": ""}, "redirectURL": "https://api.example/new"}}"#,
            ]))
        let packed = try await run(packagerExecutable, ["pack", "--from-har", folder.path + "/s.har", "-o", folder.path + "/b.zip"])
        #expect(packed.status == 0, "\(packed.output)")
        for line in [
            "skipped entry 1 (https://api.example/items): the same request as entry 9, whose answer is kept",
            "skipped entry 4 (wss://api.example/live): not an http or https URL",
            "skipped entry 5 (data:image/png;base64,AAAA): not an http or https URL",
            "skipped entry 6 (https://ads.example/pixel): no answer was recorded (status 0",
            "skipped entry 7 (https://api.example/cached): a 304 holds no content",
            "skipped entry 8 (https://api.example/big): the HAR holds no body for it (content.size 5000)",
            "skipped entry 10 (https://api.example/qp): response.content.encoding 'quoted-printable' is not one a body is read in (base64, or none)",
            "skipped entry 11 (https://api.example/nocontent): the HAR holds no response.content for it",
            "skipped entry 12 (https://api.example/moved): a redirect (301) without a Location header: it leads nowhere",
        ] {
            #expect(packed.output.contains(line), "\(line)\n\(packed.output)")
        }
        let bundle = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/b.zip"))
        #expect(bundle.range(of: Data("s3cret".utf8)) == nil, "a credential reached the bundle")
        let loader = try OfflineLoader(path: folder.path + "/b.zip")
        let items = loader.response(for: BundleRequest(url: "https://api.example/items", headers: [.accept: "application/json"]))
        #expect(try items.map { String(decoding: try $0.bodyData(), as: UTF8.self) } == "[1, 2]")
        // The body is decoded in a HAR: no Content-Encoding describes it; Set-Cookie is never kept.
        #expect(items?.headers[.contentEncoding] == nil && items?.headers[.setCookie] == nil)
        let search = loader.response(
            for: BundleRequest(method: "POST", url: "https://api.example/search", headers: [.authorization: "Bearer x"], body: Data("{\"q\": \"a\"}".utf8)))
        #expect(try search.map { String(decoding: try $0.bodyData(), as: UTF8.self) } == "[\"apple\"]")
        #expect(try loader.response(for: BundleRequest(url: "https://api.example/logo.png"))?.bodyData() == png)
        // A redirect recorded by its redirectURL alone (HAR 1.2's field) answers with that Location.
        let old = loader.response(for: BundleRequest(url: "https://api.example/old"))
        #expect(old?.status == 302 && old?.headers[.location] == "https://api.example/new", "\(String(describing: old?.headers))")
    }

    @Test(
        "damaged recordings are refused with the entry and what is wrong, and nothing is written",
        arguments: [
            ("not json", "not a HAR file: it is not JSON"),
            ("{\"log\": {}}", "not a HAR file: it has no log.entries"),
            (HARTests.har(["{\"request\": {}, \"response\": {}}"]), "entry 1 of log.entries: request.url is missing"),
            (HARTests.har(["{\"request\": {\"url\": \"https://a.example/\"}, \"response\": {}}"]), "entry 1 of log.entries: request.method is missing"),
            (HARTests.har(["{\"request\": {\"method\": \"GET\", \"url\": \"https://a.example/\"}}"]), "entry 1 of log.entries: response is missing"),
            (
                HARTests.har([
                    HARTests.entry("GET", "https://a.example/", status: 200),
                    "{\"request\": {\"method\": \"GET\", \"url\": \"https://a.example/x\"}, \"response\": {\"status\": \"200\"}}",
                ]),
                "not a HAR file: entry 2 of log.entries: response.status should be a number, as HAR 1.2 has it"
            ),
            (
                "{\"log\": {\"entries\": [{\"request\": {\"method\": \"GET\", \"url\": \"https://a.example/\", \"headers\": {}}}]}}",
                "not a HAR file: entry 1 of log.entries: request.headers should be a list, as HAR 1.2 has it"
            ),
            (
                HARTests.har([
                    HARTests.entry("GET", "https://a.example/", status: 200),
                    HARTests.entry("GET", "https://a.example/x", status: 200, text: "%%%", encoding: "base64"),
                ]),
                "entry 2 of log.entries: response.content.text is not valid base64"
            ),
        ])
    func damaged(text: String, expected: String) async throws {
        let folder = try TemporaryFolder()
        try folder.file("d.har", text)
        let result = try await run(packagerExecutable, ["pack", "--from-har", folder.path + "/d.har", "-o", folder.path + "/b.zip"])
        #expect(result.status != 0 && result.output.contains(expected), "\(result.output)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/b.zip"))
    }

    @Test("export --format har: every entry with its request and answer, binary bodies in base64; pack --from-har of it answers alike")
    func exportRoundTrip() async throws {
        let folder = try TemporaryFolder()
        try VectorTests.writeRequests(to: folder.path + "/api.zip")
        let exported = try await run(packagerExecutable, ["export", folder.path + "/api.zip", "--format", "har", "-o", folder.path + "/api.har"])
        #expect(exported.status == 0 && exported.output.contains("exported 12 entries"), "\(exported.output)")
        let har = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: folder.path + "/api.har"))) as? [String: Any])
        let entries = try #require((har["log"] as? [String: Any])?["entries"] as? [[String: Any]])
        #expect(entries.count == 12)
        let posted = entries.compactMap { entry -> String? in
            guard let request = entry["request"] as? [String: Any], request["method"] as? String == "POST" else { return nil }
            return (request["postData"] as? [String: Any])?["text"] as? String
        }
        #expect(posted.sorted() == ["{\"q\": \"a\"}", "{\"q\": \"b\"}"])
        // Read back: the same answers to the same requests.
        let repacked = try await run(packagerExecutable, ["pack", "--from-har", folder.path + "/api.har", "-o", folder.path + "/again.zip"])
        #expect(repacked.status == 0, "\(repacked.output)")
        let before = try OfflineLoader(path: folder.path + "/api.zip")
        let after = try OfflineLoader(path: folder.path + "/again.zip")
        for request in VectorTests.apiRequests {
            var fields = HTTPFields()
            for pair in request.headers { fields[HTTPField.Name(pair[0])!] = pair[1] }
            let asked = BundleRequest(method: request.method, url: request.url, headers: fields, body: request.body.map { Data($0.utf8) })
            let a = try before.response(for: asked).map { [String(describing: $0.status), String(decoding: try $0.bodyData(), as: UTF8.self)] }
            let b = try after.response(for: asked).map { [String(describing: $0.status), String(decoding: try $0.bodyData(), as: UTF8.self)] }
            // The bearer's answer: the HAR has no credential to send (secrets are not exported), so the re-packed entry answers anonymously.
            if request.url.hasSuffix("/private") { continue }
            #expect(a == b, "\(request.method) \(request.url) \(request.headers)")
        }
    }

    @Test(
        "mitmproxy: a HAR it recorded as a reverse proxy packs into a bundle that answers by method, body and Accept; a HAR packager exported, it reads back",
        .enabled(if: mitmdump != nil, "mitmproxy is not installed: make deps installs it into .venv-mitm"))
    func mitmproxyRoundTrip() async throws {
        try await withOrigin { origin in
            serveAPI(origin)
            let folder = try TemporaryFolder()
            let proxy = try await APIServer.start(
                try #require(mitmdump), ["-q", "--mode", "reverse:\(origin.base)", "-p", "{port}", "--set", "hardump=\(folder.path)/recorded.har"],
                probe: "/api/missing")
            for (accept, _) in [("application/json", 0), ("text/csv", 1)] {
                _ = try await run("curl", ["-s", "-H", "Accept: \(accept)", proxy.base + "/api/items"])
            }
            _ = try await run("curl", ["-s", "-H", "Content-Type: application/json", "-d", "{\"q\": \"a\"}", proxy.base + "/api/search"])
            proxy.interrupt()
            let packed = try await run(packagerExecutable, ["pack", "--from-har", folder.path + "/recorded.har", "-o", folder.path + "/m.zip"])
            #expect(packed.status == 0, "\(packed.output)")
            let loader = try OfflineLoader(path: folder.path + "/m.zip")
            // mitmproxy records a reverse-proxied request with the origin's address.
            let base = origin.base
            let csv = loader.response(for: BundleRequest(url: base + "/api/items", headers: [.accept: "text/csv"]))
            #expect(try csv.map { String(decoding: try $0.bodyData(), as: UTF8.self) } == "id,name\n1,apple\n")
            let search = loader.response(for: BundleRequest(method: "POST", url: base + "/api/search", body: Data("{\"q\": \"a\"}".utf8)))
            #expect(try search.map { String(decoding: try $0.bodyData(), as: UTF8.self).contains("apple") } == true)
            #expect(loader.response(for: BundleRequest(url: base + "/api/missing"))?.status == 404)

            // And back: mitmproxy reads the HAR packager writes, every flow with its method, status and size.
            _ = try await run(packagerExecutable, ["export", folder.path + "/m.zip", "--format", "har", "-o", folder.path + "/out.har"])
            let read = try await run(try #require(mitmdump), ["-n", "-r", folder.path + "/out.har", "--flow-detail", "1"])
            #expect(read.status == 0, "\(read.output)")
            #expect(read.output.contains("POST \(base)/api/search") && read.output.contains("<< 404"), "\(read.output)")
            #expect(read.output.components(separatedBy: "<< ").count - 1 == 4, "\(read.output)")
        }
    }
}

@Suite("HAR import: what the review found")
struct HARReviewTests {
    @Test(
        "no secret reaches a key: a bare token, a tab after the scheme, a secret header the answer varies on; odd methods and Vary names are named, not fatal")
    func secretsAndShapes() async throws {
        #expect(RequestQualifiers.keyValue(name: "authorization", value: "sk_live_SUPERSECRET") == "")
        #expect(RequestQualifiers.keyValue(name: "authorization", value: "Basic\tdXNlcjpwYXNz") == "")
        #expect(RequestQualifiers.keyValue(name: "authorization", value: "Bearer abc") == "bearer")
        let folder = try TemporaryFolder()
        let big = String(repeating: "x", count: (1 << 20) + 1)
        try folder.file(
            "r.har",
            HARTests.har([
                HARTests.entry(
                    "GET", "https://api.example/keyed", status: 200, requestHeaders: #"[{"name": "X-Api-Key", "value": "KEY-SECRET-42"}]"#,
                    responseHeaders: #"[{"name": "Vary", "value": "X-Api-Key"}]"#),
                HARTests.entry(
                    "GET", "https://api.example/bare", status: 200, requestHeaders: #"[{"name": "Authorization", "value": "sk_live_SUPERSECRET"}]"#),
                HARTests.entry("M-SEARCH", "https://api.example/upnp", status: 200),
                HARTests.entry("GET", "https://api.example/odd", status: 200, responseHeaders: #"[{"name": "Vary", "value": "Accept, X(Foo)"}]"#),
                HARTests.entry(
                    "GET", "https://api.example/modes", status: 200, text: "[\"a, b\"]",
                    requestHeaders: #"[{"name": "X-Requested-With", "value": "a"}, {"name": "X-Requested-With", "value": "b"}]"#,
                    responseHeaders: #"[{"name": "Vary", "value": "X-Requested-With"}]"#),
                HARTests.entry("POST", "https://api.example/upload", status: 200, postData: "{\"mimeType\": \"text/plain\", \"text\": \"\(big)\"}"),
                HARTests.entry("GET", "https://api.example/list?id=1&utm_source=a", status: 200, text: "[1]"),
                HARTests.entry("GET", "https://api.example/list?id=1&utm_source=b", status: 200, text: "[2]"),
            ]))
        let packed = try await run(packagerExecutable, ["pack", "--from-har", folder.path + "/r.har", "--drop-query", "utm_*", "-o", folder.path + "/r.zip"])
        #expect(packed.status == 0, "\(packed.output)")
        #expect(packed.output.contains("skipped entry 1 (https://api.example/keyed): its answer varies on header 'x-api-key', which holds a secret"))
        #expect(packed.output.contains("skipped entry 3 (https://api.example/upnp): the method 'M-SEARCH' is not one a bundle's key can name"))
        #expect(packed.output.contains("skipped entry 6 (https://api.example/upload): the request body is 1048577 bytes"))
        #expect(packed.output.contains("skipped entry 7 (https://api.example/list?id=1&utm_source=a): the same request as entry 8"))
        let bytes = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/r.zip"))
        #expect(
            bytes.range(of: Data("KEY-SECRET-42".utf8)) == nil && bytes.range(of: Data("SUPERSECRET".utf8)) == nil
                && bytes.range(of: Data("supersecret".utf8)) == nil)
        let loader = try OfflineLoader(path: folder.path + "/r.zip")
        // A credential without a scheme is keyed by its presence: any credential gets the answer, none does not.
        #expect(loader.response(for: BundleRequest(url: "https://api.example/bare", headers: [.authorization: "other"])) != nil)
        #expect(loader.response(for: BundleRequest(url: "https://api.example/bare")) == nil)
        // A Vary name that is not a token is left out of the key; Accept still chooses.
        #expect(loader.response(for: BundleRequest(url: "https://api.example/odd")) != nil)
        // Two fields of one name are one value, as readers join them.
        var both = HTTPFields()
        both.append(HTTPField(name: HTTPField.Name("X-Requested-With")!, value: "a"))
        both.append(HTTPField(name: HTTPField.Name("X-Requested-With")!, value: "b"))
        #expect(loader.response(for: BundleRequest(url: "https://api.example/modes", headers: both)) != nil)
        #expect(loader.response(for: BundleRequest(url: "https://api.example/modes", headers: [HTTPField.Name("X-Requested-With")!: "b"])) == nil)
        #expect(try loader.response(for: BundleRequest(url: "https://api.example/list?id=1"))?.bodyData() == Data("[2]".utf8))

        // Exported, a bearer's answer keeps a placeholder credential, so packing the HAR again keeps it apart.
        _ = try await run(packagerExecutable, ["export", folder.path + "/r.zip", "--format", "har", "-o", folder.path + "/r2.har"])
        let exported = try String(contentsOfFile: folder.path + "/r2.har", encoding: .utf8)
        #expect(exported.contains("\"value\":\"[redacted]\"") && !exported.contains("SUPERSECRET"))
    }

    @Test("a request body that is not UTF-8 survives export and import: its digest, and so its key, unchanged")
    func binaryRequestBody() async throws {
        let folder = try TemporaryFolder()
        let body = Data([0xFF, 0x00, 0x80, 0x41])
        var writer = BundleWriter()
        var entry = RecordedExchange(url: "https://api.example/upload", headers: [("content-type", "text/plain")], body: .data(Data("ok".utf8)))
        entry.request = RecordedRequest(method: "POST", headers: [.init(name: "content-type", value: "application/octet-stream")], body: body)
        writer.add(entry)
        try writer.write(to: folder.path + "/b.zip")
        _ = try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", "har", "-o", folder.path + "/b.har"])
        let packed = try await run(packagerExecutable, ["pack", "--from-har", folder.path + "/b.har", "-o", folder.path + "/again.zip"])
        #expect(packed.status == 0, "\(packed.output)")
        let loader = try OfflineLoader(path: folder.path + "/again.zip")
        #expect(try loader.response(for: BundleRequest(method: "POST", url: "https://api.example/upload", body: body))?.bodyData() == Data("ok".utf8))
    }

    @Test("pack --from-har --match: a recording's GraphQL and JSON bodies matched canonically, its cache-busting parameter left out; a wrong rule refused")
    func harWithMatchRules() async throws {
        let folder = try TemporaryFolder()
        let json = #"{"mimeType": "application/json", "text": "{\"q\": \"a\", \"requestId\": \"r-1\"}"}"#
        let graphql = #"{"mimeType": "application/json", "text": "{\"query\": \"{ items { id } }\"}"}"#
        // The same search recorded twice with other request ids: one key under the rule, the later answer kept.
        let json2 = #"{"mimeType": "application/json", "text": "{\"requestId\": \"r-2\", \"q\": \"a\"}"}"#
        try folder.file(
            "session.har",
            HARTests.har([
                HARTests.entry("POST", "https://api.example/search", status: 200, text: #"{"first": true}"#, postData: json),
                HARTests.entry("POST", "https://api.example/search", status: 200, text: #"{"hits": 1}"#, postData: json2),
                HARTests.entry("POST", "https://api.example/graphql", status: 200, text: #"{"data": {"items": []}}"#, postData: graphql),
                HARTests.entry("GET", "https://api.example/app.js?v=2&_=1733000001", status: 200, type: "text/javascript", text: "run()"),
            ]))
        let packed = try await run(
            packagerExecutable,
            [
                "pack", "--from-har", folder.path + "/session.har", "-o", folder.path + "/api.zip", "--match",
                "https://api.example/search json-body /requestId",
                "--match", "https://api.example/graphql graphql", "--match", "https://api.example/* ignore-params _",
            ])
        #expect(packed.status == 0, "\(packed.output)")
        #expect(packed.output.contains("skipped entry 1") && packed.output.contains("the same request as entry 2"), "\(packed.output)")
        let loader = try OfflineLoader(path: folder.path + "/api.zip", policy: .bundleOnly)
        func post(_ url: String, _ body: String) -> BundleResponse? {
            loader.response(for: BundleRequest(method: "POST", url: url, body: Data(body.utf8)))
        }
        #expect(try post("https://api.example/search", #"{ "requestId": "r-9", "q": "a" }"#)?.bodyData() == Data(#"{"hits": 1}"#.utf8))
        #expect(post("https://api.example/graphql", "{\"query\": \"{\\n  items {\\n    id\\n  }\\n}\"}") != nil)
        #expect(loader.response(for: BundleRequest(url: "https://api.example/app.js?_=99&v=2")) != nil)
        let wrong = try await run(
            packagerExecutable, ["pack", "--from-har", folder.path + "/session.har", "-o", folder.path + "/x.zip", "--match", "https://api.example/* xml-body"])
        #expect(wrong.status != 0 && wrong.output.contains("is not a match rule"), "\(wrong.output)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/x.zip"))
    }
}

@Suite("HAR import: secrets outside the headers named for them, and header blocks past the bound (security review 3, S10 and S7)")
struct HARSecretTests {
    static let secrets = [
        "QUERY-TOKEN-SECRET-1", "QUERY-SIG-SECRET-2", "XAUTH-SECRET-5", "APIM-SECRET-6", "ACCESSKEY-SECRET-7", "AUTHN-SECRET-8", "LINK-SECRET-13",
        "LOC-SECRET-14", "POSTDATA-SECRET-16", "PARAMS-SECRET-17", "JSONBODY-SECRET-18", "REFERER-SECRET-19",
    ]

    @Test(
        "query tokens, custom credential headers, tokens in stored URLs and passwords in bodies reach no key, no stored byte, no printed line and no export; what is left out is said"
    )
    func secretsEverywhere() async throws {
        let folder = try TemporaryFolder()
        let json = #"{"name": "Content-Type", "value": "application/json"}"#
        let custom =
            #"[{"name": "X-Auth", "value": "XAUTH-SECRET-5"}, {"name": "Ocp-Apim-Subscription-Key", "value": "APIM-SECRET-6"}, "#
            + #"{"name": "X-Access-Key", "value": "ACCESSKEY-SECRET-7"}, {"name": "Authentication", "value": "AUTHN-SECRET-8"}, "#
            + #"{"name": "Referer", "value": "https://app.example/?t=REFERER-SECRET-19"}, {"name": "Accept-Language", "value": "fr"}]"#
        try folder.file(
            "s.har",
            HARTests.har([
                HARTests.entry("GET", "https://app.example/api/me?access_token=QUERY-TOKEN-SECRET-1&sig=QUERY-SIG-SECRET-2", status: 200),
                HARTests.entry(
                    "GET", "https://app.example/api/varies", status: 200, requestHeaders: custom,
                    responseHeaders: "[\(json), {\"name\": \"Vary\", \"value\": \"X-Auth, Ocp-Apim-Subscription-Key\"}]"),
                HARTests.entry(
                    "GET", "https://app.example/api/profile", status: 200, text: "{\"me\": 1}", requestHeaders: custom,
                    responseHeaders:
                        "[\(json), {\"name\": \"Vary\", \"value\": \"Accept-Language\"}, {\"name\": \"Link\", \"value\": \"</next?token=LINK-SECRET-13>; rel=next\"}]"
                ),
                HARTests.entry(
                    "GET", "https://app.example/oauth/back", status: 302, text: "",
                    responseHeaders: #"[{"name": "Location", "value": "/x?code=LOC-SECRET-14"}]"#),
                HARTests.entry(
                    "POST", "https://app.example/login", status: 200, text: "{\"ok\": 1}",
                    postData: #"{"mimeType": "application/x-www-form-urlencoded", "text": "user=bob&password=POSTDATA-SECRET-16"}"#),
                HARTests.entry(
                    "POST", "https://app.example/login2", status: 200, text: "{\"ok\": 2}",
                    postData: #"{"mimeType": "application/x-www-form-urlencoded", "params": [{"name": "password", "value": "PARAMS-SECRET-17"}]}"#),
                HARTests.entry(
                    "POST", "https://app.example/oauth/token", status: 200, text: "{\"ok\": 3}",
                    postData: #"{"mimeType": "application/json", "text": "{\"grant\": {\"client_secret\" : \"JSONBODY-SECRET-18\"}}"}"#),
                HARTests.entry(
                    "POST", "https://app.example/search", status: 200, text: "[1]", postData: #"{"mimeType": "application/json", "text": "{\"q\": \"a\"}"}"#),
            ]))
        let packed = try await run(packagerExecutable, ["pack", "--from-har", folder.path + "/s.har", "-o", folder.path + "/s.zip"])
        #expect(packed.status == 0, "\(packed.output)")
        for line in [
            "skipped entry 1 (https://app.example/api/me?access_token=[secret]&sig=[secret]): its query carries a credential ('access_token', 'sig'), which its key would hold (pass --drop-query access_token --drop-query sig to keep it without)",
            "skipped entry 2 (https://app.example/api/varies): its answer varies on header 'ocp-apim-subscription-key', which holds a secret",
            "kept entry 3 (https://app.example/api/profile): its 'link' header carries a credential ('token'): not stored",
            "skipped entry 4 (https://app.example/oauth/back): its Location carries a credential ('code')",
            "kept entry 5 (https://app.example/login): its request body has a 'password' field: only the body's digest is kept",
            "kept entry 6 (https://app.example/login2): its request body has a 'password' field",
            "kept entry 7 (https://app.example/oauth/token): its request body has a 'client_secret' field",
        ] {
            #expect(packed.output.contains(line), "\(line)\n\(packed.output)")
        }
        #expect(!packed.output.contains("entry 8"), "\(packed.output)")
        // Dropped from keys, the parameters no longer keep the entry out, and their values are stored nowhere.
        let dropped = try await run(
            packagerExecutable,
            ["pack", "--from-har", folder.path + "/s.har", "--drop-query", "access_token", "--drop-query", "sig", "-o", folder.path + "/d.zip"])
        #expect(dropped.status == 0 && !dropped.output.contains("entry 1 "), "\(dropped.output)")
        let droppedManifest = try await run("/usr/bin/unzip", ["-p", folder.path + "/d.zip", "manifest.json"])
        #expect(droppedManifest.output.contains("https://app.example/api/me\"") && !droppedManifest.output.contains("QUERY-"), "\(droppedManifest.output)")
        let inspected = try await run(packagerExecutable, ["inspect", folder.path + "/s.zip"])
        let exported = try await run(packagerExecutable, ["export", folder.path + "/s.zip", "--format", "har", "-o", folder.path + "/out.har"])
        #expect(exported.status == 0, "\(exported.output)")
        let bundle = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/s.zip"))
        let har = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/out.har"))
        let manifest = try await run("/usr/bin/unzip", ["-p", folder.path + "/s.zip", "manifest.json"])
        for secret in Self.secrets {
            #expect(bundle.range(of: Data(secret.utf8)) == nil && !manifest.output.contains(secret), "\(secret) is in the bundle")
            #expect(har.range(of: Data(secret.utf8)) == nil, "\(secret) is in the HAR export")
            #expect(!packed.output.contains(secret) && !inspected.output.contains(secret), "\(secret) was printed")
        }
        // What is kept answers: a custom credential by its presence only, a harmless header by its value, a body
        // kept as its digest by the body itself.
        let loader = try OfflineLoader(path: folder.path + "/s.zip")
        let profile = loader.response(for: BundleRequest(url: "https://app.example/api/profile", headers: [.acceptLanguage: "fr"]))
        #expect(profile != nil && profile?.headers[HTTPField.Name("Link")!] == nil)
        let login = BundleRequest(
            method: "POST", url: "https://app.example/login", headers: [.contentType: "application/x-www-form-urlencoded"],
            body: Data("user=bob&password=POSTDATA-SECRET-16".utf8))
        #expect(try loader.response(for: login)?.bodyData() == Data("{\"ok\": 1}".utf8))
        let form = BundleRequest(method: "POST", url: "https://app.example/login2", body: Data("password=PARAMS-SECRET-17".utf8))
        #expect(try loader.response(for: form)?.bodyData() == Data("{\"ok\": 2}".utf8))
        // The export says a body was left out, and packing it again skips that request rather than key it without one.
        let exportedText = String(decoding: har, as: UTF8.self)
        #expect(exportedText.components(separatedBy: "the request body held a secret").count - 1 == 3, "\(exportedText)")
        #expect(exportedText.contains("{\\\"q\\\": \\\"a\\\"}"), "an ordinary body is exported: \(exportedText)")
        let again = try await run(packagerExecutable, ["pack", "--from-har", folder.path + "/out.har", "-o", folder.path + "/again.zip"])
        #expect(
            again.status == 0 && again.output.components(separatedBy: "its request body held a secret, which the HAR does not hold").count - 1 == 3,
            "\(again.output)")
    }

    @Test("an entry whose stored headers would take more than a header block may hold is skipped and named; the others are packed")
    func headerBlockBound() async throws {
        let folder = try TemporaryFolder()
        let lines = BundleFormat.maxHeaderBlockBytes / 10 + 10
        let many = "[" + Array(repeating: #"{"name": "Link", "value": "<a>"}"#, count: lines).joined(separator: ",") + "]"
        let long = "[{\"name\": \"Link\", \"value\": \"<\(String(repeating: "x", count: BundleFormat.maxHeaderBlockBytes))>\"}]"
        try folder.file(
            "h.har",
            HARTests.har([
                HARTests.entry("GET", "https://app.example/crash", status: 200, responseHeaders: many),
                HARTests.entry("GET", "https://app.example/long", status: 200, responseHeaders: long),
                HARTests.entry("GET", "https://app.example/p1", status: 200, text: "x"),
            ]))
        let packed = try await run(packagerExecutable, ["pack", "--from-har", folder.path + "/h.har", "-o", folder.path + "/h.zip"])
        #expect(packed.status == 0, "\(packed.output)")
        #expect(packed.output.contains("skipped entry 1 (https://app.example/crash): its stored headers (\(lines) lines) take"), "\(packed.output)")
        #expect(packed.output.contains("skipped entry 2 (https://app.example/long): its stored headers (1 line) take"), "\(packed.output)")
        let loader = try OfflineLoader(path: folder.path + "/h.zip")
        #expect(loader.response(for: BundleRequest(url: "https://app.example/crash")) == nil)
        #expect(try loader.response(for: BundleRequest(url: "https://app.example/p1"))?.bodyData() == Data("x".utf8))
    }
}

@Suite("HAR export's JSON, written by hand as Foundation writes it")
struct HARJSONTests {
    @Test("entries of every shape a HAR export writes give JSONSerialization's bytes (.sortedKeys, .withoutEscapingSlashes): escapes, keys, numbers")
    func sameAsFoundation() throws {
        var every = ""
        for byte in 0..<0x80 { every.unicodeScalars.append(Unicode.Scalar(UInt8(byte))) }
        every += "é€😀\u{2028}\u{FEFF}/\\\"</script>"
        let keys = [
            "startedDateTime", "time", "request", "response", "cache", "timings", "method", "url", "httpVersion", "headers", "cookies", "headersSize",
            "queryString", "bodySize", "_bodySecret", "comment", "postData", "mimeType", "text", "encoding", "status", "statusText", "content",
            "redirectURL", "size", "name", "value", "send", "wait", "receive", "ab", "Ab", "aB", "B", "a", "_",
        ]
        var generator = SystemRandomNumberGenerator()
        func value(_ depth: Int) -> JSONValue {
            switch Int.random(in: 0..<(depth > 3 ? 4 : 6), using: &generator) {
            case 0: return .string(String(every.shuffled(using: &generator).prefix(Int.random(in: 0..<40, using: &generator))))
            case 1: return .number(Double(Int.random(in: -5_000_000_000...5_000_000_000, using: &generator)))
            case 2: return .bool(Bool.random(using: &generator))
            case 3: return .number(0)
            case 4: return .array((0..<Int.random(in: 0..<4, using: &generator)).map { _ in value(depth + 1) })
            default:
                return .object(
                    Dictionary(
                        (0..<Int.random(in: 0..<8, using: &generator)).map { _ in (keys.randomElement(using: &generator)!, value(depth + 1)) },
                        uniquingKeysWith: { a, _ in a }))
            }
        }
        // What the export gave JSONSerialization before: numbers as Int.
        func foundationValue(_ value: JSONValue) -> Any {
            switch value {
            case .number(let number): Int(number)
            case .array(let values): values.map(foundationValue)
            case .object(let members): members.mapValues(foundationValue)
            default: value.any
            }
        }
        for _ in 0..<2_000 {
            let object = value(0)
            var mine: [UInt8] = []
            object.writeSortingKeys(to: &mine)
            let foundation = try JSONSerialization.data(
                withJSONObject: foundationValue(object), options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
            #expect(mine == Array(foundation), "\(String(decoding: mine, as: UTF8.self))\n\(String(decoding: foundation, as: UTF8.self))")
        }
    }
}
