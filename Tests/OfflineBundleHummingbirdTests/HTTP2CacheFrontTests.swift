import Foundation
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import OfflineBundle
import TestSupport
import Testing

@testable import OfflineBundleServing

@Suite("HTTP2CacheFront: a request the cache of whole answers holds is answered on the connection; any other goes on to the streams")
struct HTTP2CacheFrontTests {
    /// A front over a cache that holds `GET /page.html` for Host `docs.example.com` (no Accept-Encoding), and what it
    /// logged.
    func front(in folder: TemporaryFolder, body: Data = Data("hello".utf8), held: HeldWrites? = nil) throws -> (EmbeddedChannel, ServedLog, LoaderHandle) {
        try writeBundle(["https://docs.example.com/page.html": body], to: folder.path + "/b.zip")
        let served = ServedLog()
        let handle = LoaderHandle(try OfflineLoader(path: folder.path + "/b.zip"))
        let serving = BundleServing(
            handle: handle, routes: [.init(origin: "https://docs.example.com")],
            policy: ServerPolicy(accessLog: { served.add($0) }))
        let cache = ResponseCache(budget: 16 << 20)
        var answer = ResponseCache.Answer(
            status: 200, head: ByteBuffer(string: "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: \(body.count)\r\n"),
            body: .bytes(ByteBuffer(bytes: body)), age: nil, contentLength: String(body.count), source: .bundle("b.zip"))
        answer.http2Fields = HTTP2Head.fields(
            status: 200, fields: [.contentType: "text/html", .contentLength: String(body.count)], serverName: nil)
        cache.keep(answer, for: .init(host: "docs.example.com", target: "/page.html", acceptEncoding: nil), generation: serving.handle.snapshot.generation)
        let settings = BundleChannelHandler.Settings(serving: serving, serverName: nil, idleTimeout: .seconds(60))
        let channel = EmbeddedChannel()
        if let held { try channel.pipeline.syncOperations.addHandler(held) }
        let gate = BodyGate(limit: 2, stallPeriod: .seconds(2), loop: channel.eventLoop)
        try channel.pipeline.syncOperations.addHandler(HTTP2CacheFront(settings: settings, cache: cache, gate: gate))
        return (channel, served, handle)
    }

    func request(_ stream: Int, _ extra: [(String, String)] = [], authority: String = "docs.example.com", endStream: Bool = true) -> HTTP2Frame {
        var fields = HPACKHeaders([(":method", "GET"), (":scheme", "https"), (":path", "/page.html"), (":authority", authority)])
        for (name, value) in extra { fields.add(name: name, value: value) }
        return HTTP2Frame(streamID: HTTP2StreamID(stream), payload: .headers(.init(headers: fields, endStream: endStream)))
    }

    @Test(
        "a kept answer: a HEADERS frame with the kept fields, Date, and a DATA frame that ends the stream; the request goes no further; one access-log line, HTTP/2.0"
    )
    func answersWhatIsKept() throws {
        let folder = try TemporaryFolder()
        let (channel, served, _) = try front(in: folder)
        try channel.writeInbound(request(1))
        channel.pipeline.fireChannelReadComplete()
        #expect(try channel.readInbound(as: HTTP2Frame.self) == nil)
        let head = try #require(try channel.readOutbound(as: HTTP2Frame.self))
        guard case .headers(let headers) = head.payload else {
            Issue.record("not HEADERS: \(head.payload)")
            return
        }
        #expect(head.streamID == 1 && !headers.endStream)
        #expect(headers.headers.first(name: ":status") == "200" && headers.headers.first(name: "content-type") == "text/html")
        #expect(headers.headers.first(name: "date") != nil && headers.headers.first(name: "content-length") == "5")
        let data = try #require(try channel.readOutbound(as: HTTP2Frame.self))
        guard case .data(let body) = data.payload, case .byteBuffer(let bytes) = body.data else {
            Issue.record("not DATA")
            return
        }
        #expect(String(buffer: bytes) == "hello" && body.endStream)
        #expect(served.all.map { "\($0.method) \($0.target) \($0.status) \($0.version)" } == ["GET /page.html 200 HTTP/2.0"])
        _ = try channel.finish()
    }

