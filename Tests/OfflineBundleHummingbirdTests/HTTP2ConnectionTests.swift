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

/// A client's side of an HTTP/2 connection as bytes: frames written by hand, header blocks by NIOHPACK's encoder, and
/// what the server wrote read back as frames, header blocks decoded by NIOHPACK's decoder.
struct H2Peer {
    struct Frame {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: ByteBuffer

        var endStream: Bool { flags & 0x1 != 0 }
        /// GOAWAY's or RST_STREAM's error code.
        var errorCode: UInt32? {
            switch type {
            case 0x3: payload.getInteger(at: payload.readerIndex, as: UInt32.self)
            case 0x7: payload.getInteger(at: payload.readerIndex + 4, as: UInt32.self)
            default: nil
            }
        }
    }

    var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
    var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    private var received = ByteBuffer()

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: ByteBuffer = ByteBuffer()) -> ByteBuffer {
        var out = ByteBuffer()
        HTTP2Wire.writeHeader(length: payload.readableBytes, type: type, flags: flags, stream: stream, into: &out)
        out.writeImmutableBuffer(payload)
        return out
    }

    /// The preface and a SETTINGS frame of `settings`.
    static func preface(_ settings: [(UInt16, UInt32)] = []) -> ByteBuffer {
        var out = ByteBuffer(bytes: HTTP2Wire.preface)
        HTTP2Wire.writeSettings(settings, into: &out)
        return out
    }

    static func request(_ extra: [(String, String)] = [], path: String = "/page.html", authority: String = "docs.example.com", method: String = "GET")
        -> HPACKHeaders
    {
        var fields = HPACKHeaders([(":method", method), (":scheme", "https"), (":path", path), (":authority", authority)])
        for (name, value) in extra { fields.add(name: name, value: value) }
        return fields
    }

    /// A HEADERS frame with END_HEADERS.
    mutating func headers(_ stream: UInt32, _ fields: HPACKHeaders, endStream: Bool = true) throws -> ByteBuffer {
        try Self.frame(0x1, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, block(fields))
    }

    mutating func block(_ fields: HPACKHeaders) throws -> ByteBuffer {
        var out = ByteBuffer()
        try encoder.encode(headers: fields, to: &out)
        return out
    }

    static func windowUpdate(_ stream: UInt32, _ increment: Int) -> ByteBuffer {
        var out = ByteBuffer()
        HTTP2Wire.writeWindowUpdate(stream, increment: increment, into: &out)
        return out
    }

    static func rst(_ stream: UInt32) -> ByteBuffer {
        var out = ByteBuffer()
        HTTP2Wire.writeRstStream(stream, code: .cancel, into: &out)
        return out
    }

    /// The frames the server wrote since the last call.
    mutating func frames(from channel: EmbeddedChannel) throws -> [Frame] {
        while let data = try channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(var bytes) = data else { throw Unexpected() }
            received.writeBuffer(&bytes)
        }
        var frames: [Frame] = []
        while let header = HTTP2Wire.header(at: received), received.readableBytes >= 9 + header.length {
            received.moveReaderIndex(forwardBy: 9)
            frames.append(Frame(type: header.type, flags: header.flags, stream: header.stream, payload: received.readSlice(length: header.length)!))
        }
        return frames
    }

    /// A HEADERS frame's fields.
    mutating func fields(_ frame: Frame) throws -> HPACKHeaders {
        var block = frame.payload
        return try decoder.decodeHeaders(from: &block)
    }

    struct Unexpected: Error {}
}

