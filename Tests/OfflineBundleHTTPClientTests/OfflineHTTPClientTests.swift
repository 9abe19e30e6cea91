import AsyncHTTPClient
import Foundation
import InMemoryTracing
import NIOCore
import OfflineBundle
import OfflineBundleHTTPClient
import PackagerKit
import TestSupport
import Testing
import Tracing

@Suite("AsyncHTTPClient wrapper: policies with the network up and down")
struct OfflineHTTPClientTests {
    func body(_ response: HTTPClientResponse) async throws -> String {
        String(buffer: try await response.body.collect(upTo: 1 << 20))
    }

    @Test("each request is a span (hit, network, fallback); a request sent to the network carries its trace to the origin")
    func traced() async throws {
        try await withLiveSiteAndBundle { (live, bundle) async throws -> Void in
            let tracer = InMemoryTracer()
            let first = OfflineHTTPClient(loader: OfflineLoader(bundles: [bundle], policy: .bundleFirst), tracer: tracer)
            _ = try await first.execute(HTTPClientRequest(url: live.base + "/"), timeout: .seconds(30))
            _ = try await first.execute(HTTPClientRequest(url: live.base + "/only-live.txt?token=t"), timeout: .seconds(30))
            live.set("/", .text("down", type: "text/plain", status: 503))
            let networkFirst = OfflineHTTPClient(loader: OfflineLoader(bundles: [bundle], policy: .networkFirst(timeout: .seconds(30))), tracer: tracer)
            _ = try await networkFirst.execute(HTTPClientRequest(url: live.base + "/"), timeout: .seconds(30))
            let spans = tracer.finishedSpans
            let outcomes = spans.map { span -> String in
                if case .string(let text) = span.attributes["offline_bundle.outcome"]?.toSpanAttribute() { return text }
                return "-"
            }
            #expect(outcomes == ["hit", "network", "fallback"], "\(outcomes)")
            // The URL without its query (a token may stand there).
            if case .string(let url) = spans[1].attributes["offline_bundle.url"]?.toSpanAttribute() {
                #expect(url == live.base + "/only-live.txt")
            } else {
                Issue.record("no offline_bundle.url")
            }
            let sent = live.requests.last { $0.path.hasPrefix("/only-live.txt") }
            #expect(sent?.headers[InMemoryTracer.traceIDKey] == spans[1].traceID && sent?.headers[InMemoryTracer.spanIDKey] == spans[1].spanID)
        }
    }

