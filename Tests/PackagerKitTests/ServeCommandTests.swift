import Foundation
import OfflineBundle
import PackagerKit
import TestSupport
import Testing

@Suite("packager serve, checked with curl")
struct ServeCommandTests {
    func curl(_ arguments: [String]) async throws -> String { try await run("curl", ["-s"] + arguments).output }

    @Test("a client that pipelines requests and never reads the answers costs the server a bounded amount of memory (scripts/attack-serve.py)")
    func pipelinedFloodIsBounded() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        try await withServe(folder.path + "/b.zip") { base, process in
            let port = String(base.split(separator: ":").last ?? "")
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../scripts/attack-serve.py").path
            // Both paths: answers kept whole (the page), and answers read each time (a conditional that never matches).
            for request in [
                "GET / HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n", "GET /logo.png HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nIf-None-Match: \"x\"\\r\\n\\r\\n",
            ] {
                let result = try await run(
                    "python3",
                    [script, "flood", "--port", port, "--pid", String(process.processIdentifier), "--request", request, "--seconds", "4", "--limit-mb", "512"])
                let json = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
                let growth = json?["growth_mb"] as? Double ?? .infinity
                #expect(growth < 64, "\(result.output)")
                #expect((json?["requests_sent"] as? Int ?? 0) > 1000, "\(result.output)")
            }
        }
    }

    @Test("200 with the recorded headers, 304, 206, gzip when asked, identity when not, 404 on a miss, the blocked entry empty")
    func curlAgainstServe() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        try await withServe(folder.path + "/b.zip") { base, _ in

            let headers = try await curl(["-D", "-", "-o", "/dev/null", base + "/"]).lowercased()
            #expect(headers.hasPrefix("http/1.1 200"))
            // An origin server with a clock sends Date (RFC 9110 §6.6.1); and it names itself.
            #expect(headers.contains("\r\ndate: ") && headers.contains(" gmt\r\n") && headers.contains("\r\nserver: packager\r\n"), "\(headers)")
            #expect(headers.contains("etag: \"page-v1\"") && headers.contains("cache-control: max-age=300"))
            #expect(headers.contains("last-modified: sat, 21 nov 2026 10:00:00 gmt") && !headers.contains("content-encoding"))
            #expect(try await curl([base + "/"]) == samplePage)
            #expect(try await curl(["-o", "/dev/null", "-w", "%{http_code}", "-H", "If-None-Match: \"page-v1\"", base + "/"]) == "304")
            #expect(try await curl(["-o", "/dev/null", "-w", "%{http_code} %{size_download}", "-r", "100-199", base + "/logo.png"]) == "206 100")
            let gzipHeaders = try await curl(["-D", "-", "-o", "/dev/null", "-H", "Accept-Encoding: gzip", base + "/"]).lowercased()
            #expect(gzipHeaders.contains("content-encoding: gzip"))
            #expect(try await curl(["--compressed", base + "/"]) == samplePage)
            #expect(try await curl(["-o", "/dev/null", "-w", "%{http_code}", base + "/not-there"]) == "404")
            #expect(try await curl(["-o", "/dev/null", "-w", "%{http_code} %{size_download}", base + "/ads.js"]) == "204 0")
            let head = try await curl(["-I", base + "/logo.png"]).lowercased()
            #expect(head.hasPrefix("http/1.1 200") && head.contains("content-length: 50000"))
        }
    }

    @Test("HTTP/1.1 on one connection: pipelined requests answered in order, HEAD without a body, Connection: close and HTTP/1.0 end it")
    func connectionHandling() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        try await withServe(folder.path + "/b.zip") { base, _ in
            let port = String(base.split(separator: ":").last ?? "")
            // Three requests in one write, the last asking to close; then an HTTP/1.0 request on its own connection.
            let script =
                rawExchange + #"""
                    one = exchange(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\nHEAD /logo.png HTTP/1.1\r\nHost: localhost\r\n\r\nGET /not-there HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    two = exchange(b"GET /logo.png HTTP/1.0\r\n\r\n")
                    # A response follows the previous body directly: its status line need not start a line.
                    heads = [b"HTTP/1.1 " + code for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", one)]
                    print(b" ".join(heads).decode(), len(one), one.count(b"<p>Offline and fine.</p>"), b" ".join(two.split(b"\r\n")[0].split(b" ")[:2]).decode(), len(two))
                    """#
            try folder.file("client.py", script)
            let result = try await run("python3", [folder.path + "/client.py", port])
            // Both exchanges end because the server closed (the client reads to the end): a hang would time out.
            let fields = result.output.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ").map { String($0) }
            #expect(fields.count == 11, "\(result.output)")
            guard fields.count == 11 else { return }
            #expect(Array(fields[0..<6]) == ["HTTP/1.1", "200", "HTTP/1.1", "200", "HTTP/1.1", "404"], "\(result.output)")
            // The page's body once (the HEAD sent none), all 400 paragraphs of it.
            #expect(fields[7] == "400", "\(result.output)")
            #expect(Int(fields[6]).map { $0 > samplePage.utf8.count && $0 < samplePage.utf8.count + 2000 } == true, "\(result.output)")
            #expect(fields[8] == "HTTP/1.1" && fields[9] == "200", "\(result.output)")
            #expect(Int(fields[10]).map { $0 > 50000 && $0 < 51000 } == true, "\(result.output)")
        }
    }

    @Test("once checked, bodies go out from the file as stored (sendfile): the same bytes as the first, checked answer, for gzip, a stored body and a range")
    func sentFromTheFile() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        try await withServe(folder.path + "/b.zip") { base, _ in
            func fetch(_ name: String, _ arguments: [String]) async throws -> Data {
                let path = folder.path + "/" + name
                let result = try await run("curl", ["-s", "-o", path] + arguments)
                #expect(result.status == 0, "\(result.output)")
                return try Data(contentsOf: URL(fileURLWithPath: path))
            }
            for (name, arguments) in [
                ("gzip", ["-H", "Accept-Encoding: gzip", base + "/"]), ("stored", [base + "/logo.png"]), ("range", ["-r", "1000-1999", base + "/logo.png"]),
            ] {
                let first = try await fetch(name + "-1", arguments)
                let second = try await fetch(name + "-2", arguments)
                let third = try await fetch(name + "-3", arguments)
                #expect(!first.isEmpty && first == second && second == third, "\(name): \(first.count), \(second.count), \(third.count)")
            }
            // The gzip member is whole: gzip checks its CRC and length, and it inflates to the page.
            let gunzip = try await run("gzip", ["-dc", folder.path + "/gzip-3"])
            #expect(gunzip.status == 0 && gunzip.output == samplePage)
            #expect(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/range-3")).count == 1000)
        }
    }

    @Test(
        "a plain GET answered again is the kept response, byte for byte: a large page identity and as a gzip member (sent under TCP_CORK), a stored image; conditional and range requests are still answered for themselves"
    )
    func keptResponses() async throws {
        let folder = try TemporaryFolder()
        // Words drawn from a large vocabulary: the page deflates to well over the 128 KiB from which a gzip answer is
        // sent from the file.
        let letters = Array(noise(30_000, seed: 11)).map { Character(Unicode.Scalar(UInt8(ascii: "a") + $0 % 26)) }
        let vocabulary = (0..<3000).map { String(letters[($0 * 9)..<($0 * 9 + 3 + $0 % 7)]) }
        let picks = Array(noise(440_000, seed: 13))
        var words: [String] = []
        for index in 0..<220_000 {
            let pick = Int(picks[2 * index]) << 8 | Int(picks[2 * index + 1])
            words.append(vocabulary[pick % 3000])
        }
        let page = "<!doctype html><p>" + words.joined(separator: " ") + "</p>"
        var writer = BundleWriter()
        writer.add(
            .init(url: "https://docs.example.com/page.html", headers: [("content-type", "text/html"), ("etag", "\"p1\"")], body: .data(Data(page.utf8))))
        writer.add(.init(url: "https://docs.example.com/photo.jpg", headers: [("content-type", "image/jpeg")], body: .data(noise(200_000, seed: 12))))
        try writer.write(to: folder.path + "/b.zip")
        let stored = try #require(try MountedBundle(path: folder.path + "/b.zip").entry(for: "https://docs.example.com/page.html")?.body?.storedSize)
        #expect(stored > 140_000, "the page's deflate stream is \(stored) bytes")
        try await withServe(folder.path + "/b.zip") { base, _ in
            // Forty requests in two writes, behind answers read off the event loop (large, not yet kept): all answered, in
            // order; the second write waits in the socket while sixteen requests wait to be answered, and is read after.
            // Then a request NIO cannot parse: 400; and one in absolute form, answered for the host it names.
            let script =
                rawExchange + #"""
                    asks = [b"GET /page.html HTTP/1.1\r\nHost: localhost\r\n\r\n"] + [b"GET /photo.jpg HTTP/1.1\r\nHost: localhost\r\n\r\n"] * 38
                    asks.append(b"GET /nothing HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    one = exchange(b"".join(asks[:20]), b"".join(asks[20:]))
                    codes = re.findall(rb"HTTP/1\.1 (\d{3}) ", one)
                    lengths = [int(n) for n in re.findall(rb"content-length: (\d+)\r\n", one)]
                    bad = exchange(b"GET / HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n")
                    # Absolute form (RFC 9112 §3.2.2): the target's authority counts, not the Host field.
                    absolute = exchange(b"GET http://localhost/photo.jpg HTTP/1.1\r\nHost: elsewhere.example\r\nConnection: close\r\n\r\n")
                    print(len(codes), b",".join(sorted(set(codes[:39]))).decode(), codes[-1].decode(), lengths[0], len(set(lengths[1:39])), lengths[1], bad.split(b"\r\n")[0].decode().replace(" ", "_"), absolute.split(b"\r\n")[0].decode().replace(" ", "_"))
                    """#
            try folder.file("client.py", script)
            let port = String(base.split(separator: ":").last ?? "")
            let result = try await run("python3", [folder.path + "/client.py", port])
            #expect(
                result.output.trimmingCharacters(in: .whitespacesAndNewlines)
                    == "40 200 404 \(page.utf8.count) 1 200000 HTTP/1.1_400_Bad_Request HTTP/1.1_200_OK",
                "\(result.output)")

            func fetch(_ name: String, _ arguments: [String]) async throws -> Data {
                let path = folder.path + "/" + name
                let result = try await run("curl", ["-s", "-o", path, "-D", path + ".head"] + arguments)
                #expect(result.status == 0, "\(result.output)")
                return try Data(contentsOf: URL(fileURLWithPath: path))
            }
            for (name, arguments, expected) in [
                ("identity", [base + "/page.html"], Data(page.utf8)), ("photo", [base + "/photo.jpg"], noise(200_000, seed: 12)),
            ] {
                for round in 1...3 { #expect(try await fetch("\(name)-\(round)", arguments) == expected, "\(name) \(round)") }
            }
            let gzipped = try await fetch("gzip-1", ["-H", "Accept-Encoding: gzip", base + "/page.html"])
            for round in 2...4 { #expect(try await fetch("gzip-\(round)", ["-H", "Accept-Encoding: gzip", base + "/page.html"]) == gzipped, "gzip \(round)") }
            // The kept gzip member is whole: gzip checks its CRC and length, and it inflates to the page.
            #expect(try await run("gzip", ["-dc", folder.path + "/gzip-4"]).output == page)
            let head = try String(contentsOfFile: folder.path + "/gzip-4.head", encoding: .utf8).lowercased()
            #expect(head.contains("content-encoding: gzip") && head.contains("etag: \"p1-gzip\"") && head.contains("date: "), "\(head)")
            // Requests the cache does not answer: a conditional one (304) and a range, after the page was kept.
            let notModified = try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "If-None-Match: \"p1\"", base + "/page.html"])
            #expect(notModified.output == "304")
            let range = try await fetch("range", ["-r", "100-199", base + "/page.html"])
            #expect(range == Data(page.utf8)[100..<200])
        }
    }

    @Test("a bundle that is not one is refused with a clear error")
    func refusesCorrupt() async throws {
        let folder = try TemporaryFolder()
        try folder.file("junk.zip", "not a bundle at all")
        let result = try await run(packagerExecutable, ["serve", folder.path + "/junk.zip", "--port", "0"])
        #expect(result.status == 1 && result.output.contains("packager:"))
        let badOrigin = try await run(packagerExecutable, ["serve", folder.path + "/junk.zip", "--origin", "docs.example.com"])
        #expect(badOrigin.status == 2 && badOrigin.output.contains("'docs.example.com' is not an origin"))
    }

    @Test(
        "SIGTERM lets the downloads in flight finish: it stops accepting at once, every body arrives whole, and serve exits 0 after the last; a second signal exits at once with 143"
    )
    func gracefulShutdown() async throws {
        let folder = try TemporaryFolder()
        let big = noise(24 << 20, seed: 11)
        var writer = BundleWriter()
        writer.add(.init(url: "https://docs.example.com/big.bin", headers: [("content-type", "application/octet-stream")], body: .data(big)))
        try writer.write(to: folder.path + "/b.zip")
        // Four downloads at 8 MB/s each (3 s for 24 MiB), the signal 1 s in.
        func download(_ base: String, _ n: Int) throws -> Process {
            try launch(
                "/usr/bin/curl",
                ["-s", "--limit-rate", "8M", "-o", folder.path + "/got-\(n).bin", "-w", "%{http_code} %{size_download}", base + "/big.bin"],
                output: Pipe())
        }
        let (serve, base) = try await startServe(arguments: [folder.path + "/b.zip"])
        let downloads = try (0..<4).map { try download(base, $0) }
        try await Task.sleep(for: .seconds(1))
        kill(serve.processIdentifier, SIGTERM)
        // Not accepting: a new connection is soon refused (curl's 7). Tried until refused,
        // for at most 1.5 s: under the full suite's load the signal's way to the listener once took past 300 ms.
        var late: [Int32] = []
        for _ in 0..<15 where late.last != 7 {
            try await Task.sleep(for: .milliseconds(100))
            late.append(try await run("curl", ["-s", "-o", "/dev/null", "--max-time", "1", base + "/big.bin"]).status)
        }
        #expect(late.last == 7, "connections after the signal: curl exited \(late)")
        for (n, process) in downloads.enumerated() {
            try await offPool { process.waitUntilExit() }
            let got = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/got-\(n).bin"))
            #expect(process.terminationStatus == 0 && got == big, "download \(n): curl \(process.terminationStatus), \(got.count) of \(big.count) bytes")
        }
        try await offPool { serve.waitUntilExit() }
        #expect(serve.terminationReason == .exit && serve.terminationStatus == 0, "serve exited \(serve.terminationStatus)")

        // A second signal does not wait for the download.
        let (again, againBase) = try await startServe(arguments: [folder.path + "/b.zip"])
        // 100 KB/s, so that it lasts minutes: curl's limit is an average that lets it take about 10 MB in its first second,
        // and at 1 MB/s the 24 MiB took 22 s, which the test's waits have come near under the full suite's load (the
        // whole test took 80 s there against 5 s alone), serve then exiting 0 after the download, as it should.
        let slow = try launch("/usr/bin/curl", ["-s", "--limit-rate", "100K", "-o", folder.path + "/slow.bin", againBase + "/big.bin"], output: Pipe())
        // In flight before the signal: under the full suite's load the download once had not begun a second later, and
        // serve, with nothing to wait for, exited 0 at the first signal.
        func received() -> Int { (try? FileManager.default.attributesOfItem(atPath: folder.path + "/slow.bin")[.size] as? NSNumber)?.intValue ?? 0 }
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, received() == 0 { try await Task.sleep(for: .milliseconds(50)) }
        // Said apart: a serve that exits 0 below is one with nothing in flight, which this test cannot tell otherwise.
        guard received() > 0 else {
            Issue.record("the slow download had not begun after 60 s")
            for process in [slow, again] {
                process.terminate()
                try await offPool { process.waitUntilExit() }
            }
            return
        }
        kill(again.processIdentifier, SIGTERM)
        // The second signal only once serve took the first (it stops accepting): two signals sent before serve reads
        // either are one pending signal to the kernel, and serve would wait for the download as after one. Under the
        // full suite's load, a second sent a fixed second later once arrived so.
        var refused = false
        for _ in 0..<100 where !refused {
            try await Task.sleep(for: .milliseconds(100))
            refused = try await run("curl", ["-s", "-o", "/dev/null", "--max-time", "1", againBase + "/page.txt"]).status == 7
        }
        #expect(refused, "serve still accepted 10 s after the first signal")
        kill(again.processIdentifier, SIGTERM)
        let started = Date()
        try await offPool { again.waitUntilExit() }
        #expect(again.terminationStatus == 143 && Date().timeIntervalSince(started) < 15, "serve exited \(again.terminationStatus)")
        slow.terminate()
        try await offPool { slow.waitUntilExit() }
    }

    @Test(
        "a damaged body is a 500 before any byte goes out up to --check-before-send; over it, it streams and is cut short, never sent whole, unless --scrub found it first; a small damaged one is a 500"
    )
    func damagedBodiesNeverGoOutWhole() async throws {
        let folder = try TemporaryFolder()
        let big = noise(3 << 20, seed: 5)
        var writer = BundleWriter()
        writer.add(.init(url: "https://docs.example.com/big.bin", headers: [("content-type", "application/octet-stream")], body: .data(big)))
        writer.add(
            .init(url: "https://docs.example.com/good.bin", headers: [("content-type", "application/octet-stream")], body: .data(noise(2 << 20, seed: 6))))
        writer.add(.init(url: "https://docs.example.com/small.txt", headers: [("content-type", "text/plain")], body: .data(Data("small and damaged".utf8))))
        let path = folder.path + "/b.zip"
        try writer.write(to: path)
        let tail = try #require(try offset(of: big.suffix(100), in: path))
        try flipByte(at: tail + 50, in: path)
        let small = try #require(try offset(of: Data("small and damaged".utf8), in: path))
        try flipByte(at: small + 3, in: path)
        func status(_ base: String, _ path: String) async throws -> String {
            try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", base + path]).output
        }
        // By default (16 MiB) the 3 MiB body is checked before it is sent: 500, no byte of it; the good one is whole.
        try await withServe(path) { base, _ in
            for _ in 0..<2 { #expect(try await status(base, "/big.bin") == "500") }
            let good = try await run("curl", ["-s", "-o", folder.path + "/good.bin", "-w", "%{http_code} %{size_download}", base + "/good.bin"])
            #expect(good.output == "200 \(2 << 20)")
        }
        // With --scrub, the scrub finds it (on its own thread, soon after the mount): 500 from then on, though larger
        // than what is checked before sending.
        try await withServe(path, ["--check-before-send", "1M", "--scrub"]) { base, _ in
            var answers: [String] = []
            for _ in 0..<100 where answers.last != "500" {
                answers.append(try await status(base, "/big.bin"))
                if answers.last != "500" { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(answers.last == "500", "\(answers)")
            #expect(try await status(base, "/good.bin") == "200")
        }
        try await withServe(path, ["--check-before-send", "1M"]) { base, _ in
            // A good large body arrives whole, streamed (several times over, as later reads trust it).
            for _ in 0..<2 {
                let good = try await run("curl", ["-s", "-o", folder.path + "/good.bin", "-w", "%{http_code} %{size_download}", base + "/good.bin"])
                #expect(good.output == "200 \(2 << 20)")
            }
            // The head (with the whole Content-Length) has gone out; the body stops short, and curl says so (18: partial file).
            let damaged = try await run("curl", ["-s", "-o", folder.path + "/big.bin", "-w", "%{http_code} %{size_download}", base + "/big.bin"])
            let parts = damaged.output.split(separator: " ")
            #expect(damaged.status == 18, "\(damaged.output)")
            #expect(parts.first == "200" && (parts.last.flatMap { Int($0) } ?? Int.max) < big.count, "\(damaged.output)")
            #expect(try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", base + "/small.txt"]).output == "500")
            // The server is still up.
            #expect(try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", base + "/good.bin"]).output == "200")
        }
    }

    func twoBundles(in folder: TemporaryFolder, big: Data) throws {
        for (name, page, body) in [("a", "old page", big), ("b", "new page", noise(1 << 20, seed: 9)), ("c", "third page", Data("c".utf8))] {
            var writer = BundleWriter()
            writer.add(.init(url: "https://docs.example.com/page.txt", headers: [("content-type", "text/plain")], body: .data(Data(page.utf8))))
            writer.add(.init(url: "https://docs.example.com/big.bin", headers: [("content-type", "application/octet-stream")], body: .data(body)))
            if name == "b" {
                writer.add(.init(url: "https://docs.example.com/only-b.txt", headers: [("content-type", "text/plain")], body: .data(Data("from b".utf8))))
            }
            try writer.write(to: folder.path + "/\(name).zip")
        }
    }

    @Test("bundles are layered, first answers; SIGHUP and a replaced file swap in new bundles while requests in flight finish from the old")
    func layeredAndReloaded() async throws {
        let folder = try TemporaryFolder()
        let big = noise(4 << 20, seed: 8)
        try twoBundles(in: folder, big: big)
        func get(_ base: String, _ path: String) async throws -> String { try await run("curl", ["-s", base + path]).output }

        // Layered: a.zip answers what it holds, b.zip the rest.
        try await withServe(folder.path + "/a.zip", [folder.path + "/b.zip"]) { (base, _) async throws -> Void in
            #expect(try await get(base, "/page.txt") == "old page")
            #expect(try await get(base, "/only-b.txt") == "from b")
        }

        let served = folder.path + "/served.zip"
        try FileManager.default.copyItem(atPath: folder.path + "/a.zip", toPath: served)
        // SIGHUP only (no polling), so the swap below is the signal's doing.
        try await withServe(served, ["--reload-check", "0"]) { base, process in
            // A slow download of the old big body is in flight while the bundle is replaced and SIGHUP arrives.
            let download = try launch("/usr/bin/curl", ["-s", "--limit-rate", "1M", "-o", folder.path + "/big.out", base + "/big.bin"])
            try await Task.sleep(for: .milliseconds(500))
            #expect(rename(folder.path + "/b.zip", served) == 0)
            // Replaced, not yet signalled: still the old bundle.
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await get(base, "/page.txt") == "old page")
            kill(process.processIdentifier, SIGHUP)
            var page = ""
            for _ in 0..<30 where page != "new page" {
                page = try await get(base, "/page.txt")
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(page == "new page")
            try await offPool { download.waitUntilExit() }
            #expect(download.terminationStatus == 0)
            #expect(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/big.out")) == big, "the request in flight finished from the old bundle")

            // A file that is not a bundle is refused: the mounted bundles keep answering.
            try folder.file("junk.zip", "not a bundle")
            #expect(rename(folder.path + "/junk.zip", served) == 0)
            kill(process.processIdentifier, SIGHUP)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await get(base, "/page.txt") == "new page")

            #expect(process.isRunning)
        }

        // Replaced without a signal: picked up by the check every --reload-check seconds.
        try FileManager.default.removeItem(atPath: served)
        try FileManager.default.copyItem(atPath: folder.path + "/a.zip", toPath: served)
        try await withServe(served, ["--reload-check", "0.2"]) { base, _ in
            #expect(try await get(base, "/page.txt") == "old page")
            #expect(rename(folder.path + "/c.zip", served) == 0)
            var page = ""
            for _ in 0..<60 where page != "third page" {
                try await Task.sleep(for: .milliseconds(100))
                page = try await get(base, "/page.txt")
            }
            #expect(page == "third page")
        }
    }

    @Test("--access-log writes a line per request in the common log format and what answered; a hostile request line stays one line")
    func accessLog() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        let log = folder.path + "/access.log"
        try await withServe(folder.path + "/b.zip", ["--access-log", log]) { (base, _) async throws -> Void in
            _ = try await run("curl", ["-s", "-o", "/dev/null", base + "/"])
            _ = try await run("curl", ["-s", "-o", "/dev/null", base + "/not-there"])
            _ = try await run("curl", ["-s", "-o", "/dev/null", "--path-as-is", base + "/a%22b\"c"])
            // Asked again: answered from the kept responses, and logged the same.
            _ = try await run("curl", ["-s", "-o", "/dev/null", base + "/"])
            var lines: [String] = []
            for _ in 0..<20 where lines.count < 4 {
                try await Task.sleep(for: .milliseconds(50))
                lines = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
            }
            #expect(lines.count == 4, "\(lines)")
            // A miss adds a last field: why, against the nearest recorded request.
            let pattern = #/^127\.0\.0\.1 - - \[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d \+0000\] "GET \S+ HTTP/1\.1" \d{3} (\d+|-) "[^"]+"( "miss: [^"]+")?$/#
            #expect(lines.allSatisfy { $0.wholeMatch(of: pattern) != nil }, "\(lines)")
            // The last field says what answered: the bundle's file name, or "-" when nothing in the bundles did.
            #expect(lines.first?.hasSuffix("\"GET / HTTP/1.1\" 200 \(samplePage.utf8.count) \"b.zip\"") == true, "\(lines)")
            #expect(lines.dropFirst().first?.contains("\" 404 ") == true)
            #expect(lines.dropFirst().first?.hasSuffix(" \"-\" \"miss: nothing recorded under https://docs.example.com/not-there\"") == true, "\(lines)")
            #expect(lines.dropFirst(2).first?.contains("a%22b\\x22c") == true, "\(lines)")
            #expect(lines.last?.hasSuffix("\"GET / HTTP/1.1\" 200 \(samplePage.utf8.count) \"b.zip\"") == true, "\(lines)")
            #expect(lines.last?.hasPrefix("127.0.0.1 - - [") == true, "\(lines)")
        }
    }

    @Test("--rules: a runtime block answers 204 and a substitution its file, before the bundle; the access log names the rules")
    func rules() async throws {
        let folder = try TemporaryFolder()
        try writeSampleBundle(origin: "https://docs.example.com", to: folder.path + "/b.zip")
        try folder.file("local/flags.json", "{\"on\":true}")
        try folder.file(
            "rules.yml",
            """
            block: ["*/beacons/*"]
            substitutions:
              - url: https://docs.example.com/flags.json
                file: local/flags.json
            """)
        let log = folder.path + "/access.log"
        try await withServe(folder.path + "/b.zip", ["--rules", folder.path + "/rules.yml", "--access-log", log]) { (base, _) async throws -> Void in
            #expect(try await run("curl", ["-s", base + "/flags.json"]).output == "{\"on\":true}")
            let blocked = try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", base + "/beacons/x"]).output
            #expect(blocked == "204")
            #expect(try await run("curl", ["-s", base + "/"]).output == samplePage)
            var lines: [String] = []
            for _ in 0..<20 where lines.count < 3 {
                try await Task.sleep(for: .milliseconds(50))
                lines = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
            }
            #expect(lines.map { $0.split(separator: " ").last.map(String.init) ?? "" } == ["\"rules\"", "\"rules\"", "\"b.zip\""], "\(lines)")
        }
        // A broken rules file stops serve with its line.
        try folder.file("bad.yml", "block: oops\n")
        let result = try await run(packagerExecutable, ["serve", "--rules", folder.path + "/bad.yml", folder.path + "/b.zip"])
        #expect(result.status == 2 && result.output.contains("bad.yml:1:8: block must be a list"), "\(result.output)")
    }
}