@Suite("HTTP2Connection: HTTP/2 read and written on the connection, kept answers given there, the rest passed on to the streams")
struct HTTP2ConnectionTests {
    /// A connection over a cache that holds `GET /page.html` for Host `docs.example.com` (no Accept-Encoding), what it
    /// logged, and what it passed on (frames and events, in order).
    func connection(
        in folder: TemporaryFolder, body: Data = Data("hello".utf8), limits: HTTP2Connection.Limits = .init(), held: (any ChannelHandler & Sendable)? = nil
    ) throws -> (EmbeddedChannel, ServedLog, LoaderHandle, PassedOn) {
        try writeBundle(["https://docs.example.com/page.html": body], to: folder.path + "/b.zip")
        let served = ServedLog()
        let handle = LoaderHandle(try OfflineLoader(path: folder.path + "/b.zip"))
        let serving = BundleServing(
            handle: handle, routes: [.init(origin: "https://docs.example.com")], policy: ServerPolicy(accessLog: { served.add($0) }))
        let cache = ResponseCache(budget: 16 << 20)
        var answer = ResponseCache.Answer(
            status: 200, head: ByteBuffer(string: "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: \(body.count)\r\n"),
            body: .bytes(ByteBuffer(bytes: body)), age: nil, contentLength: String(body.count), source: .bundle("b.zip"))
        answer.http2Fields = HTTP2Head.fields(status: 200, fields: [.contentType: "text/html", .contentLength: String(body.count)], serverName: nil)
        cache.keep(answer, for: .init(host: "docs.example.com", target: "/page.html", acceptEncoding: nil), generation: serving.handle.snapshot.generation)
        let settings = BundleChannelHandler.Settings(serving: serving, serverName: nil, idleTimeout: .seconds(60))
        let channel = EmbeddedChannel()
        if let held { try channel.pipeline.syncOperations.addHandler(held) }
        let gate = BodyGate(limit: 2, stallPeriod: .seconds(2), loop: channel.eventLoop)
        let passed = PassedOn()
        try channel.pipeline.syncOperations.addHandler(HTTP2Connection(settings: settings, cache: cache, gate: gate, limits: limits))
        try channel.pipeline.syncOperations.addHandler(passed)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        return (channel, served, handle, passed)
    }

    /// The connection's start: the client's preface and SETTINGS in, the server's SETTINGS and its ACK out.
    func start(_ channel: EmbeddedChannel, _ peer: inout H2Peer, settings: [(UInt16, UInt32)] = []) throws {
        try channel.writeInbound(H2Peer.preface(settings))
        let frames = try peer.frames(from: channel)
        #expect(frames.map(\.type) == [0x4, 0x4])
        #expect(frames.first?.flags == 0 && frames.last?.flags == 0x1)
    }

    @Test(
        "a kept answer: a HEADERS frame that decodes to the kept fields and Date, and a DATA frame of the body that ends the stream; nothing passed on; one access-log line, HTTP/2.0"
    )
    func answersWhatIsKept() throws {
        let folder = try TemporaryFolder()
        let (channel, served, _, passed) = try connection(in: folder)
        var peer = H2Peer()
        try start(channel, &peer)
        for stream: UInt32 in [1, 3] {
            try channel.writeInbound(try peer.headers(stream, H2Peer.request()))
            let frames = try peer.frames(from: channel)
            #expect(frames.map(\.type) == [0x1, 0x0] && frames.allSatisfy { $0.stream == stream })
            let fields = try peer.fields(frames[0])
            #expect(fields.first(name: ":status") == "200" && fields.first(name: "content-type") == "text/html")
            #expect(fields.first(name: "date") != nil && fields.first(name: "content-length") == "5" && !frames[0].endStream)
            #expect(String(buffer: frames[1].payload) == "hello" && frames[1].endStream)
        }
        #expect(passed.log.isEmpty)
        #expect(served.all.map { "\($0.method) \($0.target) \($0.status) \($0.version)" } == Array(repeating: "GET /page.html 200 HTTP/2.0", count: 2))
        _ = try channel.finish()
    }

    @Test("a kept body goes out as the client's windows and frame size take it: within its initial window, then as WINDOW_UPDATEs open it")
    func keptBodyWithinWindows() throws {
        let folder = try TemporaryFolder()
        let body = noise(40_000, seed: 3)
        let (channel, _, _, _) = try connection(in: folder, body: body)
        var peer = H2Peer()
        // A stream window of 10 bytes.
        try start(channel, &peer, settings: [(HTTP2Wire.Setting.initialWindowSize, 10)])
        try channel.writeInbound(try peer.headers(1, H2Peer.request()))
        var frames = try peer.frames(from: channel)
        #expect(frames.map(\.type) == [0x1, 0x0] && frames[1].payload.readableBytes == 10 && !frames[1].endStream)
        var got = frames[1].payload
        // 30,000 more: two frames within the default frame size.
        try channel.writeInbound(H2Peer.windowUpdate(1, 30_000))
        frames = try peer.frames(from: channel)
        #expect(frames.map(\.payload.readableBytes) == [16_384, 13_616] && frames.allSatisfy { $0.type == 0x0 && !$0.endStream })
        for var frame in frames { got.writeBuffer(&frame.payload) }
        // Nothing without window.
        #expect(try peer.frames(from: channel).isEmpty)
        try channel.writeInbound(H2Peer.windowUpdate(1, 100_000))
        frames = try peer.frames(from: channel)
        #expect(frames.map(\.payload.readableBytes) == [9_990] && frames.last?.endStream == true)
        for var frame in frames { got.writeBuffer(&frame.payload) }
        #expect(Data(buffer: got) == body)
        _ = try channel.finish()
    }

