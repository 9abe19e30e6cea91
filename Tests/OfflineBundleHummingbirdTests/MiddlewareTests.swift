import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdLauncher
import HummingbirdTesting
import OfflineBundle
import OfflineBundleHummingbird
import OfflineBundleServing
import TestSupport
import Testing

@Suite("Hummingbird middleware serving a mounted bundle")
struct MiddlewareTests {
    func app(_ folder: TemporaryFolder, prefix: String = "/") throws -> some ApplicationProtocol {
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        let loader = try OfflineLoader(path: folder.path + "/b.zip")
        let router = Router()
        router.add(middleware: try OfflineBundleMiddleware(loader: loader, pathPrefix: prefix))
        router.get("/health") { _, _ in "ok" }
        return Application(router: router)
    }

    @Test("200 with the recorded headers, 304, 206, gzip or identity, HEAD, blocked, and a miss falling through")
    func serves() async throws {
        let folder = try TemporaryFolder()
        try await app(folder).test(.router) { client in
            try await client.execute(uri: "/", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.eTag] == "\"page-v1\"" && response.headers[.cacheControl] == "max-age=300")
                #expect(response.headers[.lastModified] == "Sat, 21 Nov 2026 10:00:00 GMT")
                #expect(response.headers[.contentEncoding] == nil)
                #expect(String(buffer: response.body) == samplePage)
            }
            try await client.execute(uri: "/", method: .get, headers: [.ifNoneMatch: "\"page-v1\""]) { response in
                #expect(response.status == .notModified && response.body.readableBytes == 0)
            }
            try await client.execute(uri: "/logo.png", method: .get, headers: [.range: "bytes=10-19"]) { response in
                #expect(response.status == .partialContent && response.headers[.contentRange] == "bytes 10-19/50000")
                #expect(Data(buffer: response.body) == sampleImage[10..<20])
            }
            let gzipped = try await client.execute(uri: "/", method: .get, headers: [.acceptEncoding: "gzip"])
            #expect(gzipped.headers[.contentEncoding] == "gzip")
            #expect(try gunzip(Data(buffer: gzipped.body)) == Data(samplePage.utf8))
            try await client.execute(uri: "/", method: .head) { response in
                #expect(response.status == .ok && response.body.readableBytes == 0)
                #expect(response.headers[.contentLength] == String(samplePage.utf8.count) && response.headers[.eTag] == "\"page-v1\"")
            }
            try await client.execute(uri: "/ads.js", method: .get) { response in
                #expect(response.status == .noContent && response.body.readableBytes == 0)
            }
            try await client.execute(uri: "/old", method: .get) { response in
                #expect(response.status == .movedPermanently && response.headers[.location] == "/")
            }
            try await client.execute(uri: "/health", method: .get) { response in
                #expect(response.status == .ok && String(buffer: response.body) == "ok")
            }
            try await client.execute(uri: "/not-in-bundle", method: .get) { response in
                #expect(response.status == .notFound)
            }
        }
    }

    @Test("under a path prefix, only that prefix answers from the bundle")
    func prefix() async throws {
        let folder = try TemporaryFolder()
        try await app(folder, prefix: "/docs").test(.router) { client in
            try await client.execute(uri: "/docs/", method: .get) { #expect($0.status == .ok && String(buffer: $0.body) == samplePage) }
            try await client.execute(uri: "/docs/logo.png", method: .get) { #expect($0.status == .ok && $0.body.readableBytes == 50_000) }
            try await client.execute(uri: "/logo.png", method: .get) { #expect($0.status == .notFound) }
            // A recorded redirect to the origin's root stays under the prefix.
            try await client.execute(uri: "/docs/old", method: .get) { #expect($0.status == .movedPermanently && $0.headers[.location] == "/docs/") }
        }
    }

    @Test("the shared table: rules, layered bundles, Age and ranges; the release from a file, and mounted from nginx by range reads", arguments: [false, true])
    func sharedTable(remote: Bool) async throws {
        let folder = try TemporaryFolder()
        let origin = "https://docs.example.com"
        let served = remote ? try await RemoteRelease.start(in: folder) : nil
        defer { served?.stop() }
        let loader = try runtimeLoader(origin: origin, folder: folder, policy: .bundleOnly, mountRelease: served?.mount)
        #expect(loader.bundles.contains { $0.remoteURL != nil } == remote)
        let router = Router()
        router.add(middleware: OfflineBundleMiddleware(loader: loader, routes: [.init(origin: origin)]))
        try await Application(router: router).test(.router) { client in
            for wanted in runtimeCases {
                var headers = HTTPFields()
                for (name, value) in wanted.headers { headers[HTTPField.Name(name)!] = value }
                let response = try await client.execute(
                    uri: wanted.path, method: HTTPRequest.Method(wanted.method)!, headers: headers, body: wanted.requestBody.map { ByteBuffer(bytes: $0) })
                let problem = mismatch(
                    wanted, status: response.status.code, header: { response.headers[HTTPField.Name($0)!] }, body: Data(buffer: response.body))
                #expect(problem == nil, "\(problem ?? "")")
            }
        }
    }

    @Test("under a server policy: a Host it does not know is 421; every request, misses that fall through too, is reported with its final status")
    func policy() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        let records = ServedLog()
        let router = Router()
        router.add(
            middleware: try OfflineBundleMiddleware(
                loader: try OfflineLoader(path: folder.path + "/b.zip"), policy: ServerPolicy(allowedHosts: ["docs.test"], accessLog: { records.add($0) })))
        router.get("/health") { _, _ in "ok" }
        // A real server and a real client: the Host field curl sends is the request's authority.
        let server = try await HummingbirdServer.start(responder: router.buildResponder())
        for (host, path, status) in [
            ("docs.test", "/", "200"), ("rebound.example", "/", "421"), ("docs.test", "/health", "200"), ("docs.test", "/nowhere", "404"),
        ] {
            let got = try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: \(host)", "http://127.0.0.1:\(server.port)\(path)"])
            #expect(got.output == status, "\(host) \(path)")
        }
        await server.stop()
        #expect(
            records.all.map { "\($0.target) \($0.status) \($0.source.map { "\($0)" } ?? "-")" } == [
                "/ 200 b.zip", "/ 421 -", "/health 200 -", "/nowhere 404 -",
            ])
    }
}
