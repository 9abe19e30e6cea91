import Foundation
import OfflineBundle
import OfflineBundleServing
import TestSupport
import Testing

@Suite("OfflineBundleChannelServer over HTTPS: HTTP/1.1 and HTTP/2 by ALPN, from the same handler")
struct SecureServingTests {
    static let origin = "https://docs.example.com"

    /// A server over HTTPS for the bundle at `path`, with the test's certificate (made in `folder`).
    func start(
        _ path: String, folder: TemporaryFolder, idleTimeout: Duration = .seconds(60), options: MountedBundle.Options = .init()
    ) async throws -> OfflineBundleChannelServer {
        try await makeTestCertificates(in: folder)
        let milliseconds = idleTimeout.components.seconds * 1000 + idleTimeout.components.attoseconds / 1_000_000_000_000_000
        return try await OfflineBundleChannelServer.start(
            handle: LoaderHandle(OfflineLoader(bundles: [try MountedBundle(path: path, options: options)])), routes: [.init(origin: Self.origin)],
            idleTimeout: .milliseconds(milliseconds),
            tls: .init(certificateChain: folder.path + "/server.pem", privateKey: folder.path + "/server.key"))
    }

    /// A server over HTTPS for the bundle at `path` whose access log goes to `served`, idle for 300 s before it closes a
    /// connection (a stream that makes no progress then gives its turn after 10 s).
    func startLogged(_ path: String, folder: TemporaryFolder, served: ServedLog, idleSeconds: Int64 = 300) async throws
        -> OfflineBundleChannelServer
    {
        try await makeTestCertificates(in: folder)
        return try await OfflineBundleChannelServer.start(
            handle: LoaderHandle(try OfflineLoader(path: path)), routes: [.init(origin: Self.origin)],
            policy: ServerPolicy(accessLog: { served.add($0) }), idleTimeout: .seconds(idleSeconds),
            tls: .init(certificateChain: folder.path + "/server.pem", privateKey: folder.path + "/server.key"))
    }

    /// A logged server over HTTPS for a bundle of one body of `size` bytes, `/page.bin` (kept whole by the cache once
    /// asked).
    func startWithPage(seed: UInt64, size: Int = 1 << 20) async throws -> (TemporaryFolder, ServedLog, OfflineBundleChannelServer) {
        let folder = try TemporaryFolder()
        try writeBundle(["\(Self.origin)/page.bin": noise(size, seed: seed)], to: folder.path + "/b.zip")
        let served = ServedLog()
        return (folder, served, try await startLogged(folder.path + "/b.zip", folder: folder, served: served))
    }