    @Test(
        "not answered here: the request goes on as a HEADERS frame, then its stream's creation; its DATA, then the stream's window; its trailers; the stream's close once both sides ended"
    )
    func passesOnTheRest() throws {
        let folder = try TemporaryFolder()
        let (channel, served, handle, passed) = try connection(in: folder)
        var peer = H2Peer()
        try start(channel, &peer)
        var stream: UInt32 = 1
        for (extra, what) in [
            ([("range", "bytes=0-1")], "range"), ([("if-none-match", "*")], "if-none-match"), ([("if-modified-since", "x")], "if-modified-since"),
            ([("host", "docs.example.com"), ("host", "docs.example.com")], "two hosts"),
            ([("accept-encoding", "gzip"), ("accept-encoding", "br")], "two accept-encodings"),
        ] {
            try channel.writeInbound(try peer.headers(stream, H2Peer.request(extra)))
            #expect(passed.log.suffix(2) == ["headers \(stream) end", "created \(stream)"], "\(what)")
            #expect(try peer.frames(from: channel).isEmpty, "\(what) was answered")
            stream += 2
        }
        // Another Host; a reload since the answer was kept.
        try channel.writeInbound(try peer.headers(stream, H2Peer.request(authority: "other.example.com")))
        #expect(passed.log.suffix(2) == ["headers \(stream) end", "created \(stream)"])
        stream += 2
        handle.replace(with: try OfflineLoader(path: folder.path + "/b.zip"))
        try channel.writeInbound(try peer.headers(stream, H2Peer.request()))
        #expect(passed.log.suffix(2) == ["headers \(stream) end", "created \(stream)"])
        stream += 2
        // A request with a body: HEADERS, DATA (then the stream's window), trailers.
        try channel.writeInbound(try peer.headers(stream, H2Peer.request(method: "POST"), endStream: false))
        try channel.writeInbound(H2Peer.frame(0x0, stream: stream, ByteBuffer(string: "abc")))
        try channel.writeInbound(try peer.headers(stream, HPACKHeaders([("x-checksum", "1")])))
        #expect(passed.log.suffix(5) == ["headers \(stream)", "created \(stream)", "data \(stream) 3", "window \(stream) 65532", "headers \(stream) end"])
        // The stream answers: HEADERS, DATA that ends it; then its close.
        let answer = HTTP2Frame(streamID: HTTP2StreamID(Int(stream)), payload: .headers(.init(headers: [":status": "204"], endStream: true)))
        try channel.writeOutbound(answer)
        #expect(passed.log.last == "closed \(stream) -")
        let frames = try peer.frames(from: channel)
        let status = try peer.fields(frames[0]).first(name: ":status")
        #expect(frames.map(\.type) == [0x1] && frames[0].endStream && status == "204")
        #expect(served.all.isEmpty)
        _ = try channel.finish()
    }

    @Test("a client's reset closes its stream (and its channel, told why); resets past the limit end the connection with ENHANCE_YOUR_CALM")
    func rapidReset() throws {
        let folder = try TemporaryFolder()
        var limits = HTTP2Connection.Limits()
        limits.resets = 5
        let (channel, _, _, passed) = try connection(in: folder, limits: limits)
        var peer = H2Peer()
        try start(channel, &peer)
        for index in 0..<5 {
            let stream = UInt32(2 * index + 1)
            try channel.writeInbound(try peer.headers(stream, H2Peer.request(path: "/missing.html")))
            try channel.writeInbound(H2Peer.rst(stream))
            #expect(passed.log.last == "closed \(stream) 8")
        }
        #expect(try peer.frames(from: channel).isEmpty)
        try channel.writeInbound(try peer.headers(11, H2Peer.request(path: "/missing.html")))
        try channel.writeInbound(H2Peer.rst(11))
        let frames = try peer.frames(from: channel)
        #expect(frames.map(\.type) == [0x7] && frames[0].errorCode == HTTP2ErrorCodeValue.enhanceYourCalm.rawValue)
        #expect(!channel.isActive)
    }

