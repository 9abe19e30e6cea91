import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import OfflineBundle
import TestSupport
import Testing

@testable import OfflineBundleServing

@Suite("CachedAnswerFront: kept answers given off the connection's bytes, every other request through NIO's decoder, in order")
struct CachedAnswerFrontTests {
    /// Heads that real clients send, and hostile ones.
    static let heads = [
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
        "GET /library/functions.html HTTP/1.1\r\nHost: docs.example.com\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n",
        "GET /a?b=c&d=%20e HTTP/1.1\r\nhost:docs.example.com\r\nACCEPT-ENCODING:\tgzip, br\r\nConnection: keep-alive\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, Upgrade\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "GET /x HTTP/1.0\r\n\r\n",
        "HEAD /x HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a \r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
        "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\nhello",
        "GET /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a\r\n Folded: value\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a\nX: y\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a\r\nX: \u{7f}\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
        "GET http://a/x HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /x HTTP/2.0\r\nHost: a\r\n\r\n",
        "GET  /x HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"1\"\r\nRange: bytes=0-1\r\n\r\n",
        "POST /api HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}",
    ]

    @Test(
        "what PlainRequestHead reads as a whole request, NIO's decoder reads the same (target, Host, Accept-Encoding, no body, the same length) or refuses, and never refuses one it answers; over real heads, hostile ones and 20,000 mutations of them"
    )
    func agreesWithNIOsDecoder() throws {
        var random = SeededRandom(seed: 11)
        var cases = Self.heads.map { Array($0.utf8) }
        let interesting: [UInt8] = [0, 9, 10, 13, 32, 0x3A, 0x2F, 0x7F, 0x80, 0xFF, 0x61, 0x2C, 0x22]
        for _ in 0..<20_000 {
            var bytes = Array(Self.heads[Int(random.next() % UInt64(3))].utf8)
            for _ in 0..<(1 + Int(random.next() % 3)) {
                let at = Int(random.next() % UInt64(bytes.count))
                let byte = interesting[Int(random.next() % UInt64(interesting.count))]
                switch random.next() % 3 {
                case 0: bytes[at] = byte
                case 1: bytes.insert(byte, at: at)
                default: bytes.remove(at: at)
                }
            }
            cases.append(bytes)
        }
        var read = 0
        var answerable = 0
        for bytes in cases {
            let reading = bytes.withUnsafeBytes { PlainRequestHead.read($0) }
            guard case .request(let head) = reading else { continue }
            read += 1
            let text = String(decoding: bytes, as: UTF8.self).debugDescription
            // The decoder, given exactly the bytes of the head, finds a head and the end of a request without a body.
            // A request the front hands on may be one the decoder refuses (a method llhttp does not know): a 400, as
            // without the front. One it answers, the decoder takes.
            let channel = EmbeddedChannel(handler: ByteToMessageHandler(HTTPRequestDecoder()))
            do {
                try channel.writeInbound(ByteBuffer(bytes: bytes[..<head.length]))
            } catch {
                #expect(!head.answerable, "the decoder refused what the plain reading answers: \(text): \(error)")
                continue
            }
            guard case .head(let decoded)? = try channel.readInbound(as: HTTPServerRequestPart.self) else {
                Issue.record("no head from the decoder: \(text)")
                continue
            }
            let end = try channel.readInbound(as: HTTPServerRequestPart.self)
            #expect(end == .end(nil), "the decoder read more than a head: \(text)")
            let field = { (range: Range<Int>?) in range.map { String(decoding: bytes[$0], as: UTF8.self) } }
            #expect(decoded.uri == field(head.target), "\(text)")
            #expect(decoded.headers["host"].first == field(head.host), "\(text)")
            if head.answerable {
                answerable += 1
                #expect(decoded.method == .GET && decoded.version == .http1_1 && decoded.isKeepAlive, "\(text)")
                #expect(decoded.headers["host"].count == 1, "\(text)")
                #expect(decoded.headers["accept-encoding"].first == field(head.acceptEncoding), "\(text)")
                let asked = BundleChannelHandler.Asked(decoded.headers)
                #expect(
                    asked.plain
                        && asked.key(for: decoded.uri)
                            == ResponseCache.Key(host: field(head.host), target: decoded.uri, acceptEncoding: field(head.acceptEncoding)),
                    "\(text)")
            }
            _ = try? channel.finish()
        }
        // The corpus exercises both sides: many heads read, many not.
        #expect(read > 2_000 && read < cases.count - 2_000, "\(read) of \(cases.count) read")
        #expect(answerable > 1_000, "\(answerable) answerable")
    }

    @Test("a head is read once its blank line has come, however it was cut; a bare line feed, or a head past 8 KiB without an end, goes to the decoder")
    func incompleteHeads() {
        let whole = Array("GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b".utf8)
        for cut in 1..<28 {
            let reading = whole.withUnsafeBytes { PlainRequestHead.read(UnsafeRawBufferPointer(rebasing: $0[..<cut]), searched: max(0, cut - 1)) }
            if case .incomplete = reading {} else { Issue.record("cut at \(cut): \(reading)") }
        }
        let reading = whole.withUnsafeBytes { PlainRequestHead.read($0, searched: 27) }
        if case .request(let head) = reading { #expect(head.length == 28 && head.answerable) } else { Issue.record("\(reading)") }
        let bare = Array("GET /a HTTP/1.1\nHost: a\n\n".utf8)
        if case .other = bare.withUnsafeBytes({ PlainRequestHead.read($0) }) {} else { Issue.record("a bare line feed is the decoder's") }
        let long = Array(("GET /a HTTP/1.1\r\nX: " + String(repeating: "y", count: 9000)).utf8)
        if case .other = long.withUnsafeBytes({ PlainRequestHead.read($0) }) {} else { Issue.record("a long head is the decoder's") }
    }

    /// A server of two pages and a large text whose body is inflated as it goes out (so its answer is read off the event
    /// loop, and the requests behind it wait), and what a raw client saw.
    func exchange(_ folder: TemporaryFolder, _ script: String) async throws -> [String] {
        let large = Data((0..<300_000).map { "line \($0) of a long text\n" }.joined().utf8)
        try writeBundle(
            [
                "https://docs.example.com/a.html": Data("<p>page a</p>".utf8), "https://docs.example.com/b.html": Data("<p>page b</p>".utf8),
                "https://docs.example.com/large.txt": large,
            ], to: folder.path + "/b.zip")
        let server = try await OfflineBundleChannelServer.start(
            handle: LoaderHandle(try OfflineLoader(path: folder.path + "/b.zip")), routes: [.init(origin: "https://docs.example.com")])
        try folder.file(
            "c.py",
            #"""
            import re, socket, sys, time
            def connect():
                s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            def answers(s, count):
                # Each answer's status, length and first bytes of body, in the order they came.
                got, out = b"", []
                while len(out) < count:
                    while b"\r\n\r\n" not in got:
                        chunk = s.recv(1 << 20)
                        if not chunk: return out + ["closed"]
                        got += chunk
                    head, got = got.split(b"\r\n\r\n", 1)
                    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
                    while len(got) < length:
                        got += s.recv(1 << 20)
                    body, got = got[:length], got[length:]
                    out.append(head.split(b" ")[1].decode() + " " + str(length) + " " + body[:12].decode(errors="replace"))
                return out
            def get(path, extra=b""):
                return b"GET " + path + b" HTTP/1.1\r\nHost: docs.example.com\r\n" + extra + b"\r\n"
            """# + "\n" + script)
        let lines = try await run("python3", [folder.path + "/c.py", String(server.port)]).output.split(separator: "\n").map(String.init)
        await server.stop()
        return lines
    }

    @Test(
        "a kept answer asked behind a large one being read off the event loop waits for it: pipelined, the answers come in the order asked"
    )
    func keptAnswersKeepTheOrder() async throws {
        let folder = try TemporaryFolder()
        let lines = try await exchange(
            folder,
            #"""
            s = connect()
            s.sendall(get(b"/a.html")); print(answers(s, 1)[0])
            s.sendall(get(b"/a.html") + get(b"/large.txt") + get(b"/a.html") + get(b"/b.html") + get(b"/a.html"))
            for line in answers(s, 5): print(line)
            """#)
        let large = String(Data((0..<300_000).map { "line \($0) of a long text\n" }.joined().utf8).count)
        #expect(
            lines == [
                "200 13 <p>page a</p", "200 13 <p>page a</p", "200 \(large) line 0 of a ", "200 13 <p>page a</p", "200 13 <p>page b</p",
                "200 13 <p>page a</p",
            ],
            "\(lines)")
    }

    @Test(
        "a kept answer's request sent a byte at a time is answered; after a request with a body, every request goes through the decoder and is answered; a HEAD of a kept answer has no body"
    )
    func cutRequestsAndBodies() async throws {
        let folder = try TemporaryFolder()
        let lines = try await exchange(
            folder,
            #"""
            s = connect()
            s.sendall(get(b"/a.html")); print(answers(s, 1)[0])
            for byte in get(b"/a.html", b"User-Agent: slow\r\n"):
                s.sendall(bytes([byte])); time.sleep(0.002)
            print(answers(s, 1)[0])
            s.sendall(b"POST /a.html HTTP/1.1\r\nHost: docs.example.com\r\nContent-Length: 3\r\n\r\nabc" + get(b"/a.html") + get(b"/b.html"))
            for line in answers(s, 3): print(line)
            t = connect()
            t.sendall(get(b"/a.html") + b"HEAD /a.html HTTP/1.1\r\nHost: docs.example.com\r\n\r\n")
            got = b""
            while got.count(b"\r\n\r\n") < 2 or not got.endswith(b"\r\n\r\n"):
                got += t.recv(65536)
            print(got.count(b"HTTP/1.1 200 OK"), got.endswith(b"\r\n\r\n"), got.count(b"<p>page a</p>"))
            """#)
        #expect(
            lines == ["200 13 <p>page a</p", "200 13 <p>page a</p", "404 0 ", "200 13 <p>page a</p", "200 13 <p>page b</p", "2 True 1"], "\(lines)")
    }
}

extension CachedAnswerFrontTests {
    @Test("with an access log, an answer given by the front is recorded as any other: its target, status, source, and that the cache gave it")
    func keptAnswersAreLogged() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        let records = ServedLog()
        let server = try await OfflineBundleChannelServer.start(
            handle: LoaderHandle(try OfflineLoader(path: folder.path + "/b.zip")), routes: [.init(origin: "https://docs.example.com")],
            policy: ServerPolicy(accessLog: { records.add($0) }))
        let base = "http://127.0.0.1:\(server.port)"
        // Three requests on one connection: the first is answered behind the decoder and kept; the others by the front.
        let pages = try await run("curl", ["-s", base + "/", base + "/", base + "/?x"])
        await server.stop()
        #expect(pages.output.hasPrefix(samplePage + samplePage))
        let lines = records.all.map { "\($0.method) \($0.target) \($0.status) \($0.source.map { "\($0)" } ?? "-") \($0.fromCache)" }
        #expect(lines.prefix(2) == ["GET / 200 b.zip false", "GET / 200 b.zip true"], "\(lines)")
        #expect(lines.count == 3 && lines[2].hasPrefix("GET /?x "), "\(lines)")
    }
}

/// A small generator with a seed, so a mutated corpus is the same on every run.
struct SeededRandom {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
