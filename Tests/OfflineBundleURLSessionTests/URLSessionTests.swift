import Foundation
import InMemoryTracing
import OfflineBundle
import OfflineBundleURLSession
import PackagerKit
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The URLSession integration, as a service uses it. Serialized: the protocol's loader is one per process.
@Suite("URLSession answered from a bundle", .serialized)
struct URLSessionTests {
    @Test("URLSession: bundle only, bundle first and network first, with the network up and down")
    func urlSessionPolicies() async throws {
        try await withLiveSiteAndBundle { (live, bundle) async throws -> Void in

            var lastError: URLError.Code?
            var lastMessage = ""
            /// The status and body, or nil with the URLError code in `lastError` when the request failed.
            func get(_ path: String, _ policy: OfflinePolicy) async throws -> (Int, String)? {
                let configuration = URLSessionConfiguration.ephemeral
                OfflineURLProtocol.uninstallProcessWide()
                try configuration.useProcessWideOfflineBundle(OfflineLoader(bundles: [bundle], policy: policy))
                defer { OfflineURLProtocol.uninstallProcessWide() }
                let session = URLSession(configuration: configuration)
                do {
                    let (data, response) = try await session.data(from: URL(string: live.base + path)!)
                    return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
                } catch let error as URLError {
                    lastError = error.code
                    lastMessage = error.userInfo[NSLocalizedDescriptionKey] as? String ?? ""
                    return nil
                }
            }

            // Network up.
            #expect(try await get("/", .bundleOnly)?.1 == samplePage)
            // A recorded redirect is followed, as URLSession follows network ones.
            #expect(try await get("/old", .bundleOnly)?.1 == samplePage)
            #expect(try await get("/only-live.txt", .bundleOnly) == nil)
            #expect(lastError == .resourceUnavailable)
            // Said as every client says a bundle-only miss.
            #expect(lastMessage.contains("has no answer for GET \(live.base)/only-live.txt (policy: bundle only)"), "\(lastMessage)")
            #expect(try await get("/", .bundleFirst)?.1 == samplePage)
            #expect(try await get("/only-live.txt", .bundleFirst)?.1 == "only on the network")
            #expect(try await get("/", .networkFirst(timeout: .seconds(30)))?.1 == "live page")
            #expect(try await get("/gone.html", .bundleOnly)?.0 == 404)
            // Network down: bundle-backed policies still answer what the bundle holds.
            await live.stop()
            #expect(try await get("/", .bundleOnly)?.1 == samplePage)
            #expect(try await get("/", .bundleFirst)?.1 == samplePage)
            #expect(try await get("/", .networkFirst(timeout: .seconds(5)))?.1 == samplePage)
            #expect(try await get("/only-live.txt", .networkFirst(timeout: .seconds(5))) == nil)
            // The network's own error: a refused connection (on a loaded machine, where another test's server may take
            // the freed port, a timeout).
            #expect(lastError == .cannotConnectToHost || lastError == .timedOut, "\(String(describing: lastError))")
        }
    }