    @Test("what a client sends wrong: each its error, a stream's (RST_STREAM) or the connection's (GOAWAY, closed), as RFC 9113 says")
    func protocolErrors() throws {
        let folder = try TemporaryFolder()
        var peer = H2Peer()
        /// What the connection answers to `bytes` after a good start (with `setup` first).
        func answer(_ bytes: [ByteBuffer], start wellStarted: Bool = true) throws -> (types: [UInt8], code: UInt32?, open: Bool) {
            let (channel, _, _, _) = try connection(in: folder)
            peer = H2Peer()
            if wellStarted { try start(channel, &peer) } else { _ = try peer.frames(from: channel) }
            for bytes in bytes where channel.isActive { try channel.writeInbound(bytes) }
            // SETTINGS, and the connection's window given back as DATA comes, are not the answer looked for.
            let frames = try peer.frames(from: channel).filter { $0.type != 0x4 && $0.type != 0x8 }
            let open = channel.isActive
            if open { _ = try channel.finish() }
            return (frames.map(\.type), frames.last?.errorCode, open)
        }
        let goAway: UInt8 = 0x7
        let rst: UInt8 = 0x3
        func expectConnectionError(_ bytes: [ByteBuffer], _ code: HTTP2ErrorCodeValue, start: Bool = true, _ what: String) throws {
            let got = try answer(bytes, start: start)
            #expect(got.types == [goAway] && got.code == code.rawValue && !got.open, "\(what): \(got)")
        }
        func expectStreamError(_ bytes: [ByteBuffer], _ code: HTTP2ErrorCodeValue, _ what: String) throws {
            let got = try answer(bytes)
            #expect(got.types == [rst] && got.code == code.rawValue && got.open, "\(what): \(got)")
        }
        try expectConnectionError([ByteBuffer(string: "GET / HTTP/1.1\r\nHost: x\r\n\r\n")], .protocolError, start: false, "no preface")
        try expectConnectionError(
            [ByteBuffer(bytes: HTTP2Wire.preface), H2Peer.frame(0x6, ByteBuffer(repeating: 0, count: 8))], .protocolError, start: false, "PING first")
        try expectConnectionError([H2Peer.frame(0x0, stream: 1, ByteBuffer(repeating: 0, count: 20_000))], .frameSizeError, "a frame past 16,384 bytes")
        try expectConnectionError([H2Peer.frame(0x0, stream: 1, ByteBuffer(string: "x"))], .protocolError, "DATA on a stream never opened")
        try expectConnectionError([try peer.headers(2, H2Peer.request())], .protocolError, "HEADERS on a server's stream")
        try expectConnectionError(
            [H2Peer.frame(0x1, flags: 0x5, stream: 1, ByteBuffer(bytes: [0xff, 0xff, 0xff, 0xff]))], .compressionError, "a block that cannot be decoded")
        try expectConnectionError([H2Peer.windowUpdate(0, 0x7fff_ffff)], .flowControlError, "a connection window past 2^31-1")
        try expectConnectionError([H2Peer.windowUpdate(0, 0)], .protocolError, "a WINDOW_UPDATE of 0 on the connection")
        var settings = ByteBuffer()
        HTTP2Wire.writeSettings([(HTTP2Wire.Setting.initialWindowSize, 0x8000_0000)], into: &settings)
        try expectConnectionError([settings], .flowControlError, "an initial window past 2^31-1")
        settings.clear()
        HTTP2Wire.writeSettings([(HTTP2Wire.Setting.maxFrameSize, 100)], into: &settings)
        try expectConnectionError([settings], .protocolError, "a frame size under 16,384")
        try expectConnectionError([H2Peer.frame(0x4, stream: 0, ByteBuffer(repeating: 0, count: 5))], .frameSizeError, "SETTINGS not of 6-byte settings")
        try expectConnectionError([H2Peer.frame(0x5, stream: 1, ByteBuffer(repeating: 0, count: 4))], .protocolError, "PUSH_PROMISE from a client")
        try expectConnectionError([H2Peer.frame(0x9, flags: 0x4, stream: 1, ByteBuffer())], .protocolError, "CONTINUATION without HEADERS")
        // A HEADERS frame without END_HEADERS, then six CONTINUATION frames of one byte each.
        var block = try peer.block(H2Peer.request())
        var flood = [H2Peer.frame(0x1, flags: 0x1, stream: 1, block.readSlice(length: 1)!)]
        for _ in 0..<6 { flood.append(H2Peer.frame(0x9, stream: 1, block.readSlice(length: 1)!)) }
        try expectConnectionError(flood, .enhanceYourCalm, "CONTINUATION frames past five")
        try expectConnectionError(
            [H2Peer.frame(0x1, flags: 0x1, stream: 1, try peer.block(H2Peer.request())), H2Peer.frame(0x6, ByteBuffer(repeating: 0, count: 8))], .protocolError,
            "a PING inside a header block")
        try expectConnectionError([H2Peer.frame(0x0, stream: 0, ByteBuffer(string: "x"))], .protocolError, "DATA on stream 0")
        try expectConnectionError(
            [try peer.headers(3, H2Peer.request(method: "POST"), endStream: false), H2Peer.frame(0x0, stream: 2, ByteBuffer(string: "x"))], .protocolError,
            "DATA on a server's stream")
        try expectConnectionError([H2Peer.frame(0x3, stream: 5, ByteBuffer(repeating: 0, count: 4))], .protocolError, "RST_STREAM on a stream never opened")
        try expectConnectionError(
            [try peer.headers(3, H2Peer.request(path: "/missing.html")), try peer.headers(1, H2Peer.request(path: "/missing.html"))], .protocolError,
            "HEADERS on a lower stream, never opened")

        try expectStreamError([try peer.headers(1, H2Peer.request([("Upper-Case", "x")]))], .protocolError, "an uppercase field name")
        try expectStreamError([try peer.headers(1, H2Peer.request([("connection", "close")]))], .protocolError, "a connection field")
        try expectStreamError([try peer.headers(1, H2Peer.request([("te", "gzip")]))], .protocolError, "TE other than trailers")
        try expectStreamError([try peer.headers(1, H2Peer.request([("host", "other.example.com")]))], .protocolError, "a Host not :authority")
        try expectStreamError([try peer.headers(1, H2Peer.request(path: "/a b"))], .protocolError, "a space in :path")
        try expectStreamError([try peer.headers(1, H2Peer.request(path: "/a\u{1b}[2J"))], .protocolError, "an escape in :path")
        try expectStreamError([try peer.headers(1, HPACKHeaders([(":method", "GET"), (":scheme", "https")]))], .protocolError, "no :path")
        try expectStreamError(
            [try peer.headers(1, HPACKHeaders([("x-a", "1"), (":method", "GET"), (":scheme", "https"), (":path", "/")]))], .protocolError,
            "a pseudo-field after a field")
        try expectStreamError([try peer.headers(1, H2Peer.request([("content-length", "3")]))], .protocolError, "a Content-Length of 3 and no body")
        try expectStreamError(
            [
                try peer.headers(1, H2Peer.request([("content-length", "3")], method: "POST"), endStream: false),
                H2Peer.frame(0x0, flags: 0x1, stream: 1, ByteBuffer(string: "ab")),
            ],
            .protocolError, "a body shorter than its Content-Length")
        try expectStreamError(
            [
                try peer.headers(1, H2Peer.request(method: "POST"), endStream: false), H2Peer.frame(0x0, stream: 1, ByteBuffer(repeating: 0, count: 16_384)),
                H2Peer.frame(0x0, stream: 1, ByteBuffer(repeating: 0, count: 16_384)), H2Peer.frame(0x0, stream: 1, ByteBuffer(repeating: 0, count: 16_384)),
                H2Peer.frame(0x0, stream: 1, ByteBuffer(repeating: 0, count: 16_384)),
            ],
            .flowControlError, "DATA past the stream's window")
        try expectStreamError(
            [H2Peer.frame(0x2, stream: 1, ByteBuffer(repeating: 0, count: 4))].prefix(0) + [
                try peer.headers(1, H2Peer.request(), endStream: false), H2Peer.windowUpdate(1, 0),
            ], .protocolError, "a WINDOW_UPDATE of 0 on a stream")

        // A PING is answered with its payload; the connection stays.
        let (channel, _, _, _) = try connection(in: folder)
        peer = H2Peer()
        try start(channel, &peer)
        try channel.writeInbound(H2Peer.frame(0x6, ByteBuffer(bytes: [1, 2, 3, 4, 5, 6, 7, 8])))
        let frames = try peer.frames(from: channel)
        #expect(frames.map(\.type) == [0x6] && frames[0].flags == 0x1 && Array(buffer: frames[0].payload) == [1, 2, 3, 4, 5, 6, 7, 8])
        _ = try channel.finish()
    }

