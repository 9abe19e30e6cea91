import Foundation
import HTTPTypes
import InMemoryTracing
import OfflineBundle
import OfflineBundleOpenAPI
import OpenAPIRuntime
import OpenAPIURLSession
import TestSupport
import Testing
import Tracing

/// The transport a generated OpenAPI client talks through, answered from a bundle built from a real origin on
/// loopback, with swift-openapi-urlsession's transport as the network behind it.
@Suite("OpenAPI: a ClientTransport answered from a bundle")
struct OfflineBundleTransportTests {
    static let itemsJSON = #"{"items": [{"id": 1, "name": "apple"}]}"#

    /// Builds `api.zip` from `origin`: a GET of the items, a POST search under `match json-body`.
    static func build(_ origin: Origin, in folder: TemporaryFolder) async throws -> String {
        origin.set("/v1/items?limit=2", .text(itemsJSON, type: "application/json"))
        origin.route("/v1/search") { received in
            .text(received.method == "POST" ? #"{"hits": ["apple"]}"# : "{}", type: "application/json")
        }
        try folder.file(
            "api.yml",
            """
            output: api.zip
            robots: false
            requests:
              - \(origin.base)/v1/items?limit=2
              - url: \(origin.base)/v1/search
                method: POST
                headers: {Content-Type: application/json}
                body: '{"q": "app", "requestId": "r-1"}'
                match: {json-body: canonical, ignore: [/requestId]}
            """)
        let built = try await run(packagerExecutable, ["build", "api.yml", "--fresh"], in: folder.path)
        #expect(built.status == 0, "\(built.output)")
        return folder.path + "/api.zip"
    }

    static func text(_ body: HTTPBody?) async throws -> String {
        guard let body else { return "" }
        return String(decoding: try await Data(collecting: body, upTo: 1 << 20), as: UTF8.self)
    }

    @Test("bundle only: the server URL and the operation's path make the key; a POST's body is matched canonically; a miss fails, named")
    func bundleOnly() async throws {
        let folder = try TemporaryFolder()
        let (path, base) = try await withOrigin { origin in (try await Self.build(origin, in: folder), origin.base) }
        // The origin is stopped: every answer is the bundle's.
        let transport = OfflineBundleTransport(loader: try OfflineLoader(path: path, policy: .bundleOnly))
        let server = try #require(URL(string: base + "/v1"))
        let (items, itemsBody) = try await transport.send(
            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items?limit=2"), body: nil, baseURL: server, operationID: "listItems")
        #expect(items.status == .ok && items.headerFields[.contentType] == "application/json")
        #expect(try await Self.text(itemsBody) == Self.itemsJSON)
        var search = HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/search")
        search.headerFields[.contentType] = "application/json"
        let (found, foundBody) = try await transport.send(
            search, body: HTTPBody(#"{ "requestId": "client-9", "q": "app" }"#), baseURL: server, operationID: "search")
        #expect(found.status == .ok)
        #expect(try await Self.text(foundBody) == #"{"hits": ["apple"]}"#)
        // Another query is another request: a miss, said with the nearest recorded one.
        let error = await #expect(throws: BundleError.self) {
            _ = try await transport.send(search, body: HTTPBody(#"{"q": "pear"}"#), baseURL: server, operationID: "search")
        }
        #expect(error?.code == .notFound && error?.message.hasPrefix("search: ") == true && "\(error!)".contains("body /q"), "\(String(describing: error))")
    }

    @Test("bundle first sends what the bundle lacks to the inner transport; network first falls back to the bundle on a 503 and on a dead origin")
    func withTheNetwork() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            let path = try await Self.build(origin, in: folder)
            let server = try #require(URL(string: origin.base + "/v1"))
            let network = URLSessionTransport()
            origin.set("/v1/live", .text("only on the network", type: "text/plain"))
            let first = OfflineBundleTransport(loader: try OfflineLoader(path: path, policy: .bundleFirst), upstream: network)
            let before = origin.requests.count
            let (items, _) = try await first.send(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items?limit=2"), body: nil, baseURL: server, operationID: "listItems")
            #expect(items.status == .ok && origin.requests.count == before, "the bundle's answer reached the origin")
            let (live, liveBody) = try await first.send(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/live"), body: nil, baseURL: server, operationID: "live")
            let liveText = try await Self.text(liveBody)
            #expect(live.status == .ok && liveText == "only on the network")
            // Network first: the origin fails the list with a 503; the bundle's copy answers.
            origin.set("/v1/items?limit=2", .text("down", type: "text/plain", status: 503))
            let networkFirst = OfflineBundleTransport(loader: try OfflineLoader(path: path, policy: .networkFirst(timeout: .seconds(10))), upstream: network)
            let (fallback, fallbackBody) = try await networkFirst.send(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items?limit=2"), body: nil, baseURL: server, operationID: "listItems")
            let fallbackText = try await Self.text(fallbackBody)
            #expect(fallback.status == .ok && fallbackText == Self.itemsJSON)
            #expect(origin.count("/v1/items?limit=2") >= 2)
            // The origin gone: the transport's error is answered by the bundle.
            await origin.stop()
            let (offline, offlineBody) = try await networkFirst.send(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items?limit=2"), body: nil, baseURL: server, operationID: "listItems")
            let offlineText = try await Self.text(offlineBody)
            #expect(offline.status == .ok && offlineText == Self.itemsJSON)
            // Without an inner transport, what the policy sends to the network fails, named.
            let alone = OfflineBundleTransport(loader: try OfflineLoader(path: path, policy: .bundleFirst))
            await #expect(throws: BundleError.self) {
                _ = try await alone.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/live"), body: nil, baseURL: server, operationID: "live")
            }
        }
    }

    @Test("the last-seen cache: a 200 from the inner transport is kept once its body was read, and answers after a restart offline")
    func lastSeen() async throws {
        let folder = try TemporaryFolder()
        let (path, base) = try await withOrigin { origin in
            let path = try await Self.build(origin, in: folder)
            origin.set("/v1/live", .text("only on the network", type: "text/plain"))
            origin.set("/v1/unread", .text("never read", type: "text/plain"))
            let transport = OfflineBundleTransport(
                loader: try OfflineLoader(
                    path: path, policy: .networkFirst(timeout: .seconds(10)),
                    options: LoaderOptions(lastSeen: try LastSeenCache(directory: folder.path + "/seen", maxBytes: 1 << 20))),
                upstream: URLSessionTransport())
            let server = try #require(URL(string: origin.base + "/v1"))
            let (live, liveBody) = try await transport.send(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/live"), body: nil, baseURL: server, operationID: "live")
            let liveText = try await Self.text(liveBody)
            #expect(live.status == .ok && liveText == "only on the network")
            // A body never read to its end is not kept.
            let unread = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/unread")
            _ = try await transport.send(unread, body: nil, baseURL: server, operationID: "unread")
            return (path, origin.base)
        }
        // The origin gone, a new loader over the same folder: the body read is answered, the other is not.
        let restarted = OfflineBundleTransport(
            loader: try OfflineLoader(
                path: path, policy: .bundleOnly, options: LoaderOptions(lastSeen: try LastSeenCache(directory: folder.path + "/seen", maxBytes: 1 << 20))))
        let server = try #require(URL(string: base + "/v1"))
        let (again, againBody) = try await restarted.send(
            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/live"), body: nil, baseURL: server, operationID: "live")
        let againText = try await Self.text(againBody)
        #expect(again.status == .ok && againText == "only on the network")
        await #expect(throws: BundleError.self) {
            _ = try await restarted.send(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/unread"), body: nil, baseURL: server, operationID: "unread")
        }
    }

    @Test(
        "each call is a span saying where its answer came from and why (hit, network, fallback, miss), and the trace goes on to the origin in the request's headers"
    )
    func traced() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            let path = try await Self.build(origin, in: folder)
            let server = try #require(URL(string: origin.base + "/v1"))
            origin.set("/v1/live", .text("only on the network", type: "text/plain"))
            let tracer = InMemoryTracer()
            let first = OfflineBundleTransport(
                loader: try OfflineLoader(path: path, policy: .bundleFirst), upstream: URLSessionTransport(), tracer: tracer)
            _ = try await first.send(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items?limit=2"), body: nil, baseURL: server, operationID: "listItems")
            _ = try await first.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/live"), body: nil, baseURL: server, operationID: "live")
            origin.set("/v1/items?limit=2", .text("down", type: "text/plain", status: 503))
            let networkFirst = OfflineBundleTransport(
                loader: try OfflineLoader(path: path, policy: .networkFirst(timeout: .seconds(10))), upstream: URLSessionTransport(), tracer: tracer)
            _ = try await networkFirst.send(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items?limit=2"), body: nil, baseURL: server, operationID: "listItems")
            let only = OfflineBundleTransport(loader: try OfflineLoader(path: path, policy: .bundleOnly), tracer: tracer)
            _ = try? await only.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/gone"), body: nil, baseURL: server, operationID: "gone")

            let spans = tracer.finishedSpans
            #expect(spans.count == 4 && spans.allSatisfy { $0.operationName == OfflineLoader.loadSpanName && $0.kind == .client })
            func attribute(_ span: Int, _ name: String) -> String? {
                guard span < spans.count, let value = spans[span].attributes[name]?.toSpanAttribute() else { return nil }
                switch value {
                case .string(let text): return text
                case .int64(let number): return String(number)
                default: return "\(value)"
                }
            }
            let label = try MountedBundle(path: path).label
            #expect(attribute(0, "offline_bundle.outcome") == "hit" && attribute(0, "offline_bundle.source") == label)
            #expect(attribute(0, "offline_bundle.policy") == "bundle-first" && attribute(0, "offline_bundle.url") == origin.base + "/v1/items")
            #expect(attribute(1, "offline_bundle.outcome") == "network" && attribute(1, "http.response.status_code") == "200")
            #expect(attribute(2, "offline_bundle.outcome") == "fallback" && attribute(2, "offline_bundle.policy") == "network-first")
            #expect(attribute(3, "offline_bundle.outcome") == "miss" && spans.count == 4 && spans[3].errors.count == 1)
            // The network's requests carried the span they were made in; the bundle's answer asked nothing.
            let live = origin.requests.last { $0.path == "/v1/live" }
            #expect(live?.headers[InMemoryTracer.traceIDKey] == spans[1].traceID && live?.headers[InMemoryTracer.spanIDKey] == spans[1].spanID)
            let failed = origin.requests.last { $0.path == "/v1/items?limit=2" }
            #expect(failed?.headers[InMemoryTracer.traceIDKey] == spans[2].traceID)
        }
    }
}

/// The transport under the shared runtime table (TestSupport's `runtimeCases`): block rules, runtime substitutions,
/// a hotfix bundle over the release, conditional and range requests, and answers chosen by body, Accept and
/// credential, as URLSession, AsyncHTTPClient and Hummingbird answer them.
@Suite("OpenAPI: the shared runtime table through the transport")
struct OfflineBundleTransportTableTests {
    @Test("every case of the table, bundle only, with the origin never asked")
    func runtimeTable() async throws {
        let folder = try TemporaryFolder()
        let origin = "http://127.0.0.1:9"
        let transport = OfflineBundleTransport(loader: try runtimeLoader(origin: origin, folder: folder, policy: .bundleOnly))
        let server = try #require(URL(string: origin))
        for wanted in runtimeCases {
            var request = HTTPRequest(method: .init(wanted.method) ?? .get, scheme: nil, authority: nil, path: wanted.path)
            for (name, value) in wanted.headers { request.headerFields[try #require(HTTPField.Name(name))] = value }
            let (response, body) = try await transport.send(
                request, body: wanted.requestBody.map { HTTPBody($0) }, baseURL: server, operationID: "case")
            var bytes = Data()
            if let body { bytes = try await Data(collecting: body, upTo: 1 << 20) }
            let problem = mismatch(
                wanted, status: response.status.code, header: { name in HTTPField.Name(name).flatMap { response.headerFields[$0] } }, body: bytes)
            #expect(problem == nil, "\(problem ?? "")")
        }
    }
}

let kinto = APIServer.find("kinto")

/// A client generated by swift-openapi-generator from the OpenAPI description Kinto serves (KintoClient/, written by
/// scripts/openapi/regenerate-kinto-client.sh), its calls frozen with `requests:` from a live Kinto, then answered by
/// the transport with Kinto stopped.
@Suite(
    "OpenAPI: Kinto's generated client answered from the bundle with Kinto stopped",
    .enabled(if: kinto != nil, "Kinto is not installed: \(APIServer.installHint)"))
struct KintoGeneratedClientTests {
    /// Basic auth on every call, as a service's middleware adds its credential.
    struct BasicAuth: ClientMiddleware {
        var credential: String
        func intercept(
            _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
            next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
        ) async throws -> (HTTPResponse, HTTPBody?) {
            var request = request
            request.headerFields[.authorization] = credential
            return try await next(request, body, baseURL)
        }
    }

    static func title(_ data: [String: OpenAPIValueContainer]?) -> String? { data?["title"]?.value as? String }

    @Test("server info, a sorted list of records, one record by id and a POST that creates one: each answered offline; no credential, no answer")
    func generatedClientOffline() async throws {
        let folder = try TemporaryFolder()
        let server = try await APIServer.startKinto(try #require(kinto), in: folder)
        let auth = "Basic " + Data("alice:wonderland".utf8).base64EncodedString()
        let records = server.base + "/v1/buckets/default/collections/notes/records"
        // The declared POST goes to another collection: the build sends its requests concurrently, so it could
        // otherwise land before the list is fetched.
        let inbox = server.base + "/v1/buckets/default/collections/inbox/records"
        var ids: [String] = []
        for title in ["pears", "apples", "figs"] {
            let created = try await run(
                "curl", ["-s", "-u", "alice:wonderland", "-H", "Content-Type: application/json", "-d", #"{"data": {"title": "\#(title)"}}"#, records])
            let object = try JSONSerialization.jsonObject(with: Data(created.output.utf8)) as? [String: Any]
            ids.append(try #require((object?["data"] as? [String: Any])?["id"] as? String, "\(created.output)"))
        }
        // The calls the service makes, frozen: the POST is matched by its JSON, whatever the client's encoder writes.
        try folder.file(
            "kinto.yml",
            """
            output: \(folder.path)/kinto.zip
            robots: false
            requests:
              - \(server.base)/v1/
              - url: \(records)?_sort=title
                headers: {Authorization: "${KINTO_AUTH}"}
              - url: \(records)/\(ids[0])
                headers: {Authorization: "${KINTO_AUTH}"}
              - url: \(inbox)
                method: POST
                headers: {Authorization: "${KINTO_AUTH}", Content-Type: application/json}
                body: '{"data": {"title": "frozen"}}'
                status: 201
                match: {json-body: canonical}
            """)
        let built = try await run("/usr/bin/env", ["KINTO_AUTH=" + auth, packagerExecutable, "build", folder.path + "/kinto.yml"])
        #expect(built.status == 0, "\(built.output)")
        server.stop()

        let loader = try OfflineLoader(path: folder.path + "/kinto.zip", policy: .bundleOnly)
        let serverURL = try #require(URL(string: server.base + "/v1"))
        let client = Client(serverURL: serverURL, transport: OfflineBundleTransport(loader: loader), middlewares: [BasicAuth(credential: auth)])
        let info = try await client.server_info()
        #expect(try info.ok.body.json.additionalProperties["project_name"]?.value as? String == "kinto")
        let notes = try await client.get_records(path: .init(bucket_id: "default", collection_id: "notes"), query: .init(_sort: ["title"]))
        let titles = try notes.ok.body.json.data?.map { Self.title($0.additionalProperties) }
        #expect(titles == ["apples", "figs", "pears"], "\(String(describing: try? notes.ok.body.json.data))")
        let one = try await client.get_record(path: .init(bucket_id: "default", collection_id: "notes", id: ids[0]))
        #expect(try Self.title(one.ok.body.json.data?.additionalProperties) == "pears")
        let created = try await client.create_record(
            path: .init(bucket_id: "default", collection_id: "inbox"),
            body: .json(.init(data: .init(additionalProperties: ["title": try OpenAPIValueContainer(unvalidatedValue: "frozen")]))))
        #expect(try Self.title(created.created.body.json.data?.additionalProperties) == "frozen")

        // The answers were recorded for a credential: a call without one is not given them.
        let anonymous = Client(serverURL: serverURL, transport: OfflineBundleTransport(loader: loader))
        let error = await #expect(throws: ClientError.self) {
            _ = try await anonymous.get_records(path: .init(bucket_id: "default", collection_id: "notes"), query: .init(_sort: ["title"]))
        }
        #expect((error?.underlyingError as? BundleError)?.code == .notFound, "\(String(describing: error))")
    }
}
