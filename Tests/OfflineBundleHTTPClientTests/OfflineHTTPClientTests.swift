import AsyncHTTPClient
import Foundation
import NIOCore
import OfflineBundle
import OfflineBundleHTTPClient
import PackagerKit
import TestSupport
import Testing

@Suite("AsyncHTTPClient wrapper: policies with the network up and down")
struct OfflineHTTPClientTests {
    func body(_ response: HTTPClientResponse) async throws -> String {
        String(buffer: try await response.body.collect(upTo: 1 << 20))
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
            // Neither has it: the network's own error (a refused connection), not a bundle error.
            let networkError = await #expect(throws: (any Error).self) { try await get(client(.networkFirst(timeout: .seconds(1))), "/only-live.txt") }
            #expect(networkError.map { !($0 is BundleError) } == true, "\(String(describing: networkError))")
            #expect("\(String(describing: networkError))".lowercased().contains("connect"), "\(String(describing: networkError))")
            // Bundle only: a miss is the bundle's not-found, and nothing is tried on the network.
            let miss = await #expect(throws: BundleError.self) { try await get(client(.bundleOnly), "/only-live.txt") }
            #expect(miss?.code == .notFound)
        }
    }

    @Test("a large body streams in chunks, intact; one damaged near its end throws before it completes")
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
        let damaged = try await client.execute(HTTPClientRequest(url: "https://big.example/bad.bin"), timeout: .seconds(30))
        #expect(damaged.status.code == 200)
        var partial = 0
        await #expect(throws: BundleError.self) {
            for try await chunk in damaged.body { partial += chunk.readableBytes }
        }
        #expect(partial > 0 && partial < bad.count)
    }
}
