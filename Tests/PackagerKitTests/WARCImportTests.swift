import Crypto
import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// Web archives packed into bundles (`packager pack --from-warc`): a bundle's own export read back, a WARC recorded
/// from a live origin by warcio, and damaged archives refused whole.
@Suite("WARC and WACZ import")
struct WARCImportTests {
    /// Every entry of `original` answered by `imported` alike: the same key, status and body (blocked entries are not
    /// exchanges, and are not exported).
    static func expectSameAnswers(_ imported: String, as original: String) throws {
        let before = try MountedBundle(path: original)
        let after = try MountedBundle(path: imported)
        var compared = 0
        for entry in before.entries where entry.kind != .blocked {
            let other = try #require(after.entry(forKey: entry.key), "\(entry.key) is not in the imported bundle")
            #expect(other.status == entry.status, "\(entry.key)")
            #expect(try after.body(of: other) == before.body(of: entry), "\(entry.key)")
            compared += 1
        }
        #expect(compared == 7 && after.entryCount == compared, "\(compared) compared, \(after.entryCount) imported")
    }

    @Test("bundle → WARC → bundle and bundle → WACZ → bundle: every entry answers alike (a POST by its body, a body stored once through its revisit)")
    func roundTrip() async throws {
        let folder = try TemporaryFolder()
        _ = try WARCExportTests.bundle(at: folder.path + "/b.zip")
        for format in ["warc", "wacz"] {
            let archive = folder.path + "/b." + (format == "warc" ? "warc.gz" : "wacz")
            let exported = try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", format, "-o", archive])
            #expect(exported.status == 0, "\(exported.output)")
            let packed = try await run(packagerExecutable, ["pack", "--from-warc", archive, "-o", folder.path + "/again-\(format).zip"])
            #expect(packed.status == 0 && packed.output.contains("packed 7 recorded exchanges"), "\(packed.output)")
            try Self.expectSameAnswers(folder.path + "/again-\(format).zip", as: folder.path + "/b.zip")
        }
    }