    @Test("each request the protocol takes is a span saying where its answer came from (hit, miss, network, fallback); the network's request carries the trace")
    func traced() async throws {
        try await withLiveSiteAndBundle { (live, bundle) async throws -> Void in
            let tracer = InMemoryTracer()
            func get(_ path: String, _ policy: OfflinePolicy) async throws {
                let configuration = URLSessionConfiguration.ephemeral
                OfflineURLProtocol.uninstallProcessWide()
                try configuration.useProcessWideOfflineBundle(OfflineLoader(bundles: [bundle], policy: policy), tracer: tracer)
                defer { OfflineURLProtocol.uninstallProcessWide() }
                _ = try? await URLSession(configuration: configuration).data(from: URL(string: live.base + path)!)
            }
            try await get("/", .bundleOnly)
            try await get("/absent.html", .bundleOnly)
            try await get("/only-live.txt", .networkFirst(timeout: .seconds(30)))
            live.set("/", .text("down", type: "text/plain", status: 503))
            try await get("/", .networkFirst(timeout: .seconds(30)))
            let spans = tracer.finishedSpans
            func text(_ span: Int, _ name: String) -> String? {
                guard span < spans.count else { return nil }
                switch spans[span].attributes[name]?.toSpanAttribute() {
                case .string(let value): return value
                case .int64(let value): return String(value)
                default: return nil
                }
            }
            #expect(spans.count == 4 && spans.allSatisfy { $0.operationName == OfflineLoader.loadSpanName && $0.kind == .client })
            #expect(
                text(0, "offline_bundle.outcome") == "hit" && text(0, "offline_bundle.policy") == "bundle-only" && text(0, "http.response.status_code") == "200"
            )
            #expect(text(1, "offline_bundle.outcome") == "miss" && spans.count == 4 && spans[1].errors.count == 1 && spans[1].status?.code == .error)
            #expect(spans.count == 4 && spans[0].status == nil && spans[3].status == nil)
            #expect(text(2, "offline_bundle.outcome") == "network" && text(2, "offline_bundle.source") == "network")
            #expect(text(3, "offline_bundle.outcome") == "fallback" && text(3, "offline_bundle.policy") == "network-first")
            #expect(text(2, "offline_bundle.url") == live.base + "/only-live.txt")
            // The network's requests were made in their spans.
            let sent = live.requests.last { $0.path == "/only-live.txt" }
            #expect(spans.count == 4 && sent?.headers[InMemoryTracer.traceIDKey] == spans[2].traceID)
            #expect(spans.count == 4 && live.requests.last { $0.path == "/" }?.headers[InMemoryTracer.spanIDKey] == spans[3].spanID)
        }
    }

    /// A bundle like a real documentation site's: pages and images of many sizes, redirects, blocked entries and a 404.
    func stressBundle(origin: String, at path: String) throws -> [String: Data] {
        var writer = BundleWriter()
        var bodies: [String: Data] = [:]
        for i in 0..<300 {
            let path = "/page\(i).html"
            let body =
                i % 3 == 0
                ? noise(1_000 + (i * 937) % 120_000, seed: UInt64(i)) : Data(String(repeating: "<p>page \(i) text</p>\n", count: 20 + (i * 31) % 4000).utf8)
            writer.add(.init(url: origin + path, headers: [("content-type", i % 3 == 0 ? "image/png" : "text/html")], body: .data(body)))
            bodies[path] = body
        }
        for i in 0..<20 { writer.add(.init(url: origin + "/old\(i)", status: 301, headers: [("location", "/page\(i).html")])) }
        for i in 0..<20 { writer.add(.init(url: origin + "/ads\(i).js", status: 204, kind: .blocked)) }
        writer.add(.init(url: origin + "/gone.html", status: 404, headers: [("content-type", "text/html")], body: .data(Data("gone".utf8))))
        try writer.write(to: path)
        return bodies
    }

    enum Outcome: Sendable, Equatable {
        case ok
        case wrong(String)
    }

    /// One request of the mix, checked: hits byte-identical, redirects followed, blocked empty, misses refused.
    static func check(_ session: URLSession, origin: String, n: Int, bodies: [String: Data]) async -> Outcome {
        let kind = n % 20
        let path: String
        switch kind {
        case 0, 1: path = "/missing\(n).html"
        case 2: path = "/old\(n % 20)"
        case 3: path = "/ads\(n % 20).js"
        case 4: path = "/gone.html"
        default: path = "/page\((n * 7) % 300).html"
        }
        do {
            let (data, response) = try await session.data(from: URL(string: origin + path)!)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            switch kind {
            case 0, 1: return .wrong("\(path): a miss answered \(status)")
            case 2: return data == bodies["/page\(n % 20).html"] ? .ok : .wrong("\(path): redirect not followed to the right body")
            case 3: return status == 204 && data.isEmpty ? .ok : .wrong("\(path): blocked answered \(status) with \(data.count) bytes")
            case 4: return status == 404 ? .ok : .wrong("\(path): \(status)")
            default: return status == 200 && data == bodies[path] ? .ok : .wrong("\(path): \(status), \(data.count) bytes, not the recorded body")
            }
        } catch {
            return kind <= 1 ? .ok : .wrong("\(path): \(error)")
        }
    }

    @Test(
        "2,000 requests at a time of 16 and of 64, hits, misses, redirects and blocked entries mixed, repeated: no crash, every hit byte-identical",
        arguments: [16, 64])
    func concurrentRequests(width: Int) async throws {
        let origin = "https://docs.example.com"
        let folder = try TemporaryFolder()
        let bodies = try stressBundle(origin: origin, at: folder.path + "/b.zip")
        let loader = try OfflineLoader(path: folder.path + "/b.zip", policy: .bundleOnly)
        // With the landed protocol (answers handed to the client from its own queue), this test crashed the process
        // (a null dereference in URLSession.behaviour(for:)) in 6 runs of 6; it passes with the fix.
        OfflineURLProtocol.uninstallProcessWide()
        defer { OfflineURLProtocol.uninstallProcessWide() }
        for round in 0..<6 {
            let configuration = URLSessionConfiguration.ephemeral
            try configuration.useProcessWideOfflineBundle(loader)
            configuration.httpMaximumConnectionsPerHost = width
            let session = URLSession(configuration: configuration)
            let problems = await withTaskGroup(of: Outcome.self) { group -> [String] in
                var next = 0
                var problems: [String] = []
                for _ in 0..<width {
                    let n = next
                    next += 1
                    group.addTask { await Self.check(session, origin: origin, n: n + round, bodies: bodies) }
                }
                for await outcome in group {
                    if case .wrong(let why) = outcome, problems.count < 5 { problems.append(why) }
                    if next < 2_000 {
                        let n = next
                        next += 1
                        group.addTask { await Self.check(session, origin: origin, n: n + round, bodies: bodies) }
                    }
                }
                return problems
            }
            session.finishTasksAndInvalidate()
            #expect(problems.isEmpty, "round \(round): \(problems)")
        }
    }

    @Test("a second, different loader is refused until the first is uninstalled; the same one may be installed again")
    func processWide() throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        let first = try OfflineLoader(path: folder.path + "/b.zip")
        let second = try OfflineLoader(path: folder.path + "/b.zip")
        OfflineURLProtocol.uninstallProcessWide()
        defer { OfflineURLProtocol.uninstallProcessWide() }
        try OfflineURLProtocol.installProcessWide(first)
        try OfflineURLProtocol.installProcessWide(first)
        let error = try #require(throws: BundleError.self) { try URLSessionConfiguration.ephemeral.useProcessWideOfflineBundle(second) }
        #expect(error.code == .invalidArgument && error.message.contains("uninstallProcessWide"))
        #expect(OfflineURLProtocol.processWideLoader === first)
        OfflineURLProtocol.uninstallProcessWide()
        try OfflineURLProtocol.installProcessWide(second)
        #expect(OfflineURLProtocol.processWideLoader === second)
    }

    @Test(
        "the shared table: rules, layered bundles, Age and ranges, and a counting origin that sees no request; the release from a file, and mounted from nginx by range reads",
        arguments: [false, true])
    func sharedTable(remote: Bool) async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            let served = remote ? try await RemoteRelease.start(in: folder) : nil
            defer { served?.stop() }
            for policy in [OfflinePolicy.bundleFirst, .bundleOnly] {
                let configuration = URLSessionConfiguration.ephemeral
                OfflineURLProtocol.uninstallProcessWide()
                let loader = try runtimeLoader(origin: origin.base, folder: folder, policy: policy, mountRelease: served?.mount)
                #expect(loader.bundles.contains { $0.remoteURL != nil } == remote)
                try configuration.useProcessWideOfflineBundle(loader)
                defer { OfflineURLProtocol.uninstallProcessWide() }
                let session = URLSession(configuration: configuration)
                for wanted in runtimeCases {
                    var request = URLRequest(url: URL(string: origin.base + wanted.path)!)
                    request.httpMethod = wanted.method
                    request.httpBody = wanted.requestBody
                    for (name, value) in wanted.headers { request.setValue(value, forHTTPHeaderField: name) }
                    let (data, response) = try await session.data(for: request)
                    let http = try #require(response as? HTTPURLResponse)
                    let problem = mismatch(wanted, status: http.statusCode, header: { http.value(forHTTPHeaderField: $0) }, body: data)
                    #expect(problem == nil, "\(policy): \(problem ?? "")")
                }
            }
            #expect(origin.requests.isEmpty, "\(origin.requests.map(\.path))")
        }
    }

    @Test("the last-seen cache keeps what the network answered and answers it after a restart offline")
    func lastSeen() async throws {
        try await withOrigin { origin in
            origin.set("/", .text("live page v2", type: "text/html"))
            let folder = try TemporaryFolder()
            func get(_ policy: OfflinePolicy) async throws -> String? {
                let cache = try LastSeenCache(directory: folder.path + "/seen", maxBytes: 1 << 20)
                let configuration = URLSessionConfiguration.ephemeral
                OfflineURLProtocol.uninstallProcessWide()
                try configuration.useProcessWideOfflineBundle(
                    try runtimeLoader(origin: origin.base, folder: folder, policy: policy, options: LoaderOptions(lastSeen: cache)))
                defer { OfflineURLProtocol.uninstallProcessWide() }
                let (data, _) = try await URLSession(configuration: configuration).data(from: URL(string: origin.base + "/")!)
                return String(decoding: data, as: UTF8.self)
            }
            #expect(try await get(.networkFirst(timeout: .seconds(30))) == "live page v2")
            // The response is written off the task's queue: wait for its file.
            for _ in 0..<50
            where (try? FileManager.default.contentsOfDirectory(atPath: folder.path + "/seen"))?.contains(where: { $0.hasSuffix(".seen") }) != true {
                try await Task.sleep(for: .milliseconds(20))
            }
            await origin.stop()
            // A new loader and cache over the same folder, offline: the last-seen answer is newer than the bundle's.
            #expect(try await get(.networkFirst(timeout: .seconds(5))) == "live page v2")
            #expect(try await get(.bundleOnly) == "live page v2")
        }
    }
}