    @Test("a graceful end: GOAWAY with the last stream read; a stream opened after it is not read; the connection closes once the open stream's answer ended")
    func gracefulEnd() throws {
        let folder = try TemporaryFolder()
        let (channel, _, _, passed) = try connection(in: folder)
        var peer = H2Peer()
        try start(channel, &peer)
        try channel.writeInbound(try peer.headers(1, H2Peer.request(path: "/missing.html")))
        channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        var frames = try peer.frames(from: channel)
        #expect(
            frames.map(\.type) == [0x7] && frames[0].errorCode == 0 && frames[0].payload.getInteger(at: frames[0].payload.readerIndex, as: UInt32.self) == 1)
        try channel.writeInbound(try peer.headers(3, H2Peer.request(path: "/missing.html")))
        #expect(!passed.log.contains("headers 3 end"))
        #expect(channel.isActive)
        try channel.writeOutbound(HTTP2Frame(streamID: 1, payload: .headers(.init(headers: [":status": "404"], endStream: true))))
        frames = try peer.frames(from: channel)
        #expect(frames.map(\.type) == [0x1])
        #expect(!channel.isActive)
    }

    @Test(
        "kept bodies are not sent past 4 MiB in flight on a connection (a client that reads nothing holds them): the next goes on to the streams, until the socket took them"
    )
    func boundsKeptBytesInFlight() throws {
        let folder = try TemporaryFolder()
        let held = HeldBytes()
        let (channel, _, _, passed) = try connection(in: folder, body: noise(3 << 20, seed: 5), held: held)
        var peer = H2Peer()
        try channel.writeInbound(H2Peer.preface([(HTTP2Wire.Setting.initialWindowSize, 0x7fff_ffff)]))
        try channel.writeInbound(H2Peer.windowUpdate(0, 0x7fff_ffff - 65_535))
        try channel.writeInbound(try peer.headers(1, H2Peer.request()))
        #expect(passed.log.isEmpty)
        // With the first not taken, a second would make 6 MiB in flight: it goes on.
        try channel.writeInbound(try peer.headers(3, H2Peer.request()))
        #expect(passed.log == ["headers 3 end", "created 3"])
        held.release()
        try channel.writeInbound(try peer.headers(5, H2Peer.request()))
        #expect(passed.log.count == 2)
        // While the connection is not writable, kept answers go on to the streams.
        channel.isWritable = false
        try channel.writeInbound(try peer.headers(7, H2Peer.request()))
        #expect(passed.log.suffix(2) == ["headers 7 end", "created 7"])
        channel.isWritable = true
        _ = try channel.finish()
    }

    @Test("nothing more is read while the connection is not writable (a client that sends and does not read); it is read again once writable")
    func readsNothingWhileUnwritable() throws {
        let folder = try TemporaryFolder()
        let reads = ReadCount()
        let (channel, _, _, _) = try connection(in: folder, held: reads)
        channel.isWritable = false
        channel.read()
        #expect(reads.count == 0)
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(reads.count == 1)
        channel.read()
        #expect(reads.count == 2)
        _ = try channel.finish()
    }

    @Test(
        "a stream's frame written while the connection writes one of its own (a promise completed inside a write, whose callback resets a stream) goes after that frame, not between its header and its payload"
    )
    func writesInsideWritesWait() throws {
        let folder = try TemporaryFolder()
        let taker = TakesOnNextWrite()
        let (channel, _, _, passed) = try connection(in: folder, held: taker)
        var peer = H2Peer()
        try start(channel, &peer)
        try channel.writeInbound(try peer.headers(1, H2Peer.request(method: "POST"), endStream: false))
        try channel.writeInbound(try peer.headers(3, H2Peer.request(path: "/missing.html")))
        #expect(passed.log.contains("created 1") && passed.log.contains("created 3"))
        // Stream 3's head; once the socket took it (at the next write, its DATA frame's header), stream 1 is reset.
        let headWritten = channel.eventLoop.makePromise(of: Void.self)
        channel.write(HTTP2Frame(streamID: 3, payload: .headers(.init(headers: [":status": "404", "content-length": "5"]))), promise: headWritten)
        headWritten.futureResult.whenSuccess { channel.write(HTTP2Frame(streamID: 1, payload: .rstStream(.cancel)), promise: nil) }
        channel.write(HTTP2Frame(streamID: 3, payload: .data(.init(data: .byteBuffer(ByteBuffer(string: "gone!")), endStream: true))), promise: nil)
        channel.flush()
        let frames = try peer.frames(from: channel)
        #expect(frames.map(\.type) == [0x1, 0x0, 0x3] && frames.map(\.stream) == [3, 3, 1])
        #expect(frames.count == 3 && String(buffer: frames[1].payload) == "gone!" && frames[1].endStream)
        #expect(passed.log.suffix(2) == ["closed 3 -", "closed 1 8"])
        _ = try channel.finish()
    }

    @Test("streams refused past the concurrent limit count among the client's errors: past their limit, the connection ends")
    func refusalsCount() throws {
        let folder = try TemporaryFolder()
        var limits = HTTP2Connection.Limits()
        limits.maxConcurrentStreams = 1
        limits.glitches = 3
        let (channel, _, _, _) = try connection(in: folder, limits: limits)
        var peer = H2Peer()
        try start(channel, &peer)
        try channel.writeInbound(try peer.headers(1, H2Peer.request(method: "POST"), endStream: false))
        for stream: UInt32 in [3, 5, 7] {
            try channel.writeInbound(try peer.headers(stream, H2Peer.request()))
            let frames = try peer.frames(from: channel)
            #expect(frames.map(\.type) == [0x3] && frames.first?.errorCode == HTTP2ErrorCodeValue.refusedStream.rawValue)
        }
        try channel.writeInbound(try peer.headers(9, H2Peer.request()))
        let frames = try peer.frames(from: channel)
        #expect(frames.map(\.type) == [0x7] && frames.first?.errorCode == HTTP2ErrorCodeValue.enhanceYourCalm.rawValue)
        #expect(!channel.isActive)
    }

    @Test(
        "a graceful end with no stream open closes once the GOAWAY went out, not before; a later GOAWAY never names a higher stream than the first"
    )
    func gracefulEndWaitsForItsBytes() throws {
        let folder = try TemporaryFolder()
        let held = HeldBytes()
        let (channel, _, _, _) = try connection(in: folder, held: held)
        channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        #expect(channel.isActive, "closed before its GOAWAY was written")
        held.release()
        #expect(!channel.isActive)

        let (second, _, _, _) = try connection(in: folder)
        var peer = H2Peer()
        try start(second, &peer)
        try second.writeInbound(try peer.headers(1, H2Peer.request(method: "POST"), endStream: false))
        second.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        // A request crossing the GOAWAY, with a body and trailers: not read, and the connection goes on.
        try second.writeInbound(try peer.headers(3, H2Peer.request(method: "POST"), endStream: false))
        try second.writeInbound(H2Peer.frame(0x0, stream: 3, ByteBuffer(string: "abc")))
        try second.writeInbound(try peer.headers(3, HPACKHeaders([("x-checksum", "1")])))
        var sent = try peer.frames(from: second)
        #expect(second.isActive && sent.map(\.type) == [0x7])
        // A PING on a stream: a connection error, whose GOAWAY names stream 1 still.
        try second.writeInbound(H2Peer.frame(0x6, stream: 1, ByteBuffer(repeating: 0, count: 8)))
        sent += try peer.frames(from: second)
        let goAways = sent.filter { $0.type == 0x7 }
        #expect(goAways.map { $0.payload.getInteger(at: $0.payload.readerIndex, as: UInt32.self) } == [1, 1])
        #expect(goAways.last?.errorCode == HTTP2ErrorCodeValue.protocolError.rawValue && !second.isActive)
    }

    @Test("a head larger than the client's frame size goes as a HEADERS frame and CONTINUATION frames, which decode to it, the first ending the stream")
    func largeHeadIsSplit() throws {
        let folder = try TemporaryFolder()
        let (channel, _, _, _) = try connection(in: folder)
        var peer = H2Peer()
        try start(channel, &peer)
        try channel.writeInbound(try peer.headers(1, H2Peer.request(path: "/missing.html")))
        let long = String(repeating: "v", count: 40_000)
        try channel.writeOutbound(HTTP2Frame(streamID: 1, payload: .headers(.init(headers: [":status": "404", "x-long": long], endStream: true))))
        let frames = try peer.frames(from: channel)
        #expect(frames.map(\.type) == [0x1, 0x9, 0x9] && frames.map(\.flags) == [0x1, 0x0, 0x4])
        #expect(frames.map(\.payload.readableBytes).allSatisfy { $0 <= 16_384 })
        var block = ByteBuffer()
        for var frame in frames { block.writeBuffer(&frame.payload) }
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: 4096, maxHeaderListSize: 1 << 20)
        let fields = try decoder.decodeHeaders(from: &block)
        #expect(fields.first(name: ":status") == "404" && fields.first(name: "x-long") == long)
        _ = try channel.finish()
    }

    @Test("a Host the same as :authority but for its case or the scheme's default port is well formed; another host is not")
    func hostAndAuthority() {
        func verdict(_ host: String, scheme: String = "https") -> HTTP2RequestCheck.Verdict {
            HTTP2RequestCheck.request(
                HPACKHeaders([(":method", "GET"), (":scheme", scheme), (":path", "/"), (":authority", "docs.example.com"), ("host", host)]))
        }
        #expect(verdict("docs.example.com") == .wellFormed(contentLength: nil))
        #expect(verdict("DOCS.Example.com") == .wellFormed(contentLength: nil))
        #expect(verdict("docs.example.com:443") == .wellFormed(contentLength: nil))
        #expect(verdict("docs.example.com:80", scheme: "http") == .wellFormed(contentLength: nil))
        #expect(verdict("docs.example.com:80") == .malformed)
        #expect(verdict("other.example.com") == .malformed)
    }

    @Test("HPACKLiterals' blocks decode to the fields written: static names and whole fields, new names, long values, never-indexed ones")
    func literalsDecode() throws {
        var fields = HPACKHeaders()
        fields.add(name: ":status", value: "200")
        fields.add(name: ":status", value: "418")
        fields.add(name: "content-type", value: "text/html")
        fields.add(name: "x-long", value: String(repeating: "v", count: 5_000))
        fields.add(name: "set-cookie", value: "a=b", indexing: .neverIndexed)
        fields.add(name: "etag", value: "\"é\"")
        var block = ByteBuffer()
        HPACKLiterals.write(fields, tableSizeUpdate: true, into: &block)
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let decoded = try decoder.decodeHeaders(from: &block)
        #expect(decoded.map { "\($0.name): \($0.value)" } == fields.map { "\($0.name): \($0.value)" })
        #expect(decoded.map(\.indexable).last(where: { $0 == .neverIndexed }) != nil)
    }
}