    @Test("a miss, a network error and a cancellation end their spans as errors (outcome, the error recorded, the status); a hit does not")
    func failedSpans() async throws {
        try await withLiveSiteAndBundle { (live, bundle) async throws -> Void in
            let tracer = InMemoryTracer()
            let only = OfflineHTTPClient(loader: OfflineLoader(bundles: [bundle], policy: .bundleOnly), tracer: tracer)
            _ = try await only.execute(HTTPClientRequest(url: live.base + "/"), timeout: .seconds(30))
            await #expect(throws: BundleError.self) { try await only.execute(HTTPClientRequest(url: live.base + "/absent"), timeout: .seconds(30)) }
            // The loader's step itself, with a network that fails and one that is cancelled while it is asked.
            let first = OfflineLoader(bundles: [bundle], policy: .bundleFirst)
            await #expect(throws: URLError.self) {
                _ = try await first.load(
                    BundleRequest(url: live.base + "/absent"), tracer: tracer, network: { _ -> Int in throw URLError(.cannotConnectToHost) }
                ) { $0 }
            }
            let asked = Task {
                try await first.load(
                    BundleRequest(url: live.base + "/absent"), tracer: tracer,
                    network: { _ -> Int in
                        try await Task.sleep(for: .seconds(60))
                        return 200
                    }
                ) { $0 }
            }
            asked.cancel()
            await #expect(throws: CancellationError.self) { _ = try await asked.value }
            let spans = tracer.finishedSpans
            let outcomes = spans.map { span -> String in
                if case .string(let text) = span.attributes["offline_bundle.outcome"]?.toSpanAttribute() { return text }
                return "-"
            }
            #expect(outcomes == ["hit", "miss", "network-error", "cancelled"], "\(outcomes)")
            #expect(spans.map { $0.status?.code } == [nil, .error, .error, .error])
            #expect(spans.map(\.errors.count) == [0, 1, 1, 1])
        }
    }

    @Test(
        "made with a loader handle, the client answers from the loader the handle holds when each request starts: a release swapped in answers the next request"
    )
    func followsTheHandle() async throws {
        let folder = try TemporaryFolder()
        try writeBundle(["https://docs.example.com/page.txt": Data("one".utf8)], to: folder.path + "/one.zip")
        try writeBundle(["https://docs.example.com/page.txt": Data("two".utf8)], to: folder.path + "/two.zip")
        let handle = LoaderHandle(try OfflineLoader(path: folder.path + "/one.zip", policy: .bundleOnly))
        let client = OfflineHTTPClient(handle: handle)
        func page() async throws -> String {
            let response = try await client.execute(HTTPClientRequest(url: "https://docs.example.com/page.txt"), timeout: .seconds(30))
            return String(buffer: try await response.body.collect(upTo: 1 << 20))
        }
        #expect(try await page() == "one")
        handle.replace(with: try OfflineLoader(path: folder.path + "/two.zip", policy: .bundleOnly))
        #expect(try await page() == "two" && client.loader === handle.loader)
    }

    @Test("bundle only, bundle first and network first, up and down, with overrides")
    func policies() async throws {
        try await withLiveSiteAndBundle { (live, bundle) async throws -> Void in
            func client(_ policy: OfflinePolicy, overrides: [PolicyOverride] = []) -> OfflineHTTPClient {
                OfflineHTTPClient(loader: OfflineLoader(bundles: [bundle], policy: policy, overrides: overrides))
            }
            func get(_ client: OfflineHTTPClient, _ path: String, headers: [(String, String)] = []) async throws -> HTTPClientResponse {
                var request = HTTPClientRequest(url: live.base + path)
                for (name, value) in headers { request.headers.add(name: name, value: value) }
                // Generous: the whole suite runs in parallel on two cores; a miss of the deadline is not what is tested.
                return try await client.execute(request, timeout: .seconds(30))
            }

            // Network up.
            #expect(try await body(get(client(.bundleOnly), "/")) == samplePage)
            await #expect(throws: BundleError.self) { try await get(client(.bundleOnly), "/only-live.txt") }
            #expect(try await body(get(client(.bundleFirst), "/")) == samplePage)
            #expect(try await body(get(client(.bundleOnly), "/old")) == samplePage)
            #expect(try await body(get(client(.bundleFirst), "/only-live.txt")) == "only on the network")
            #expect(try await body(get(client(.networkFirst(timeout: .seconds(30))), "/")) == "live page")
            let notModified = try await get(client(.bundleOnly), "/", headers: [("If-None-Match", "\"page-v1\"")])
            #expect(notModified.status.code == 304)
            let range = try await get(client(.bundleOnly), "/logo.png", headers: [("Range", "bytes=0-9")])
            #expect(range.status.code == 206 && range.headers.first(name: "content-range") == "bytes 0-9/50000")
            // An override sends one path to the network whatever the default.
            let mixed = client(.bundleOnly, overrides: [PolicyOverride(.url(glob: "*/only-live.txt"), policy: .bundleFirst)])
            #expect(try await body(get(mixed, "/only-live.txt")) == "only on the network")
            #expect(live.count("/") == 1)

            // Network down.
            await live.stop()
            #expect(try await body(get(client(.bundleOnly), "/")) == samplePage)
            #expect(try await body(get(client(.bundleFirst), "/")) == samplePage)
            #expect(try await body(get(client(.networkFirst(timeout: .seconds(1))), "/")) == samplePage)
            // Neither has it: the network's own error (a refused connection; on a loaded machine, where another test's
            // server may take the freed port, a deadline), not a bundle error.
            let networkError = await #expect(throws: (any Error).self) { try await get(client(.networkFirst(timeout: .seconds(1))), "/only-live.txt") }
            #expect(networkError.map { !($0 is BundleError) } == true, "\(String(describing: networkError))")
            let text = "\(String(describing: networkError))".lowercased()
            #expect(text.contains("connect") || text.contains("deadline"), "\(text)")
            // Bundle only: a miss is the bundle's not-found, and nothing is tried on the network.
            let miss = await #expect(throws: BundleError.self) { try await get(client(.bundleOnly), "/only-live.txt") }
            #expect(miss?.code == .notFound)
        }
    }

    @Test(
        "a large body streams in chunks, intact; one damaged near its end throws before its head (checked first), or before it completes when larger than what is checked first"
    )
    func largeBodiesStream() async throws {
        let folder = try TemporaryFolder()
        let good = noise(3 << 20, seed: 21)
        let bad = noise(2 << 20, seed: 22)
        var writer = BundleWriter()
        writer.add(.init(url: "https://big.example/good.bin", headers: [("content-type", "application/octet-stream")], body: .data(good)))
        writer.add(.init(url: "https://big.example/bad.bin", headers: [("content-type", "application/octet-stream")], body: .data(bad)))
        try writer.write(to: folder.path + "/b.zip")
        let at = try #require(try offset(of: bad.suffix(100), in: folder.path + "/b.zip"))
        try flipByte(at: at + 40, in: folder.path + "/b.zip")
        let client = OfflineHTTPClient(loader: try OfflineLoader(path: folder.path + "/b.zip", policy: .bundleOnly))
        let response = try await client.execute(HTTPClientRequest(url: "https://big.example/good.bin"), timeout: .seconds(30))
        var chunks = 0
        var received = Data()
        for try await chunk in response.body {
            chunks += 1
            received.append(contentsOf: chunk.readableBytesView)
        }
        #expect(received == good && chunks > 10)
        let refused = await #expect(throws: BundleError.self) {
            _ = try await client.execute(HTTPClientRequest(url: "https://big.example/bad.bin"), timeout: .seconds(30))
        }
        #expect(refused?.code == .corruptBody)
        // Larger than what is checked before the head: a 200 whose body throws before it completes.
        let bundle = try MountedBundle(path: folder.path + "/b.zip", options: .init(checkBeforeSend: 1 << 20))
        let streaming = OfflineHTTPClient(loader: OfflineLoader(bundles: [bundle], policy: .bundleOnly))
        let damaged = try await streaming.execute(HTTPClientRequest(url: "https://big.example/bad.bin"), timeout: .seconds(30))
        #expect(damaged.status.code == 200)
        var partial = 0
        await #expect(throws: BundleError.self) {
            for try await chunk in damaged.body { partial += chunk.readableBytes }
        }
        #expect(partial > 0 && partial < bad.count)
    }

    @Test("the shared table: rules, layered bundles, Age and ranges, and a counting origin that sees no request")
    func sharedTable() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            for policy in [OfflinePolicy.bundleFirst, .networkFirst(timeout: .seconds(30)), .bundleOnly] {
                let client = OfflineHTTPClient(loader: try runtimeLoader(origin: origin.base, folder: folder, policy: policy))
                // Under network-first only what rules answer stays off the network.
                let fromRules: Set<String> = ["/tracker/pixel.gif", "/runtime-blocked/a.js", "/flags.json", "/override.txt"]
                for wanted in runtimeCases where policy != .networkFirst(timeout: .seconds(30)) || fromRules.contains(wanted.path) {
                    var request = HTTPClientRequest(url: origin.base + wanted.path)
                    request.method = .init(rawValue: wanted.method)
                    if let body = wanted.requestBody { request.body = .bytes(ByteBuffer(bytes: body)) }
                    for (name, value) in wanted.headers { request.headers.add(name: name, value: value) }
                    let response = try await client.execute(request, timeout: .seconds(30))
                    let body = Data(buffer: try await response.body.collect(upTo: 1 << 20))
                    let problem = mismatch(wanted, status: Int(response.status.code), header: { response.headers.first(name: $0) }, body: body)
                    #expect(problem == nil, "\(policy): \(problem ?? "")")
                }
            }
            #expect(origin.requests.isEmpty, "\(origin.requests.map(\.path))")
        }
    }

    @Test("max age: an old entry gives way to the network while it answers, and is served when it does not (stale-if-error)")
    func maxAge() async throws {
        try await withOrigin { origin in
            origin.set("/", .text("live page", type: "text/html"))
            let folder = try TemporaryFolder()
            let options = LoaderOptions(maxAge: .seconds(50))
            let client = OfflineHTTPClient(loader: try runtimeLoader(origin: origin.base, folder: folder, policy: .bundleFirst, options: options))
            let fresh = OfflineHTTPClient(loader: try runtimeLoader(origin: origin.base, folder: folder, policy: .bundleFirst))
            func get(_ client: OfflineHTTPClient, timeout: TimeAmount = .seconds(120)) async throws -> String {
                // Far past what it takes: the full run once starved the origin's answer past 30 s, and the stale entry
                // stood in for it (as it should, when the network does not answer).
                String(buffer: try await client.execute(HTTPClientRequest(url: origin.base + "/"), timeout: timeout).body.collect(upTo: 1 << 20))
            }
            // The page was fetched 100 s ago: past 50 s it is a miss while the network answers.
            #expect(try await get(client) == "live page")
            #expect(try await get(fresh) == samplePage)
            await origin.stop()
            // The origin gone (its kept-alive connection may hang until the deadline): the old entry answers.
            #expect(try await get(client, timeout: .seconds(10)) == samplePage)
        }
    }

    @Test("network first falls back on the statuses it is told to, besides 5xx")
    func fallbackStatuses() async throws {
        try await withOrigin { origin in
            origin.set("/", .text("slow down", type: "text/plain", status: 429))
            let folder = try TemporaryFolder()
            let policy = OfflinePolicy.networkFirst(timeout: .seconds(30))
            let plain = OfflineHTTPClient(loader: try runtimeLoader(origin: origin.base, folder: folder, policy: policy))
            let told = OfflineHTTPClient(
                loader: try runtimeLoader(origin: origin.base, folder: folder, policy: policy, options: LoaderOptions(fallbackStatuses: [429, 404])))
            #expect(try await plain.execute(HTTPClientRequest(url: origin.base + "/"), timeout: .seconds(30)).status.code == 429)
            let answer = try await told.execute(HTTPClientRequest(url: origin.base + "/"), timeout: .seconds(30))
            let text = String(buffer: try await answer.body.collect(upTo: 1 << 20))
            #expect(answer.status.code == 200 && text == samplePage)
        }
    }

    @Test("the last-seen cache: kept from the network, answers offline after a restart, never keeps no-store")
    func lastSeen() async throws {
        try await withOrigin { origin in
            let folder = try TemporaryFolder()
            origin.set("/", .text("live page v2", type: "text/html"))
            origin.set("/secret", .text("no", type: "text/plain", headers: [("Cache-Control", "no-store")]))
            func client(_ policy: OfflinePolicy) throws -> OfflineHTTPClient {
                let cache = try LastSeenCache(directory: folder.path + "/seen", maxBytes: 1 << 20)
                return OfflineHTTPClient(
                    loader: try runtimeLoader(origin: origin.base, folder: folder, policy: policy, options: LoaderOptions(lastSeen: cache)))
            }
            func get(_ client: OfflineHTTPClient, _ path: String) async throws -> (Int, String) {
                let response = try await client.execute(HTTPClientRequest(url: origin.base + path), timeout: .seconds(30))
                return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 1 << 20)))
            }
            let online = try client(.networkFirst(timeout: .seconds(30)))
            #expect(try await get(online, "/").1 == "live page v2")
            #expect(try await get(online, "/secret").1 == "no")
            await origin.stop()
            // A new loader over the same folder: a restart, offline.
            let restarted = try client(.networkFirst(timeout: .seconds(5)))
            #expect(try await get(restarted, "/").1 == "live page v2")
            // no-store was never kept: nothing answers it.
            await #expect(throws: (any Error).self) { try await get(restarted, "/secret") }
            let files = try FileManager.default.contentsOfDirectory(atPath: folder.path + "/seen")
            #expect(files.count == 1, "\(files)")
        }
    }
}
