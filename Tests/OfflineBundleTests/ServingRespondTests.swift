import Foundation
import HTTPTypes
import OfflineBundle
import PackagerKit
import Synchronization
import TestSupport
import Testing

/// The whole exchange a framework's middleware runs (`BundleServing.respond`), without a framework: what the Hummingbird
/// and Vapor middlewares only convert.
@Suite("BundleServing.respond: the request's body within its budget, the answer, the body opened and streamed checked")
struct ServingRespondTests {
    static let origin = "https://api.example"
    static let large = noise(300_000, seed: 11)

    /// A bundle with POSTs answered by their bodies, a page, and a large stored body; its path.
    static func write(in folder: TemporaryFolder) throws -> String {
        var writer = BundleWriter()
        for (query, hit) in [("a", "apple"), ("b", "banana")] {
            var entry = RecordedExchange(url: origin + "/search", headers: [("content-type", "application/json")], body: .data(Data("[\"\(hit)\"]".utf8)))
            entry.request = RecordedRequest(method: "POST", body: Data("{\"q\":\"\(query)\"}".utf8))
            writer.add(entry)
        }
        writer.add(.init(url: origin + "/", headers: [("content-type", "text/html")], body: .data(Data("<p>home</p>".utf8))))
        writer.add(.init(url: origin + "/large.bin", headers: [("content-type", "application/octet-stream")], body: .data(large)))
        let path = folder.path + "/api.zip"
        _ = try writer.write(to: path)
        return path
    }

    /// A hop that runs the work where it is asked (the test's own task) and counts the hops.
    final class CountingHop: Sendable {
        let count = Mutex(0)
        var hop: BlockingHop {
            BlockingHop { [self] work in
                count.withLock { $0 += 1 }
                work()
            }
        }
        var hops: Int { count.withLock { $0 } }
    }

    /// `respond` for `method` `target` with `body` (nil: the request has none), and how many times the body was asked for.
    static func respond(
        _ serving: BundleServing, _ method: String, _ target: String, body: Data? = nil, contentLength: Int? = nil, client: String? = nil,
        hop: BlockingHop, collectFails: Bool = false
    ) async -> (ServeResponse, collected: Int) {
        var fields: HTTPFields = [.contentType: "application/json"]
        if let length = contentLength ?? body?.count { fields[.contentLength] = String(length) }
        let asked = Mutex(0)
        let response = await serving.respond(method: method, target: target, host: "localhost", headers: fields, client: client, hop: hop) { limit in
            asked.withLock { $0 += 1 }
            #expect(limit == BundleRequest.maxBodySize)
            if collectFails { throw CancellationError() }
            return body ?? Data()
        }
        return (response, asked.withLock { $0 })
    }

    static func status(_ response: ServeResponse) -> Int? {
        if case .response(let status, _, _, _) = response { return status }
        return nil
    }

    static func bytes(_ response: ServeResponse) async throws -> Data? {
        guard case .response(_, _, let body, _) = response else { return nil }
        switch body {
        case .empty: return Data()
        case .bytes(let bytes): return bytes
        case .stream(let chunks):
            var all = Data()
            for try await chunk in chunks { all += chunk }
            return all
        }
    }

    @Test("a body is read only where a bundle answers by it, and chooses the answer; 413 past the size, before or while reading; 503 past the client's share")
    func requestBodies() async throws {
        let folder = try TemporaryFolder()
        let serving = try BundleServing(handle: LoaderHandle(OfflineLoader(path: Self.write(in: folder))))
        let hop = CountingHop()
        let (banana, asked) = await Self.respond(serving, "POST", "/search", body: Data("{\"q\":\"b\"}".utf8), hop: hop.hop)
        #expect(asked == 1 && Self.status(banana) == 200)
        #expect(try await Self.bytes(banana) == Data("[\"banana\"]".utf8))
        #expect(serving.bodyBudget.inUse == 0, "the body's reservation is given back once answered")
        // A GET of a page never reads a body; its answer is read where it stands (in memory) or through the hop.
        let (page, pageAsked) = await Self.respond(serving, "GET", "/", hop: hop.hop)
        #expect(pageAsked == 0 && Self.status(page) == 200)
        #expect(try await Self.bytes(page) == Data("<p>home</p>".utf8))
        // A POST the bundle has no answer for is a miss: the next responder's.
        let (other, _) = await Self.respond(serving, "POST", "/search", body: Data("{\"q\":\"z\"}".utf8), hop: hop.hop)
        guard case .miss = other else {
            Issue.record("an unknown body is answered: \(other)")
            return
        }
        // Past the size any body may have: 413 from its Content-Length, before it is read; and when reading it fails.
        let (tooLarge, tooLargeAsked) = await Self.respond(serving, "POST", "/search", contentLength: BundleRequest.maxBodySize + 1, hop: hop.hop)
        #expect(Self.status(tooLarge) == 413 && tooLargeAsked == 0)
        let (cut, _) = await Self.respond(serving, "POST", "/search", contentLength: 10, hop: hop.hop, collectFails: true)
        #expect(Self.status(cut) == 413)
        // A client past its share of the budget gets 503, and another client is still answered.
        #expect(serving.bodyBudget.reserve(serving.bodyBudget.perClient, client: "10.0.0.1"))
        let (refused, refusedAsked) = await Self.respond(serving, "POST", "/search", body: Data("{\"q\":\"a\"}".utf8), client: "10.0.0.1", hop: hop.hop)
        #expect(Self.status(refused) == 503 && refusedAsked == 0)
        let (apple, _) = await Self.respond(serving, "POST", "/search", body: Data("{\"q\":\"a\"}".utf8), client: "10.0.0.2", hop: hop.hop)
        #expect(try await Self.bytes(apple) == Data("[\"apple\"]".utf8))
        serving.bodyBudget.release(serving.bodyBudget.perClient, client: "10.0.0.1")
        #expect(serving.bodyBudget.inUse == 0)
    }