    /// Runs a raw HTTP/2 client that reads nothing until told: `body` is Python run after it connected (`s`, by h2raw),
    /// with the file to wait for as `sys.argv[3]`. Once `served` logged `logged` answers and a second more went by, the
    /// answers logged are counted, the client is told to read, and it is waited for: the count and what it printed.
    func runHeldClient(_ body: String, server: OfflineBundleChannelServer, folder: TemporaryFolder, served: ServedLog, logged: Int) async throws
        -> (started: Int, printed: String)
    {
        try writeRawHTTP2Client(in: folder)
        try folder.file("held.py", "import sys\nfrom h2raw import *\ns = connect(int(sys.argv[1]), sys.argv[2], timeout=120)\n" + body)
        let output = Pipe()
        let client = try launch(
            "/usr/bin/python3", [folder.path + "/held.py", String(server.port), folder.path + "/ca.pem", folder.path + "/go"], output: output)
        let waitUntil = Date().addingTimeInterval(60)
        while served.all.count < logged && Date() < waitUntil && client.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        try await Task.sleep(for: .seconds(1))
        let started = served.all.count
        try folder.file("go", "")
        while client.isRunning { try await Task.sleep(for: .milliseconds(100)) }
        return (started, String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    /// Writes `h2raw.py` into `folder`: the few HTTP/2 frames the raw clients below send (literal header fields, no
    /// HPACK table), over TLS with ALPN h2, and a reader of the frames that come back.
    func writeRawHTTP2Client(in folder: TemporaryFolder) throws {
        try folder.file(
            "h2raw.py",
            #"""
            import socket, ssl
            LARGEST = 2**31 - 1
            def connect(port, ca, timeout=20):
                context = ssl.create_default_context(cafile=ca)
                context.set_alpn_protocols(["h2"])
                s = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=timeout), server_hostname="127.0.0.1")
                assert s.selected_alpn_protocol() == "h2", s.selected_alpn_protocol()
                return s
            def window(stream, increment):
                return bytes([0, 0, 4, 8, 0]) + stream.to_bytes(4, "big") + increment.to_bytes(4, "big")
            def preface(stream_window=None, connection_window=None):
                """The connection preface and SETTINGS (with the initial stream window, if given), and the connection's
                window opened to `connection_window`, if given."""
                settings = b"" if stream_window is None else bytes([0, 4]) + stream_window.to_bytes(4, "big")
                out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + len(settings).to_bytes(3, "big") + bytes([4, 0, 0, 0, 0, 0]) + settings
                if connection_window is not None: out += window(0, connection_window - 65535)
                return out
            def get(stream, path):
                """HEADERS for a GET of `path`, ending the stream."""
                def literal(name, value): return bytes([0, len(name)]) + name + bytes([len(value)]) + value
                block = literal(b":method", b"GET") + literal(b":scheme", b"https") + literal(b":path", path.encode()) + literal(b":authority", b"127.0.0.1")
                return len(block).to_bytes(3, "big") + bytes([1, 5]) + stream.to_bytes(4, "big") + block
            def keep_first(s, path):
                """The preface with wide windows, and a GET of `path` read whole: kept by the server, under this client's Host."""
                s.sendall(preface(LARGEST, LARGEST) + get(1, path))
                for kind, flags, stream, length in frames(s):
                    if kind == 0 and flags & 1: break
            def read_after(s, go, streams):
                """Reads nothing until the file `go` appears (the test says so, however slow the machine), then reads
                until `streams` answers ended (END_STREAM on DATA), and prints how many did."""
                import os, time
                deadline = time.time() + 120
                while not os.path.exists(go) and time.time() < deadline:
                    time.sleep(0.05)
                ended = 0
                for kind, flags, stream, length in frames(s):
                    if kind == 0 and flags & 1: ended += 1
                    if ended == streams: break
                print("ended", ended)
            def frames_with_payload(s, size=1 << 20, after_read=None):
                """(type, flags, stream, payload) of each frame received, until the connection ends."""
                buffer = b""
                while True:
                    chunk = s.recv(size)
                    if not chunk: return
                    if after_read: after_read()
                    buffer += chunk
                    while len(buffer) >= 9:
                        length = int.from_bytes(buffer[0:3], "big")
                        if len(buffer) < 9 + length: break
                        yield buffer[3], buffer[4], int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF, buffer[9:9 + length]
                        buffer = buffer[9 + length:]
            def frames(s, size=1 << 20, after_read=None):
                """(type, flags, stream, length) of each frame received, until the connection ends."""
                for kind, flags, stream, payload in frames_with_payload(s, size, after_read):
                    yield kind, flags, stream, len(payload)
            """#)
    }

    @Test(
        "large bodies arrive whole over HTTP/1.1 and over HTTP/2, many streams at once on one connection: stored (spans of the file, read for TLS) and deflated (streamed off the event loop); a range and a HEAD"
    )
    func largeBodiesBothProtocols() async throws {
        let folder = try TemporaryFolder()
        let stored = noise(3 << 20, seed: 7)
        let text = Data((0..<60_000).map { "<p>line \($0) of a long page</p>\n" }.joined().utf8)
        try writeBundle(
            ["\(Self.origin)/big.bin": stored, "\(Self.origin)/long.html": text, "\(Self.origin)/small.html": Data("<p>small</p>".utf8)],
            to: folder.path + "/b.zip")
        let server = try await start(folder.path + "/b.zip", folder: folder)
        try await afterwards(server.stop) {
            let base = "https://127.0.0.1:\(server.port)"
            let ca = folder.path + "/ca.pem"
            let wanted: [(String, Data)] = [("/big.bin", stored), ("/long.html", text), ("/small.html", Data("<p>small</p>".utf8))]
            for version in ["--http1.1", "--http2"] {
                // Each body three times, at once: over HTTP/2 these are streams of one connection.
                var arguments = [
                    "-s", "--max-time", "30", "--cacert", ca, version, "--parallel", "--parallel-max", "9", "-w", "answer: %{http_version} %{http_code}\n",
                ]
                for round in 0..<3 {
                    for (path, _) in wanted { arguments += ["-o", folder.path + "/out-\(round)\(path.dropFirst())", base + path] }
                }
                let result = try await run("curl", arguments)
                let spoken = version == "--http2" ? "2" : "1.1"
                // (curl --parallel prints its progress on stderr even when silent.)
                let answers = result.output.split(separator: "\n").filter { $0.hasPrefix("answer: ") }
                #expect(answers == Array(repeating: Substring("answer: \(spoken) 200"), count: 9), "\(result.output)")
                for round in 0..<3 {
                    for (path, body) in wanted {
                        let got = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/out-\(round)\(path.dropFirst())"))
                        #expect(got == body, "\(version) \(path): \(got.count) bytes of \(body.count)")
                    }
                }
                let range = try await curlExchange(
                    base + "/big.bin", headers: [("Range", "bytes=1000000-1000099")], in: folder, curlOptions: ["--cacert", ca, version])
                #expect(range.status == 206 && range.body == stored[1_000_000..<1_000_100] && range.header("content-range") == "bytes 1000000-1000099/3145728")
                let head = try await curlExchange(base + "/long.html", method: "HEAD", in: folder, curlOptions: ["--cacert", ca, version])
                #expect(head.status == 200 && head.body.isEmpty && head.header("content-length") == String(text.count), "\(version)")
                // HTTP/2 forbids connection-specific fields; HTTP/1.1 answers carry none here either.
                #expect(head.header("connection") == nil && head.header("transfer-encoding") == nil)
            }
        }
    }

    @Test(
        "an HTTP/2 answer is a HEADERS frame and DATA frames, the last of which ends the stream (no empty DATA frame after it), the second time from the cache as the first; a HEAD's and a 404's are a HEADERS frame that ends the stream"
    )
    func answerFrames() async throws {
        let folder = try TemporaryFolder()
        let long = Data((0..<4000).map { "<p>line \($0)</p>\n" }.joined().utf8)
        try writeBundle(["\(Self.origin)/small.html": Data("<p>small</p>".utf8), "\(Self.origin)/long.html": long], to: folder.path + "/b.zip")
        let server = try await start(folder.path + "/b.zip", folder: folder)
        try await afterwards(server.stop) {
            try writeRawHTTP2Client(in: folder)
            try folder.file(
                "frames.py",
                #"""
                import sys
                from h2raw import *
                def request(stream, method, path):
                    def literal(name, value): return bytes([0, len(name)]) + name + bytes([len(value)]) + value
                    block = literal(b":method", method) + literal(b":scheme", b"https") + literal(b":path", path) + literal(b":authority", b"127.0.0.1")
                    return len(block).to_bytes(3, "big") + bytes([1, 5]) + stream.to_bytes(4, "big") + block
                s = connect(int(sys.argv[1]), sys.argv[2])
                asked = [(1, b"GET", b"/small.html"), (3, b"GET", b"/small.html"), (5, b"GET", b"/long.html"), (7, b"GET", b"/long.html"),
                         (9, b"HEAD", b"/long.html"), (11, b"GET", b"/missing.html")]
                s.sendall(preface(LARGEST, LARGEST))
                seen = {}
                for stream, method, path in asked:
                    # One at a time, so the second of each pair is answered from the cache the first filled.
                    s.sendall(request(stream, method, path))
                    for kind, flags, got, length in frames(s):
                        if got == stream and kind in (0, 1):
                            seen.setdefault(stream, []).append(f"{'HEADERS' if kind == 1 else 'DATA'}{'+END' if flags & 1 else ''}:{length if kind == 0 else ''}")
                            if flags & 1: break
                for stream, _, _ in asked: print(stream, " ".join(seen.get(stream, [])))
                """#)
            let result = try await run("/usr/bin/python3", [folder.path + "/frames.py", String(server.port), folder.path + "/ca.pem"])
            var frames: [Int: [String]] = [:]
            for line in result.output.split(separator: "\n") {
                let words = line.split(separator: " ").map(String.init)
                if let stream = Int(words.first ?? "") { frames[stream] = Array(words.dropFirst()) }
            }
            for stream in [1, 3] { #expect(frames[stream] == ["HEADERS:", "DATA+END:12"], "\(result.output)") }
            for stream in [5, 7] {
                let kinds = frames[stream] ?? []
                let lengths = kinds.dropFirst().compactMap { Int($0.split(separator: ":").last ?? "") }
                #expect(kinds.first == "HEADERS:" && kinds.last?.hasPrefix("DATA+END:") == true, "\(result.output)")
                #expect(kinds.dropFirst().dropLast().allSatisfy { $0.hasPrefix("DATA:") } && !lengths.contains(0), "\(result.output)")
                #expect(lengths.reduce(0, +) == long.count, "\(result.output)")
            }
            for stream in [9, 11] { #expect(frames[stream] == ["HEADERS+END:"], "\(result.output)") }
        }
    }

    @Test(
        "over HTTP/2 a kept answer is given on the connection while its bundle is the one mounted: the same bytes and fields as the first time, a line each in the access log; after a reload the new bundle answers; Range and conditional requests go to the handler"
    )
    func keptAnswersFollowTheMountedBundle() async throws {
        let folder = try TemporaryFolder()
        let first = Data("<p>the first release</p>".utf8)
        let second = Data("<p>the second release, longer</p>".utf8)
        try writeBundle(["\(Self.origin)/page.html": first], to: folder.path + "/a.zip")
        try writeBundle(["\(Self.origin)/page.html": second], to: folder.path + "/b.zip")
        try await makeTestCertificates(in: folder)
        let served = ServedLog()
        let handle = LoaderHandle(try OfflineLoader(path: folder.path + "/a.zip"))
        let server = try await OfflineBundleChannelServer.start(
            handle: handle, routes: [.init(origin: Self.origin)], policy: ServerPolicy(accessLog: { served.add($0) }),
            tls: .init(certificateChain: folder.path + "/server.pem", privateKey: folder.path + "/server.key"))
        try await afterwards(server.stop) {
            let url = "https://127.0.0.1:\(server.port)/page.html"
            let tls = ["--cacert", folder.path + "/ca.pem", "--http2"]
            let asked = try await curlExchange(url, in: folder, curlOptions: tls)
            let kept = try await curlExchange(url, in: folder, curlOptions: tls)
            #expect(asked.status == 200 && asked.body == first && kept.status == 200 && kept.body == first)
            // Every field as the first time, but the Date of the second it was sent.
            let fields = { (exchange: CurlExchange) in exchange.headers.filter { $0.name != "date" }.map { "\($0.name): \($0.value)" } }
            #expect(fields(kept) == fields(asked) && kept.header("date") != nil && fields(kept).contains("content-length: \(first.count)"))
            #expect(served.all.count == 2 && served.all.allSatisfy { $0.version == "HTTP/2.0" && $0.status == 200 && $0.client == "127.0.0.1" })
            let range = try await curlExchange(url, headers: [("Range", "bytes=3-7")], in: folder, curlOptions: tls)
            #expect(range.status == 206 && range.body == first[3...7])
            #expect(try await curlExchange(url, headers: [("If-None-Match", "*")], in: folder, curlOptions: tls).status == 304)
            handle.replace(with: try OfflineLoader(path: folder.path + "/b.zip"))
            for _ in 0..<2 {
                let now = try await curlExchange(url, in: folder, curlOptions: tls)
                #expect(now.status == 200 && now.body == second)
            }
            #expect(served.all.count == 6)
        }
    }

    @Test(
        "an HTTP/2 client whose windows take nothing holds at most 4 MiB of kept answers: the rest wait, holding nothing, and all arrive whole once it opens them"
    )
    func keptAnswersInFlightAreBounded() async throws {
        // 60 KiB: read and kept where it is answered, so it is kept before the first answer's end reaches the client (a
        // body read off the event loop is kept once its last write completed, which may come after the client's next
        // asks: those then went on to be read afresh, in their turns, and two more were answered in a loaded run).
        let (folder, served, server) = try await startWithPage(seed: 13, size: 60 << 10)
        try await afterwards(server.stop) {
            let (started, printed) = try await runHeldClient(
                #"""
                def initial_window(size):
                    return bytes([0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 4]) + size.to_bytes(4, "big")
                keep_first(s, "/page.bin")
                # Windows that take nothing, then 80 asks for the kept answer.
                s.sendall(initial_window(0) + b"".join(get(stream, "/page.bin") for stream in range(3, 162, 2)))
                import os, time
                while not os.path.exists(sys.argv[3]): time.sleep(0.05)
                s.sendall(initial_window(LARGEST))
                read_after(s, sys.argv[3], 80)
                """#, server: server, folder: folder, served: served, logged: 69)
            // The first, then 68 kept answers of 60 KiB (4 MiB in flight at most); the other twelve wait for the socket to
            // take some, and are not answered meanwhile.
            #expect(started == 69, "\(started) answered while the windows took nothing")
            #expect(printed.contains("ended 80"), "\(printed)")
            #expect(served.all.count == 81 && served.all.allSatisfy { $0.status == 200 })
        }
    }

    @Test(
        "an HTTP/2 client that opens its windows wide, asks a kept 1 MiB answer 30 times and reads nothing for a second gets all 30 whole once it reads (answers from the cache wait for the connection as the streams' do)"
    )
    func keptAnswersToAClientThatReadsLate() async throws {
        let (folder, served, server) = try await startWithPage(seed: 12)
        try await afterwards(server.stop) {
            // The answers are 1 MiB each, kept by the cache of whole answers (which keeps a body up to 4 MiB): 30 of them are
            // more than the socket buffers hold. What the server holds meanwhile is measured by scripts/bench-attack.sh (a
            // kept page asked by clients that never read).
            let (_, printed) = try await runHeldClient(
                #"""
                keep_first(s, "/page.bin")
                s.sendall(b"".join(get(stream, "/page.bin") for stream in range(3, 62, 2)))
                read_after(s, sys.argv[3], 30)
                """#, server: server, folder: folder, served: served, logged: 2)
            #expect(printed.contains("ended 30"), "\(printed)")
            #expect(served.all.count == 31 && served.all.allSatisfy { $0.status == 200 })
        }
    }

    @Test(
        "HTTP/1.1 over TLS, pipelined: each answer arrives whole and in order, a large body read off the event loop and a kept page after it, round after round"
    )
    func pipelinedAnswersStayWhole() async throws {
        let folder = try TemporaryFolder()
        let big = noise(1 << 20, seed: 11)
        let small = Data("<p>small</p>".utf8)
        try writeBundle(["\(Self.origin)/big.bin": big, "\(Self.origin)/small.html": small], to: folder.path + "/b.zip")
        let server = try await start(folder.path + "/b.zip", folder: folder)
        try await afterwards(server.stop) {
            // The large body's first chunks go out while the kept page's request waits behind it; a writability change in
            // the middle of them (the write coalescer flushing past 64 KiB) must not answer the waiting request there.
            try folder.file(
                "pipeline.py",
                #"""
                import socket, ssl, sys
                port, ca, rounds = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
                known = {open(sys.argv[4], "rb").read(): "big", open(sys.argv[5], "rb").read(): "small"}
                context = ssl.create_default_context(cafile=ca)
                context.set_alpn_protocols(["http/1.1"])
                s = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=30), server_hostname="127.0.0.1")
                def ask(path): return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
                s.sendall(b"".join(ask("/big.bin") + ask("/small.html") for _ in range(rounds)))
                buffer = b""
                def more():
                    global buffer
                    chunk = s.recv(1 << 20)
                    if not chunk: raise SystemExit("closed")
                    buffer += chunk
                for _ in range(2 * rounds):
                    while b"\r\n\r\n" not in buffer: more()
                    head, buffer = buffer.split(b"\r\n\r\n", 1)
                    lines = head.decode("latin-1").split("\r\n")
                    lengths = [line.split(":", 1)[1] for line in lines[1:] if line.lower().startswith("content-length:")]
                    if not lines[0].startswith("HTTP/1.1 ") or len(lengths) != 1: raise SystemExit(f"garbled answer: {head[:60]!r}")
                    length = int(lengths[0])
                    while len(buffer) < length: more()
                    body, buffer = buffer[:length], buffer[length:]
                    print(lines[0].split(" ")[1], known.get(body, "other"), flush=True)
                """#)
            try big.write(to: URL(fileURLWithPath: folder.path + "/big.bin"))
            try small.write(to: URL(fileURLWithPath: folder.path + "/small.html"))
            let rounds = 20
            let result = try await run(
                "/usr/bin/python3",
                [
                    folder.path + "/pipeline.py", String(server.port), folder.path + "/ca.pem", String(rounds), folder.path + "/big.bin",
                    folder.path + "/small.html",
                ])
            let expected = Array(repeating: ["200 big", "200 small"], count: rounds).flatMap { $0 }
            let lines = result.output.split(separator: "\n").map(String.init)
            #expect(result.status == 0 && lines == expected, "\(result.output.prefix(2000))")
        }
    }

    @Test(
        "a body damaged in the bundle is never sent whole over HTTP/2: a 500 up to the check-before-send size; a larger one's stream is reset short of its length"
    )
    func damagedBodiesOverHTTP2() async throws {
        let folder = try TemporaryFolder()
        let small = noise(20_000, seed: 31)
        let large = noise(3 << 20, seed: 32)
        try writeBundle(["\(Self.origin)/small.bin": small, "\(Self.origin)/large.bin": large], to: folder.path + "/b.zip")
        for (body, at) in [(small, 100), (large, large.count - 200)] {
            let found = try #require(try offset(of: body[at..<(at + 64)], in: folder.path + "/b.zip"))
            try flipByte(at: found + 10, in: folder.path + "/b.zip")
        }
        let checkedFirst = try await start(folder.path + "/b.zip", folder: folder)
        try await afterwards(checkedFirst.stop) {
            let base = "https://127.0.0.1:\(checkedFirst.port)"
            let tls = ["--cacert", folder.path + "/ca.pem", "--http2"]
            let small = try await curlExchange(base + "/small.bin", in: folder, curlOptions: tls)
            let large = try await curlExchange(base + "/large.bin", in: folder, curlOptions: tls)
            #expect(small.status == 500 && large.status == 500)
        }
        let server = try await start(folder.path + "/b.zip", folder: folder, options: .init(checkBeforeSend: 1 << 20))
        try await afterwards(server.stop) {
            let base = "https://127.0.0.1:\(server.port)"
            let tls = ["--cacert", folder.path + "/ca.pem", "--http2"]
            #expect(try await curlExchange(base + "/small.bin", in: folder, curlOptions: tls).status == 500)
            let cut = try await run(
                "curl",
                [
                    "-s", "--cacert", folder.path + "/ca.pem", "--http2", "-o", folder.path + "/large.out", "-w", "%{http_code} %{size_download}",
                    base + "/large.bin",
                ])
            let parts = cut.output.split(separator: " ")
            #expect(parts.first == "200")
            #expect((Int(parts.last ?? "") ?? .max) < large.count, "\(cut.output)")
            #expect(cut.status != 0, "curl must see the stream fail: \(cut.output)")
            // The connection still answers.
            #expect(try await curlExchange(base + "/small.bin", in: folder, curlOptions: tls).status == 500)
        }
    }

    @Test(
        "an HTTP/2 client that opens many streams for large bodies and reads nothing gets two answers started, not one per stream: a connection holds two bodies' chunks; the others follow once the client reads"
    )
    func streamsTakeTurnsForLargeBodies() async throws {
        let folder = try TemporaryFolder()
        // Larger than the socket buffers hold (a few MiB on loopback) and than the cache of whole answers keeps (4 MiB).
        let large = noise(8 << 20, seed: 9)
        try writeBundle(["\(Self.origin)/large.bin": large], to: folder.path + "/b.zip")
        let served = ServedLog()
        // A stream that makes no progress gives its turn after the stall period (idle timeout / 30): two minutes here, past
        // the count below however long a loaded machine takes to start the first answers (a fresh-clone run took 45 s
        // and saw the 10 s of the default hand two turns on). The stall rule has its own test.
        let server = try await startLogged(folder.path + "/b.zip", folder: folder, served: served, idleSeconds: 3600)
        try await afterwards(server.stop) {
            // Raw HTTP/2: the largest stream and connection windows, then ten GETs; nothing is read until the test has
            // counted, then everything. While the client reads nothing: two answers started (their heads logged), the
            // other eight wait their turn; a second more changes nothing (no stream makes progress, and the connection
            // takes no bytes).
            let (started, printed) = try await runHeldClient(
                #"""
                s.sendall(preface(LARGEST, LARGEST) + b"".join(get(stream, "/large.bin") for stream in range(1, 20, 2)))
                # Every stream's answer ends once the others had their turn.
                read_after(s, sys.argv[3], 10)
                """#, server: server, folder: folder, served: served, logged: 2)
            // Two: the server's turns for large bodies per HTTP/2 connection.
            #expect(started == 2, "\(started) answers started while the client read nothing")
            #expect(printed.contains("ended 10"), "\(printed)")
            #expect(served.all.count == 10 && served.all.allSatisfy { $0.status == 200 })
        }
    }

    @Test(
        "two HTTP/2 streams the client stopped reading (as a browser stops reading a video once its buffer is full) give their turns to the next stream after the stall period"
    )
    func stalledStreamsGiveTheirTurns() async throws {
        let folder = try TemporaryFolder()
        try writeBundle(["\(Self.origin)/large.bin": noise(8 << 20, seed: 10)], to: folder.path + "/b.zip")
        // An idle period of 15 s: a stream that makes no progress for 0.5 s gives its turn.
        let server = try await start(folder.path + "/b.zip", folder: folder, idleTimeout: .seconds(15))
        try await afterwards(server.stop) {
            // Streams 1 and 3 keep the default stream window (64 KiB) and never get more: they stall. Stream 5 is opened
            // next and read whole; the connection's window is opened wide, so only the streams' own windows hold back.
            try writeRawHTTP2Client(in: folder)
            try folder.file(
                "stall.py",
                #"""
                import sys, time
                from h2raw import *
                s = connect(int(sys.argv[1]), sys.argv[2])
                s.sendall(preface(connection_window=LARGEST) + get(1, "/large.bin") + get(3, "/large.bin") + get(5, "/large.bin"))
                start, answered = time.time(), set()
                for kind, flags, stream, length in frames(s):
                    if kind == 1:
                        answered.add(stream)
                        if stream == 5: s.sendall(window(5, LARGEST - 65535))
                    if kind == 0 and flags & 1 and stream == 5:
                        print("stream 5 ended after", round(time.time() - start, 1), "s; answers started:", sorted(answered))
                        sys.exit(0)
                print("stream 5 did not end; answers started:", sorted(answered))
                """#)
            let result = try await run("python3", [folder.path + "/stall.py", String(server.port), folder.path + "/ca.pem"])
            #expect(result.output.hasPrefix("stream 5 ended after") && result.output.contains("[1, 3, 5]"), "\(result.output)")
        }
    }

    @Test("an HTTP/2 client that reads a long answer slowly and sends nothing meanwhile is not cut off at the idle timeout")
    func slowHTTP2ReaderIsNotCutOff() async throws {
        let folder = try TemporaryFolder()
        let body = noise(32 << 20, seed: 11)
        try writeBundle(["\(Self.origin)/large.bin": body], to: folder.path + "/b.zip")
        let server = try await start(folder.path + "/b.zip", folder: folder, idleTimeout: .seconds(2))
        try await afterwards(server.stop) {
            // The largest windows, so the client never needs to send a window update: it reads 64 KiB every 5 ms at most,
            // so the body takes more than an idle period, and the server always has bytes waiting for the client (the
            // last socket buffers' worth drains within a period).
            try writeRawHTTP2Client(in: folder)
            try folder.file(
                "slow.py",
                #"""
                import sys, time
                from h2raw import *
                s = connect(int(sys.argv[1]), sys.argv[2])
                s.sendall(preface(LARGEST, LARGEST) + get(1, "/large.bin"))
                reads = 0
                def pace():
                    # A TLS record (16 KiB) per read: 64 KiB per 5 ms.
                    global reads
                    reads += 1
                    if reads % 4 == 0: time.sleep(0.005)
                start, received, how = time.time(), 0, "closed"
                for kind, flags, stream, length in frames(s, 65536, pace):
                    if kind == 0: received += length
                    if kind == 0 and flags & 1:
                        how = "ended"
                        break
                print(how, "after", round(time.time() - start, 1), "s with", received, "bytes")
                """#)
            let result = try await run("python3", [folder.path + "/slow.py", String(server.port), folder.path + "/ca.pem"])
            #expect(result.output.hasPrefix("ended after") && result.output.contains("with \(body.count) bytes"), "\(result.output)")
        }
    }

    @Test(
        "over TLS, a client that floods HTTP/2 (PING frames, streams opened and reset at once, CONTINUATION frames without end) is sent GOAWAY ENHANCE_YOUR_CALM and closed; the server answers the next client"
    )
    func http2FloodsAreEnded() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: Self.origin, to: folder.path + "/b.zip")
        let server = try await start(folder.path + "/b.zip", folder: folder)
        try await afterwards(server.stop) {
            try writeRawHTTP2Client(in: folder)
            try folder.file(
                "flood.py",
                #"""
                import sys
                from h2raw import *
                port, ca, kind = int(sys.argv[1]), sys.argv[2], sys.argv[3]
                s = connect(port, ca)
                out = preface()
                if kind == "ping":
                    out += b"".join(bytes([0, 0, 8, 6, 0, 0, 0, 0, 0]) + i.to_bytes(8, "big") for i in range(300))
                elif kind == "reset":
                    out += b"".join(get(n, "/missing") + bytes([0, 0, 4, 3, 0]) + n.to_bytes(4, "big") + bytes([0, 0, 0, 8]) for n in range(1, 601, 2))
                else:
                    block = get(1, "/")[9:]
                    out += len(block[:1]).to_bytes(3, "big") + bytes([1, 1, 0, 0, 0, 1]) + block[:1]
                    out += b"".join(bytes([0, 0, 1, 9, 0, 0, 0, 0, 1]) + block[i:i + 1] for i in range(1, 8))
                try:
                    s.sendall(out)
                except OSError:
                    pass
                code = None
                try:
                    for frame_type, flags, stream, payload in frames_with_payload(s):
                        if frame_type == 7: code = int.from_bytes(payload[4:8], "big")
                except OSError:
                    pass
                print(code)
                """#)
            for kind in ["ping", "reset", "continuation"] {
                let result = try await run("python3", [folder.path + "/flood.py", String(server.port), folder.path + "/ca.pem", kind])
                #expect(result.status == 0 && result.output.trimmingCharacters(in: .whitespacesAndNewlines) == "11", "\(kind): \(result.output)")
            }
            let after = try await curlExchange(
                "https://127.0.0.1:\(server.port)/", in: folder, curlOptions: ["--cacert", folder.path + "/ca.pem", "--http2"])
            #expect(after.status == 200)
        }
    }

    @Test("a connection that never ends its TLS handshake is closed after the idle timeout, and so is an HTTP/2 connection that goes quiet")
    func quietConnectionsAreClosed() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: Self.origin, to: folder.path + "/b.zip")
        // 2 s: long enough for the h2 client's own TLS handshake on a loaded machine (at 0.5 s, a handshake slowed past
        // the timeout was itself cut, as it should be, and the test failed 2 runs in 8).
        let server = try await start(folder.path + "/b.zip", folder: folder, idleTimeout: .seconds(2))
        try await afterwards(server.stop) {
            try writeRawHTTP2Client(in: folder)
            try folder.file(
                "quiet.py",
                #"""
                import socket, ssl, sys, time
                from h2raw import *
                port, ca, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
                if mode == "h2":
                    # The connection preface and an empty SETTINGS frame, then nothing.
                    s = connect(port, ca, timeout=10)
                    s.sendall(preface())
                else:
                    s = socket.create_connection(("127.0.0.1", port), timeout=10)
                start = time.time()
                try:
                    while s.recv(4096):
                        pass
                except (ConnectionResetError, ssl.SSLError):
                    pass
                print(round(time.time() - start, 1))
                """#)
            for mode in ["tcp", "h2"] {
                let result = try await run("python3", [folder.path + "/quiet.py", String(server.port), folder.path + "/ca.pem", mode])
                let seconds = Double(result.output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 99
                // Closed after the timeout (2 s; checked once a period for the handshake), well before the client's 10 s.
                #expect(result.status == 0 && seconds >= 1.2 && seconds < 9, "\(mode): \(result.output)")
            }
        }
    }
}