    @Test(
        "kept bodies are not sent past 4 MiB in flight on a connection (a client whose windows take nothing holds them): the next goes on to the streams, until the socket took them"
    )
    func boundsKeptBytesInFlight() throws {
        let folder = try TemporaryFolder()
        let held = HeldWrites()
        let (channel, _, _) = try front(in: folder, body: noise(3 << 20, seed: 5), held: held)
        func passedOn(_ stream: Int) throws -> Bool {
            try channel.writeInbound(request(stream))
            return try channel.readInbound(as: HTTP2Frame.self)?.streamID == HTTP2StreamID(stream)
        }
        // The first goes; with it not taken, a second would make 6 MiB in flight: it goes on.
        #expect(try !passedOn(1))
        #expect(try passedOn(3))
        #expect(held.frames.map(\.streamID) == [1, 1])
        // Taken by the socket: their promises complete, nothing is in flight.
        held.release()
        #expect(try !passedOn(5))
        _ = try channel.finish()
    }

    @Test("a request that took its loader before a reload finds nothing kept, and leaves what the newer loader's answers kept")
    func olderGenerationLeavesTheCache() throws {
        let cache = ResponseCache(budget: 1 << 20)
        let key = ResponseCache.Key(host: "docs.example.com", target: "/page.html", acceptEncoding: nil)
        let answer = ResponseCache.Answer(
            status: 200, head: ByteBuffer(string: "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n"), body: .bytes(ByteBuffer(string: "hello")), age: nil,
            contentLength: "5", source: .bundle("b.zip"))
        #expect(cache.answer(for: key, generation: 2) == nil)
        cache.keep(answer, for: key, generation: 2)
        #expect(cache.answer(for: key, generation: 2) != nil)
        #expect(cache.answer(for: key, generation: 1) == nil, "an older loader's request is not answered from the newer one's answers")
        #expect(cache.answer(for: key, generation: 2) != nil, "and does not empty the cache")
        cache.keep(answer, for: key, generation: 1)
        #expect(cache.answer(for: key, generation: 3) == nil, "a newer generation empties it")
    }

    @Test(
        "not answered here, and passed on untouched: a Range, a conditional, two Hosts, another Host, a body to come, a reload, trailers, an unwritable connection"
    )
    func passesOnTheRest() throws {
        let folder = try TemporaryFolder()
        let (channel, served, handle) = try front(in: folder)
        var stream = 1
        func passedOn(_ frame: HTTP2Frame, _ what: String) throws {
            try channel.writeInbound(frame)
            #expect(try channel.readInbound(as: HTTP2Frame.self)?.streamID == frame.streamID, "\(what)")
            #expect(try channel.readOutbound(as: HTTP2Frame.self) == nil, "\(what) was answered")
        }
        for (extra, what) in [
            ([("range", "bytes=0-1")], "range"), ([("if-none-match", "*")], "if-none-match"), ([("if-modified-since", "x")], "if-modified-since"),
            ([("host", "docs.example.com"), ("host", "docs.example.com")], "two hosts"),
            ([("accept-encoding", "gzip"), ("accept-encoding", "br")], "two accept-encodings"),
        ] {
            try passedOn(request(stream, extra), what)
            stream += 2
        }
        try passedOn(request(stream, authority: "other.example.com"), "another host")
        stream += 2
        // A HEADERS frame that does not end its stream: a body follows; then its trailers on the same stream.
        try passedOn(request(stream, endStream: false), "a body to come")
        try passedOn(request(stream), "trailers")
        stream += 2
        channel.isWritable = false
        try passedOn(request(stream), "unwritable")
        stream += 2
        channel.isWritable = true
        // The answer was kept from the bundle mounted before the reload.
        handle.replace(with: try OfflineLoader(path: folder.path + "/b.zip"))
        try passedOn(request(stream), "after a reload")
        #expect(served.all.isEmpty)
        _ = try channel.finish()
    }
}

/// Stands for a socket that takes nothing until told: writes are kept with their promises.
final class HeldWrites: ChannelOutboundHandler, @unchecked Sendable {
    typealias OutboundIn = HTTP2Frame
    private(set) var frames: [HTTP2Frame] = []
    private var promises: [EventLoopPromise<Void>] = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        frames.append(unwrapOutboundIn(data))
        if let promise { promises.append(promise) }
    }

    func flush(context: ChannelHandlerContext) {}

    /// The socket took every write so far.
    func release() {
        let taken = promises
        promises.removeAll()
        for promise in taken { promise.succeed() }
    }
}