    @Test(
        "the same archive twice: every request's later answer is kept, the earlier left out and listed; a body over 1 MiB (a file while the archive is read) and its revisit answer alike"
    )
    func twiceAndLarge() async throws {
        let folder = try TemporaryFolder()
        _ = try WARCExportTests.bundle(at: folder.path + "/b.zip")
        let warc = folder.path + "/b.warc.gz"
        #expect(try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", "warc", "-o", warc]).status == 0)
        let twice = try await run(packagerExecutable, ["pack", "--from-warc", warc, "--from-warc", warc, "-o", folder.path + "/twice.zip"])
        #expect(twice.status == 0 && twice.output.contains("packed 7 recorded exchanges"), "\(twice.output)")
        #expect(twice.output.components(separatedBy: "whose answer is kept").count - 1 == 7, "\(twice.output)")
        try Self.expectSameAnswers(folder.path + "/twice.zip", as: folder.path + "/b.zip")

        // Two files of the same 1.5 MB (text: compressed, its spooled file could then go): the WARC holds one response
        // and a revisit of it, which needs that file still.
        try FileManager.default.createDirectory(atPath: folder.path + "/site", withIntermediateDirectories: true)
        let large = Data((0..<60_000).map { "line \($0) of a large page\n" }.joined().utf8)
        #expect(large.count > 1 << 20)
        try large.write(to: URL(fileURLWithPath: folder.path + "/site/a.txt"))
        try large.write(to: URL(fileURLWithPath: folder.path + "/site/b.txt"))
        try Data("<p>small</p>".utf8).write(to: URL(fileURLWithPath: folder.path + "/site/index.html"))
        let packed = try await run(packagerExecutable, ["pack", folder.path + "/site", "--base-url", "https://large.test/", "-o", folder.path + "/large.zip"])
        #expect(packed.status == 0, "\(packed.output)")
        let largeWARC = folder.path + "/large.warc.gz"
        #expect(try await run(packagerExecutable, ["export", folder.path + "/large.zip", "--format", "warc", "-o", largeWARC]).status == 0)
        let records = try Data(contentsOf: URL(fileURLWithPath: largeWARC))
        #expect(try WARCPlain.inflate(records).range(of: Data("warc-type: revisit".utf8)) != nil)
        let imported = try await run(packagerExecutable, ["pack", "--from-warc", largeWARC, "-o", folder.path + "/large-again.zip"])
        #expect(imported.status == 0, "\(imported.output)")
        let bundle = try MountedBundle(path: folder.path + "/large-again.zip")
        for path in ["a.txt", "b.txt"] {
            let entry = try #require(bundle.entry(forKey: "https://large.test/" + path))
            #expect(try bundle.body(of: entry) == large, "\(path)")
        }
        // Nothing is left beside the output: the import's scratch folder (its entries, spooled bodies, payloads) is gone.
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasPrefix(".") }
        #expect(left.isEmpty, "\(left)")
    }

    @Test("a WARC that warcio recorded from a live origin (a page, a gzip answer, a POST): the bundle answers as the origin did")
    func recordedByWarcio() async throws {
        let python = try #require(warcio).replacingOccurrences(of: "/warcio", with: "/python3")
        let folder = try TemporaryFolder()
        let text = String(repeating: "offline ", count: 20_000)
        try folder.file("big.txt", text)
        let zipping = try await run(
            "python3",
            [
                "-c", "import gzip, sys; open(sys.argv[2], 'wb').write(gzip.compress(open(sys.argv[1], 'rb').read()))", folder.path + "/big.txt",
                folder.path + "/big.gz",
            ])
        try #require(zipping.status == 0, "\(zipping.output)")
        let origin = Origin()
        try await origin.start()
        try await afterwards(origin.stop) {
            origin.set("/", .text("<p>home</p>", type: "text/html"))
            var gzipped = Origin.Resource.text("", type: "text/plain", headers: [("content-encoding", "gzip")])
            gzipped.body = Array(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/big.gz")))
            origin.set("/big.txt", gzipped)
            origin.set("/search", .text("[\"apple\"]", type: "application/json"))
            try folder.file(
                "record.py",
                """
                import sys, http.client, urllib.parse
                from warcio.capture_http import capture_http
                u = urllib.parse.urlparse(sys.argv[2])
                with capture_http(sys.argv[1]):
                    c = http.client.HTTPConnection(u.hostname, u.port)
                    c.request('GET', '/'); c.getresponse().read()
                    c.request('GET', '/big.txt', headers={'Accept-Encoding': 'gzip'}); c.getresponse().read()
                    c.request('POST', '/search', body='{"q":"a"}', headers={'Content-Type': 'application/json'}); c.getresponse().read()
                """)
            let recorded = try await run(python, [folder.path + "/record.py", folder.path + "/live.warc.gz", origin.base])
            try #require(recorded.status == 0, "\(recorded.output)")
            let packed = try await run(
                packagerExecutable, ["pack", "--from-warc", folder.path + "/live.warc.gz", "--match", "*/search json-body", "-o", folder.path + "/b.zip"])
            #expect(packed.status == 0 && packed.output.contains("packed 3 recorded exchanges"), "\(packed.output)")
            let loader = try OfflineLoader(path: folder.path + "/b.zip")
            let base = origin.base
            let home = try #require(loader.response(for: BundleRequest(url: base + "/")))
            #expect(try home.bodyData() == Data("<p>home</p>".utf8))
            let big = try #require(loader.response(for: BundleRequest(url: base + "/big.txt")))
            #expect(try big.bodyData() == Data(text.utf8), "the page as the origin meant it, inflated")
            let post = try #require(loader.response(for: BundleRequest(method: "POST", url: base + "/search", body: Data("{ \"q\": \"a\" }".utf8))))
            #expect(try post.bodyData() == Data("[\"apple\"]".utf8), "the POST answered by its body (canonical JSON)")
            #expect(loader.response(for: BundleRequest(method: "POST", url: base + "/search", body: Data("{\"q\":\"b\"}".utf8))) == nil)
            // What the client wrote itself (Host, Content-Length) is not kept with the requests, and verify asks the
            // origin again: every entry fresh, none left unverifiable for a Host it would count a secret.
            let manifest = try MountedBundle(path: folder.path + "/b.zip").manifest()
            let sentNames = Set(manifest.entries.flatMap { $0.request?.headers.map { $0[0] } ?? [] })
            #expect(sentNames.isDisjoint(with: ["host", "content-length"]) && sentNames.contains("content-type"), "\(sentNames)")
            let verified = try await run(
                packagerExecutable, ["verify", folder.path + "/b.zip", "--resend-unsafe", "--json", "--allow-private-addresses", "-o", folder.path + "/v.json"])
            let report = try JSONDecoder().decode(VerifyReport.self, from: Data(contentsOf: URL(fileURLWithPath: folder.path + "/v.json")))
            #expect(verified.status == 0 && report.entries.count == 3 && report.entries.allSatisfy { $0.verdict == .fresh }, "\(verified.output)")
            // And back out: the bundle's WARC holds every payload as the origin meant it (the gzip page inflated), which
            // warcio reads and checks.
            let again = try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", "warc", "-o", folder.path + "/again.warc.gz"])
            #expect(again.status == 0, "\(again.output)")
            let records = try await WARCExportTests.read(folder.path + "/again.warc.gz")
            for (path, body) in [("/", Data("<p>home</p>".utf8)), ("/big.txt", Data(text.utf8)), ("/search", Data("[\"apple\"]".utf8))] {
                let record = try #require(records.first { $0["uri"] == base + path && $0["type"] == "response" }, "\(path)")
                #expect(record["sha256"] == hexString(SHA256Digest.of(body)), "\(path): \(record)")
            }
        }
    }

    @Test(
        "a WARC that pywb's recording mode wrote from a live origin (a page, a POST by its body) packs into a bundle that answers as pywb replays",
        .enabled(if: wayback != nil, "pywb is not installed: make deps installs it into .venv-pywb"))
    func recordedByPywb() async throws {
        let folder = try TemporaryFolder()
        let origin = Origin()
        try await origin.start()
        try await afterwards(origin.stop) {
            origin.set("/", .text("<p>recorded by pywb</p>", type: "text/html"))
            origin.route("/search") { received in
                .text(received.body == Data("{\"q\":\"a\"}".utf8) ? "[\"apple\"]" : "[\"other\"]", type: "application/json")
            }
            let manager = try #require(wayback).replacingOccurrences(of: "/wayback", with: "/wb-manager")
            #expect(try await run(manager, ["init", "rec"], in: folder.path).status == 0)
            // pywb records through its live collection.
            try folder.file("config.yaml", "collections:\n  live: $live\nrecorder: live\n")
            let server = try await APIServer.start(try #require(wayback), ["-p", "{port}", "-b", "127.0.0.1"], probe: "/", in: folder.path)
            let page = try await run("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(server.base)/rec/record/id_/\(origin.base)/"])
            let post = try await run(
                "curl",
                ["-s", "-X", "POST", "-H", "Content-Type: application/json", "-d", #"{"q":"a"}"#, "\(server.base)/rec/record/id_/\(origin.base)/search"])
            server.stop()
            #expect(page.output == "200" && post.output == #"["apple"]"#, "\(page.output) \(post.output)")
            let archive = folder.path + "/collections/rec/archive"
            let warcs = try FileManager.default.contentsOfDirectory(atPath: archive).filter { $0.hasSuffix(".warc.gz") }.map { archive + "/" + $0 }
            try #require(!warcs.isEmpty, "pywb wrote no WARC")
            let packed = try await run(
                packagerExecutable, ["pack"] + warcs.flatMap { ["--from-warc", $0] } + ["--match", "*/search json-body", "-o", folder.path + "/b.zip"])
            #expect(packed.status == 0 && packed.output.contains("packed 2 recorded exchanges"), "\(packed.output)")
            let loader = try OfflineLoader(path: folder.path + "/b.zip")
            let home = try #require(loader.response(for: BundleRequest(url: origin.base + "/")))
            #expect(try home.bodyData() == Data("<p>recorded by pywb</p>".utf8))
            let search = try #require(loader.response(for: BundleRequest(method: "POST", url: origin.base + "/search", body: Data(#"{ "q": "a" }"#.utf8))))
            #expect(try search.bodyData() == Data(#"["apple"]"#.utf8))
        }
    }

    /// A WARC record of `type` whose block is `block`, with `fields` (a `WARC-Record-ID` made of `id`, none for nil).
    static func record(_ type: String, id: String?, uri: String, _ fields: [String: String] = [:], block: String) -> String {
        var head = "WARC/1.1\r\nWARC-Type: \(type)\r\n" + (id.map { "WARC-Record-ID: <urn:uuid:\($0)>\r\n" } ?? "") + "WARC-Target-URI: \(uri)\r\n"
        head += "WARC-Date: 2026-11-29T12:00:00Z\r\n"
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) { head += "\(name): \(value)\r\n" }
        return head + "Content-Length: \(block.utf8.count)\r\n\r\n" + block + "\r\n\r\n"
    }

    @Test(
        "a revisit takes its payload from the response's record, read again: in a plain WARC, from a gzip member of several records, from another WARC, from a record that starts inside a member another ends in, and (kept aside) from a WARC gzipped whole"
    )
    func revisitsReadTheirRecordAgain() async throws {
        let folder = try TemporaryFolder()
        func digest(_ text: String) -> String { "sha256:" + SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined() }
        let alpha = "<p>alpha</p>"
        let bravo = "{\"bravo\": true}"
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
        let revisitProfile = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
        let a = Self.record("response", id: "a", uri: "https://r.test/a", ["WARC-Payload-Digest": digest(alpha)], block: head + alpha)
        let b = Self.record("response", id: "b", uri: "https://r.test/b", ["WARC-Payload-Digest": digest(bravo)], block: head + bravo)
        // By its record ID, and by its payload digest alone.
        let c = Self.record(
            "revisit", id: "c", uri: "https://r.test/c",
            ["WARC-Refers-To": "<urn:uuid:b>", "WARC-Profile": revisitProfile, "WARC-Payload-Digest": digest(bravo)], block: head)
        let d = Self.record("revisit", id: "d", uri: "https://r.test/d", ["WARC-Profile": revisitProfile, "WARC-Payload-Digest": digest(alpha)], block: head)
        func gzip(_ text: String, _ name: String) async throws -> Data {
            try folder.file(name, text)
            #expect(try await run("gzip", ["-n", "-f", folder.path + "/" + name]).status == 0)
            return try Data(contentsOf: URL(fileURLWithPath: folder.path + "/" + name + ".gz"))
        }
        // Plain; a and b in one gzip member, c and d in the next; a in one WARC, the revisits in another.
        try folder.file("plain.warc", a + b + c + d)
        let members = try await gzip(a + b, "m1.warc") + (try await gzip(c + d, "m2.warc"))
        try members.write(to: URL(fileURLWithPath: folder.path + "/members.warc.gz"))
        try folder.file("first.warc", a + b)
        try folder.file("second.warc", c + d)
        // A response without a record ID that starts inside the member the one before it ends in, after a request
        // without one either; its revisit names its digest. The record before it spans two members.
        let echo = "echo"
        let e = Self.record("response", id: nil, uri: "https://r.test/e", ["WARC-Payload-Digest": digest(echo)], block: head + echo)
        let q = Self.record("request", id: nil, uri: "https://r.test/e", block: "GET /e HTTP/1.1\r\nHost: r.test\r\n\r\n")
        let r = Self.record("revisit", id: "r", uri: "https://r.test/r", ["WARC-Profile": revisitProfile, "WARC-Payload-Digest": digest(echo)], block: head)
        // And a revisit of b, which starts after a in the first member and ends in the second.
        let t = Self.record(
            "revisit", id: "t", uri: "https://r.test/t", ["WARC-Refers-To": "<urn:uuid:b>", "WARC-Profile": revisitProfile], block: head)
        let half = b.utf8.count / 2
        let split =
            try await gzip(a + String(decoding: Array(b.utf8)[..<half], as: UTF8.self), "s1.warc")
            + (try await gzip(String(decoding: Array(b.utf8)[half...], as: UTF8.self) + q + e, "s2.warc")) + (try await gzip(r + t, "s3.warc"))
        try split.write(to: URL(fileURLWithPath: folder.path + "/split.warc.gz"))
        // One member for every record, past what is inflated whole (16 MiB): its bodies are kept aside, not read again.
        let padding = String(repeating: "padding line\n", count: 1_400_000)
        let large = Self.record("response", id: "p", uri: "https://r.test/p", block: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + padding)
        try (try await gzip(a + b + large + c + d, "whole.warc")).write(to: URL(fileURLWithPath: folder.path + "/whole.warc.gz"))
        let cases: [(sources: [String], answers: [(String, String)])] = [
            (["plain.warc"], [("a", alpha), ("b", bravo), ("c", bravo), ("d", alpha)]),
            (["members.warc.gz"], [("a", alpha), ("b", bravo), ("c", bravo), ("d", alpha)]),
            (["first.warc", "second.warc"], [("a", alpha), ("b", bravo), ("c", bravo), ("d", alpha)]),
            (["split.warc.gz"], [("a", alpha), ("b", bravo), ("e", echo), ("r", echo), ("t", bravo)]),
            (["whole.warc.gz"], [("a", alpha), ("b", bravo), ("c", bravo), ("d", alpha), ("p", padding)]),
        ]
        for (sources, answers) in cases {
            let output = folder.path + "/\(sources[0]).zip"
            let packed = try await run(
                packagerExecutable, ["pack"] + sources.flatMap { ["--from-warc", folder.path + "/" + $0] } + ["-o", output])
            #expect(packed.status == 0 && packed.output.contains("packed \(answers.count) recorded exchanges"), "\(sources): \(packed.output)")
            let bundle = try MountedBundle(path: output)
            for (path, body) in answers {
                let entry = try #require(bundle.entry(forKey: "https://r.test/" + path), "\(sources): \(path)")
                #expect(try bundle.body(of: entry) == Data(body.utf8), "\(sources): \(path)")
            }
        }
        // Returned in memory (``WARCImporter/read(_:rules:)``), the revisit takes the body kept.
        let imported = try WARCImporter.read([folder.path + "/members.warc.gz"], rules: BundleRules())
        defer { imported.removeSpool() }
        #expect(imported.entries.first { $0.url == "https://r.test/c" }.flatMap { if case .data(let data) = $0.body { data } else { nil } } == Data(bravo.utf8))
    }

    @Test(
        "requests that never get a response and responses without a request, past the pairing window of 256: the responses are taken as GETs, a POST and its response still pair, across them"
    )
    func pairingWindow() throws {
        let folder = try TemporaryFolder()
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"
        var text = ""
        // 600 requests whose responses never come (failed fetches).
        for i in 0..<600 {
            text += Self.record("request", id: "q\(i)", uri: "https://p.test/lost/\(i)", block: "GET /lost/\(i) HTTP/1.1\r\nHost: p.test\r\n\r\n")
        }
        // A POST's request, then its response, naming each other.
        text += Self.record(
            "request", id: "post-q", uri: "https://p.test/search", ["WARC-Concurrent-To": "<urn:uuid:post-r>"],
            block: "POST /search HTTP/1.1\r\nHost: p.test\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{\"q\": 1}")
        text += Self.record("response", id: "post-r", uri: "https://p.test/search", block: head + "found")
        // 600 responses whose requests are not in the archive.
        for i in 0..<600 { text += Self.record("response", id: "r\(i)", uri: "https://p.test/page/\(i)", block: head + "page \(i)") }
        try Data(text.utf8).write(to: URL(fileURLWithPath: folder.path + "/window.warc"))
        let imported = try WARCImporter.read([folder.path + "/window.warc"], rules: BundleRules())
        #expect(imported.entries.count == 601)
        let post = try #require(imported.entries.first { $0.url == "https://p.test/search" })
        #expect(post.request?.method == "POST")
        #expect(imported.entries.filter { $0.url.contains("/page/") && ($0.request?.method ?? "GET") == "GET" }.count == 600)
    }

    @Test("1,500 records the import cannot take: the first 1,000 listed with their place and reason, the rest counted, as pack says")
    func skippedAreCountedPastAThousand() async throws {
        let folder = try TemporaryFolder()
        var text = Self.record("response", id: "page", uri: "https://s.test/", block: "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<p>page</p>")
        for i in 0..<1_500 { text += Self.record("resource", id: "shot\(i)", uri: "urn:pageinfo:https://s.test/\(i)", block: "{}") }
        try Data(text.utf8).write(to: URL(fileURLWithPath: folder.path + "/many.warc"))
        let imported = try WARCImporter.read([folder.path + "/many.warc"], rules: BundleRules())
        #expect(imported.entries.count == 1)
        #expect(imported.skipped.count == 1_000 && imported.moreSkipped == 500)
        #expect(imported.skipped.last?.reason.contains("'resource' record") == true)
        let packed = try await run(packagerExecutable, ["pack", "--from-warc", folder.path + "/many.warc", "-o", folder.path + "/many.zip"])
        #expect(packed.status == 0, "\(packed.output)")
        #expect(packed.output.contains("skipped 500 more, not listed (the first 1000 are)"), "\(packed.output.suffix(300))")
        #expect(packed.output.components(separatedBy: "\n  skipped the record at offset").count - 1 == 1_000)
    }

    @Test("a chunked body is joined; a chunk size that is not hexadecimal, or a body cut short, is unreadable")
    func chunks() throws {
        #expect(try WARCImporter.dechunked(Data("5\r\nhello\r\n6;x=1\r\n world\r\n0\r\n\r\n".utf8)) == Data("hello world".utf8))
        #expect(throws: WARCImporter.Unreadable.self) { try WARCImporter.dechunked(Data("zz\r\nhello\r\n".utf8)) }
        #expect(throws: WARCImporter.Unreadable.self) { try WARCImporter.dechunked(Data("10\r\nhello".utf8)) }
    }

    @Test("damaged archives are refused whole, naming the record's offset or the file, and nothing is written")
    func damagedRefused() async throws {
        let folder = try TemporaryFolder()
        _ = try WARCExportTests.bundle(at: folder.path + "/b.zip")
        let warc = folder.path + "/b.warc.gz"
        #expect(try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", "warc", "-o", warc]).status == 0)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: warc))
        // The same records, plain: a WARC's gzip members inflated one after the other.
        let plain = try #require(try? WARCPlain.inflate(bytes))
        func refused(_ name: String, _ data: Data, _ words: String) async throws {
            let path = folder.path + "/" + name
            try data.write(to: URL(fileURLWithPath: path))
            let packed = try await run(packagerExecutable, ["pack", "--from-warc", path, "-o", folder.path + "/out.zip"])
            #expect(packed.status == 2 && packed.output.contains(words), "\(name): \(packed.output)")
            #expect(!FileManager.default.fileExists(atPath: folder.path + "/out.zip"), "\(name): a bundle was written")
        }
        // A gzip member cut short: the file ends inside the last record's member.
        try await refused("cut.warc.gz", bytes.prefix(bytes.count - 40), "is in a gzip member that is cut short")
        // A Content-Length that lies (one more than the block), in a plain WARC.
        let first = try #require(plain.range(of: Data("Content-Length: ".utf8), in: plain.index(plain.startIndex, offsetBy: 10)..<plain.endIndex))
        let lineEnd = try #require(plain.range(of: Data("\r\n".utf8), in: first.upperBound..<plain.endIndex))
        let length = try #require(Int(String(decoding: plain[first.upperBound..<lineEnd.lowerBound], as: UTF8.self)))
        var lying = plain
        lying.replaceSubrange(first.upperBound..<lineEnd.lowerBound, with: Data(String(length + 1).utf8))
        try await refused("lying.warc", lying, "does not end where its Content-Length")
        // A block whose bytes changed: its WARC-Block-Digest does not match.
        let body = try #require(plain.range(of: Data("<html><a href=".utf8)))
        var flipped = plain
        flipped[body.lowerBound + 2] ^= 0x20
        try await refused("flipped.warc", flipped, "does not match its WARC-Block-Digest")
        // A payload digest that names other bytes (the block itself intact, and its own digest matching).
        let payloadField = try #require(plain.range(of: Data("warc-payload-digest: sha256:".utf8)))
        var otherPayload = plain
        otherPayload[payloadField.upperBound] = otherPayload[payloadField.upperBound] == 0x30 ? 0x31 : 0x30
        try await refused("payload.warc", otherPayload, "does not match its WARC-Payload-Digest")
        // A Content-Length near Int.max: refused as cut short, not an overflow.
        var huge = plain
        huge.replaceSubrange(first.upperBound..<lineEnd.lowerBound, with: Data(String(Int.max).utf8))
        try await refused("huge.warc", huge, "is cut short: its Content-Length says \(Int.max) bytes")
        // Not a WARC at all.
        try await refused("page.warc", Data("<html>hello</html>".utf8), "is not a WARC record")
        // A WACZ whose WARC does not match the digest its datapackage.json records.
        let wacz = folder.path + "/b.wacz"
        #expect(try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", "wacz", "-o", wacz]).status == 0)
        // Rewritten with one byte of its WARC changed and its datapackage.json as it was.
        let rezip = try await run(
            "python3",
            [
                "-c",
                """
                import sys, zipfile
                src, dst = sys.argv[1], sys.argv[2]
                with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, 'w', zipfile.ZIP_STORED) as b:
                    for info in a.infolist():
                        data = bytearray(a.read(info.filename))
                        if info.filename == 'archive/data.warc.gz':
                            data[30] ^= 1
                        b.writestr(info.filename, bytes(data))
                """,
                wacz, folder.path + "/damaged-source.wacz",
            ])
        #expect(rezip.status == 0, "\(rezip.output)")
        let package = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/damaged-source.wacz"))
        try await refused("damaged.wacz", package, "archive/data.warc.gz does not match the SHA-256")
        // A WARC the datapackage does not list: it would escape the check.
        let extra = try await run(
            "python3",
            [
                "-c",
                """
                import sys, zipfile
                with zipfile.ZipFile(sys.argv[1]) as a, zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_STORED) as b:
                    for info in a.infolist():
                        b.writestr(info.filename, a.read(info.filename))
                    b.writestr('archive/extra.warc.gz', a.read('archive/data.warc.gz'))
                """,
                wacz, folder.path + "/extra-source.wacz",
            ])
        #expect(extra.status == 0, "\(extra.output)")
        try await refused(
            "extra.wacz", try Data(contentsOf: URL(fileURLWithPath: folder.path + "/extra-source.wacz")), "archive/extra.warc.gz is not listed with its digest")
    }
}

/// A gzipped WARC's members inflated into one plain WARC (for the tests' damage).
enum WARCPlain {
    static func inflate(_ gz: Data) throws -> Data {
        let folder = try TemporaryFolder()
        try gz.write(to: URL(fileURLWithPath: folder.path + "/in.warc.gz"))
        var reader = try WARCReader(path: folder.path + "/in.warc.gz")
        var out = Data()
        while let record = try reader.next() {
            var head = "WARC/1.1\r\n"
            for (name, value) in record.fields.sorted(by: { $0.key < $1.key }) where name != "content-length" { head += "\(name): \(value)\r\n" }
            head += "Content-Length: \(record.block.count)\r\n\r\n"
            out += Data(head.utf8) + record.block + Data("\r\n\r\n".utf8)
        }
        return out
    }
}