    @Test("a large body streams in checked chunks, each read through the hop; a damaged one is a failure before its head, or ends the stream with the error")
    func streamedBodies() async throws {
        let folder = try TemporaryFolder()
        let path = try Self.write(in: folder)
        let hop = CountingHop()
        let serving = try BundleServing(handle: LoaderHandle(OfflineLoader(path: path)))
        let (whole, _) = await Self.respond(serving, "GET", "/large.bin", hop: hop.hop)
        guard case .response(200, let headers, .stream, _) = whole else {
            Issue.record("300 KB is not streamed: \(whole)")
            return
        }
        #expect(headers[.contentLength] == "300000")
        #expect(try await Self.bytes(whole) == Self.large)
        // The first two chunks in one hop, then one hop per later chunk of 64 KiB, and one that finds the end.
        #expect(hop.hops == 1 + 3 + 1, "\(hop.hops) hops")
        // HEAD: the head alone, no hop.
        let (head, _) = await Self.respond(serving, "HEAD", "/large.bin", hop: hop.hop)
        guard case .response(200, _, .empty, _) = head else {
            Issue.record("HEAD has a body: \(head)")
            return
        }
        // Damaged in its first chunks: refused before a head goes out, as a failure the transport answers 500.
        let at = try #require(try offset(of: Self.large.prefix(64), in: path))
        try flipByte(at: at + 10, in: path)
        let damaged = try BundleServing(handle: LoaderHandle(OfflineLoader(path: path)))
        let (failed, _) = await Self.respond(damaged, "GET", "/large.bin", hop: hop.hop)
        guard case .failure(let reason, let source) = failed else {
            Issue.record("a damaged body is answered: \(failed)")
            return
        }
        #expect(reason.contains("damaged") && source != nil)
        // Damaged near its end, with the check made as it streams: the chunks before go out, then the stream fails.
        try flipByte(at: at + 10, in: path)
        let tail = try #require(try offset(of: Self.large.suffix(64), in: path))
        try flipByte(at: tail + 10, in: path)
        let late = try BundleServing(
            handle: LoaderHandle(OfflineLoader(bundles: [MountedBundle(path: path, options: .init(checkBeforeSend: 16 << 10))])))
        let (cut, _) = await Self.respond(late, "GET", "/large.bin", hop: hop.hop)
        guard case .response(200, _, .stream(let chunks), _) = cut else {
            Issue.record("the damage near the end was found before the head: \(cut)")
            return
        }
        var sent = 0
        let error = await #expect(throws: BundleError.self) {
            for try await chunk in chunks { sent += chunk.count }
        }
        #expect(error?.code == .corruptBody && sent > 0 && sent < Self.large.count, "\(sent) bytes went out")
    }

    @Test("the access log hears the final status of what the transport answered, a miss's from the next responder, and an error's")
    func logging() async throws {
        let folder = try TemporaryFolder()
        let lines = Mutex<[ServedRequest]>([])
        let serving = try BundleServing(
            handle: LoaderHandle(OfflineLoader(path: Self.write(in: folder))), policy: ServerPolicy(accessLog: { line in lines.withLock { $0.append(line) } }))
        let answered = try await serving.logging(method: "GET", target: "/", client: "10.0.0.3") { source in
            source = .rule
            return 200
        } outcome: {
            ($0, "11")
        } failed: { _ in
            500
        }
        #expect(answered == 200)
        await #expect(throws: CancellationError.self) {
            try await serving.logging(method: "GET", target: "/gone", client: nil) { _ -> Int in
                throw CancellationError()
            } outcome: {
                ($0, nil)
            } failed: { _ in
                502
            }
        }
        let logged = lines.withLock { $0 }
        #expect(logged.map(\.status) == [200, 502])
        #expect(logged.first?.client == "10.0.0.3" && logged.first?.contentLength == "11" && logged.first?.source == .rule)
    }
}