/// What the connection passed on to the multiplexer's place: frames and events, as lines.
final class PassedOn: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame
    private(set) var log: [String] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers): log.append("headers \(Int(frame.streamID))" + (headers.endStream ? " end" : ""))
        case .data(let data): log.append("data \(Int(frame.streamID)) \(data.data.readableBytes)")
        default: log.append("frame \(Int(frame.streamID))")
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let created as NIOHTTP2StreamCreatedEvent: log.append("created \(Int(created.streamID))")
        case let closed as StreamClosedEvent: log.append("closed \(Int(closed.streamID)) \(closed.reason.map { String($0.networkCode) } ?? "-")")
        case let window as NIOHTTP2WindowUpdatedEvent: log.append("window \(Int(window.streamID)) \(window.inboundWindowSize ?? -1)")
        default: break
        }
    }
}

/// Counts the reads that reach the socket.
final class ReadCount: ChannelOutboundHandler, @unchecked Sendable {
    typealias OutboundIn = IOData
    private(set) var count = 0

    func read(context: ChannelHandlerContext) {
        count += 1
        context.read()
    }
}

/// Stands for a socket that takes a write when the next one comes: the earlier writes' promises complete inside the
/// later write (as a flush inside a write completes them).
final class TakesOnNextWrite: ChannelOutboundHandler, @unchecked Sendable {
    typealias OutboundIn = IOData
    private var held: [EventLoopPromise<Void>] = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let earlier = held
        held = promise.map { [$0] } ?? []
        context.write(data, promise: nil)
        for promise in earlier { promise.succeed() }
    }
}

/// Stands for a socket that takes nothing until told: writes are kept with their promises.
final class HeldBytes: ChannelOutboundHandler, @unchecked Sendable {
    typealias OutboundIn = IOData
    private var promises: [EventLoopPromise<Void>] = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
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
