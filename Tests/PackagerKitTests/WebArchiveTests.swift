import Crypto
import Foundation
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

let warcio = APIServer.find("warcio")

/// Bundles written as WARC 1.1 (`packager export --format warc`), read back by warcio (PyPI), the web-archiving
/// world's reader: every record's digests checked, every payload the bundle's body, a body stored once written once.
@Suite("WARC export, read by warcio", .enabled(if: warcio != nil, "warcio is not installed: make deps installs it into .venv-api"))
struct WARCExportTests {
    /// A bundle with what a WARC must carry: pages, a 5 MB binary body (past the 4 MiB a record is held whole to: read in chunks), two URLs with one body, a
    /// redirect, a declared POST with its body, a credential's answer, and a blocked URL.
    static func bundle(at path: String) throws -> [String: Data] {
        var writer = BundleWriter(options: .init(rules: BundleRules(block: ["*/ads/*"]), createdAt: Date(timeIntervalSince1970: 1_767_225_600)))
        var bodies: [String: Data] = [:]
        func add(_ url: String, _ type: String, _ body: Data, status: Int = 200, request: RecordedRequest? = nil, headers: [(String, String)] = []) {
            var entry = RecordedExchange(
                url: url, status: status, headers: [("content-type", type)] + headers, body: .data(body),
                fetchedAt: Date(timeIntervalSince1970: 1_767_225_000))
            entry.request = request
            writer.add(entry)
            bodies[url] = body
        }
        add("https://docs.example/", "text/html", Data("<html><a href=\"/guide/\">guide</a></html>".utf8))
        add("https://docs.example/guide/", "text/html; charset=utf-8", Data(String(repeating: "<p>guide</p>\n", count: 500).utf8))
        add("https://docs.example/copy/", "text/html; charset=utf-8", Data(String(repeating: "<p>guide</p>\n", count: 500).utf8))
        add("https://docs.example/big.bin", "application/octet-stream", noise(5_000_000, seed: 7))
        add("https://docs.example/old", "text/html", Data(), status: 301, headers: [("location", "/guide/")])
        add(
            "https://api.example/search", "application/json", Data("{\"hits\":[\"guide\"]}".utf8),
            request: RecordedRequest(method: "POST", headers: [.init(name: "content-type", value: "application/json")], body: Data("{\"q\":\"guide\"}".utf8)))
        add(
            "https://api.example/private", "application/json", Data("{\"for\":\"bearers\"}".utf8),
            request: RecordedRequest(keyHeaders: [.init(name: "authorization", value: "bearer")]))
        writer.add(.init(url: "https://docs.example/ads/pixel.gif", status: 204, kind: .blocked))
        try writer.write(to: path)
        return bodies
    }

    /// What warcio reads of `warc`: one line per record (type, target, payload's SHA-256 in hex, referred-to target,
    /// concurrent-to, record ID), after `warcio check` passed every digest.
    static func read(_ warc: String) async throws -> [[String: String]] {
        let script = """
            import hashlib, json, sys
            from warcio.archiveiterator import ArchiveIterator
            with open(sys.argv[1], 'rb') as f:
                for record in ArchiveIterator(f):
                    h = record.rec_headers
                    payload = record.content_stream().read()
                    print(json.dumps({'type': record.rec_type, 'uri': h.get_header('WARC-Target-URI') or '',
                        'sha256': hashlib.sha256(payload).hexdigest(), 'refersTo': h.get_header('WARC-Refers-To-Target-URI') or '',
                        'concurrentTo': h.get_header('WARC-Concurrent-To') or '', 'id': h.get_header('WARC-Record-ID'),
                        'status': record.http_headers.get_statuscode() if record.http_headers and record.rec_type != 'request' else '',
                        'method': record.http_headers.protocol if record.rec_type == 'request' else '',
                        'payload': payload.decode('utf-8', 'replace') if record.rec_type == 'request' else ''}))
            """
        let python = try #require(warcio).replacingOccurrences(of: "/warcio", with: "/python3")
        let listed = try await run(python, ["-c", script, warc])
        #expect(listed.status == 0, "\(listed.output)")
        return listed.output.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: String]
        }
    }

    @Test("every entry a response (or a revisit of a body stored once) and its request; warcio checks every digest; the same bundle, the same bytes")
    func exportRead() async throws {
        let folder = try TemporaryFolder()
        let bodies = try Self.bundle(at: folder.path + "/b.zip")
        let exported = try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", "warc", "-o", folder.path + "/b.warc.gz"])
        #expect(exported.status == 0 && exported.output.contains("7 entries") && exported.output.contains("1 blocked"), "\(exported.output)")
        let checked = try await run(try #require(warcio), ["check", "-v", folder.path + "/b.warc.gz"])
        #expect(checked.status == 0 && checked.output.contains("digest pass"), "\(checked.output)")
        #expect(!checked.output.contains("fail"), "\(checked.output)")

        let records = try await Self.read(folder.path + "/b.warc.gz")
        #expect(records.first?["type"] == "warcinfo")
        #expect(records.filter { $0["type"] == "request" }.count == 7 && records.count == 15, "\(records.map { $0["type"] ?? "" })")
        // Each response's payload is the bundle's body; the copy's body is a revisit of the first URL that holds it.
        for (url, body) in bodies {
            let record = try #require(records.first { $0["uri"] == url && $0["type"] != "request" }, "\(url)")
            let digest = hexString(Array(SHA256Digest.of(body)))
            if url == "https://docs.example/guide/" || url == "https://docs.example/copy/" {
                #expect(record["type"] == "response" || record["refersTo"] != "", "\(record)")
            } else {
                #expect(record["type"] == "response" && record["sha256"] == digest, "\(url): \(record)")
            }
        }
        let copies = records.filter { ["https://docs.example/guide/", "https://docs.example/copy/"].contains($0["uri"]) && $0["type"] != "request" }
        #expect(copies.map { $0["type"] ?? "" }.sorted() == ["response", "revisit"], "\(copies)")
        let revisit = try #require(copies.first { $0["type"] == "revisit" })
        #expect(copies.contains { $0["type"] == "response" && $0["uri"] == revisit["refersTo"] })
        #expect(records.first { $0["uri"] == "https://docs.example/old" }?["status"] == "301")
        // The declared POST's request record carries its method and body; each request is concurrent to its response.
        let post = try #require(records.first { $0["type"] == "request" && $0["uri"] == "https://api.example/search" })
        #expect(post["payload"] == "{\"q\":\"guide\"}", "\(post)")
        for request in records where request["type"] == "request" {
            #expect(records.contains { $0["id"] == request["concurrentTo"] && $0["uri"] == request["uri"] }, "\(request)")
        }
        #expect(!records.contains { $0["uri"]?.contains("/ads/") == true }, "a blocked entry is not an exchange")

        // Reproducible: the same bundle exports to the same bytes (under the same name: warcinfo names the file).
        try FileManager.default.createDirectory(atPath: folder.path + "/again", withIntermediateDirectories: true)
        let again = try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", "warc", "-o", folder.path + "/again/b.warc.gz"])
        #expect(again.status == 0)
        #expect(
            try Data(contentsOf: URL(fileURLWithPath: folder.path + "/b.warc.gz")) == Data(contentsOf: URL(fileURLWithPath: folder.path + "/again/b.warc.gz")))
        // One gzip member per record: gzip reads the whole as one stream, and each record starts a member.
        let members = try await run("sh", ["-c", "gzip -t '\(folder.path)/b.warc.gz' && gzip -dc '\(folder.path)/b.warc.gz' | grep -c '^WARC/1.1'"])
        #expect(members.status == 0 && members.output.trimmingCharacters(in: .whitespacesAndNewlines) == "15", "\(members.output)")
    }

    @Test(
        "members compressed on the writer's thread come out in the order given: a streamed member waits for the queued ones, each index record names its own member, and the file's digest is its bytes'"
    )
    func pipelineKeepsOrder() async throws {
        let folder = try TemporaryFolder()
        let output = try AtomicOutput(destination: folder.path + "/m.gz")
        let pipeline = MemberPipeline(members: GzipMembers(output: output))
        var expected = Data()
        var records: [WARCExporter.IndexedRecord] = []
        func record(_ number: Int) -> WARCExporter.IndexedRecord {
            .init(
                url: "member \(number)", date: Date(), status: 200, mediaType: "", payloadDigest: "", revisit: false, method: "GET", requestBody: nil,
                requestContentType: nil, offset: 0, length: 0)
        }
        // Rounds of queued members (256 KiB of noise each: the queue is full while they are compressed), then one streamed.
        for round in 0..<3 {
            for number in 0..<MemberPipeline.ahead {
                let bytes = Array(noise(256 << 10, seed: UInt64(round * 100 + number)))
                expected.append(contentsOf: bytes)
                try pipeline.submit(bytes, indexed: record(round * 100 + number))
            }
            let streamed = Data("streamed after round \(round)\n".utf8)
            expected.append(streamed)
            try pipeline.exclusive(indexed: record(round * 100 + 99)) { members in
                try members.begin()
                try members.feed(streamed)
                try members.finish()
            }
            // What was written so far is handed over as it goes (a streamed member waits for the queue: all of it).
            let taken = pipeline.takeWritten()
            #expect(taken.count == MemberPipeline.ahead + 1, "round \(round)")
            records += taken
        }
        let (rest, members) = try pipeline.finish()
        records += rest
        try output.commit()
        let file = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/m.gz"))
        #expect(members.sha256 == hexString(Array(SHA256Digest.of(file))) && members.offset == UInt64(file.count))
        let inflated = try await run("sh", ["-c", "gzip -dc '\(folder.path)/m.gz' | sha256sum"])
        #expect(inflated.output.hasPrefix(hexString(Array(SHA256Digest.of(expected)))), "the members, in order")
        // Every index record names its own member, one after another.
        #expect(
            records.map(\.url) == (0..<3).flatMap { round in (0..<MemberPipeline.ahead).map { "member \(round * 100 + $0)" } + ["member \(round * 100 + 99)"] })
        var next: UInt64 = 0
        for record in records {
            #expect(record.offset == next && record.length > 0, "\(record.url)")
            next = record.offset + record.length
        }
        #expect(next == UInt64(file.count))
    }

    @Test("a damaged body is refused, naming it, and no WARC is left at the output")
    func damagedBodyRefused() async throws {
        let folder = try TemporaryFolder()
        _ = try Self.bundle(at: folder.path + "/b.zip")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/b.zip"))
        // The 5 MB of noise is stored as it is: flip a byte in the middle of the file, inside it.
        bytes[bytes.count / 2] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: folder.path + "/damaged.zip"))
        let exported = try await run(packagerExecutable, ["export", folder.path + "/damaged.zip", "--format", "warc", "-o", folder.path + "/d.warc.gz"])
        #expect(exported.status == 1 && exported.output.contains("big.bin"), "\(exported.output)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/d.warc.gz"))
    }
}

let wacz = APIServer.find("wacz")

/// Bundles written as WACZ 1.1.1 (`packager export --format wacz`), checked by py-wacz's `wacz validate` (PyPI).
@Suite("WACZ export, checked by wacz validate", .enabled(if: wacz != nil && warcio != nil, "py-wacz is not installed: make deps installs it into .venv-api"))
struct WACZExportTests {
    @Test(
        "a WACZ signed with the bundle key: wacz validate passes, pack --from-warc --public-key takes it and names the signer; another key, no signature, a WARC, or a changed datapackage are refused"
    )
    func signedPackage() async throws {
        let folder = try TemporaryFolder()
        _ = try WARCExportTests.bundle(at: folder.path + "/b.zip")
        for prefix in ["release", "other"] { #expect(try await run(packagerExecutable, ["keygen", "-o", prefix], in: folder.path).status == 0) }
        let signed = folder.path + "/signed.wacz"
        let exported = try await run(
            packagerExecutable, ["export", folder.path + "/b.zip", "--format", "wacz", "--sign-key", folder.path + "/release.key", "-o", signed])
        #expect(exported.status == 0 && exported.output.contains("signed by ed25519:"), "\(exported.output)")
        // The same signature again: the export stays reproducible.
        #expect(
            try await run(
                packagerExecutable,
                ["export", folder.path + "/b.zip", "--format", "wacz", "--sign-key", folder.path + "/release.key", "-o", folder.path + "/again.wacz"]
            ).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: signed)) == Data(contentsOf: URL(fileURLWithPath: folder.path + "/again.wacz")))
        let validated = try await run(try #require(wacz), ["validate", "-f", signed])
        #expect(validated.status == 0 && !validated.output.lowercased().contains("invalid"), "\(validated.output)")
        func pack(_ archive: String, key: String?) async throws -> ToolResult {
            try? FileManager.default.removeItem(atPath: folder.path + "/out.zip")
            return try await run(
                packagerExecutable,
                ["pack", "--from-warc", archive] + (key.map { ["--public-key", folder.path + "/" + $0] } ?? []) + ["-o", folder.path + "/out.zip"])
        }
        let taken = try await pack(signed, key: "release.pub")
        #expect(taken.status == 0 && taken.output.contains("the WACZ's signature checked: signed by ed25519:"), "\(taken.output)")
        try WARCImportTests.expectSameAnswers(folder.path + "/out.zip", as: folder.path + "/b.zip")
        // Refused, and no bundle written: another key; an unsigned WACZ; a plain WARC; a datapackage changed with its digest.
        let other = try await pack(signed, key: "other.pub")
        #expect(other.status == 2 && other.output.contains("not by the key given"), "\(other.output)")
        #expect(try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", "wacz", "-o", folder.path + "/plain.wacz"]).status == 0)
        let unsigned = try await pack(folder.path + "/plain.wacz", key: "release.pub")
        #expect(unsigned.status == 2 && unsigned.output.contains("is not signed"), "\(unsigned.output)")
        #expect(try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", "warc", "-o", folder.path + "/b.warc.gz"]).status == 0)
        let warc = try await pack(folder.path + "/b.warc.gz", key: "release.pub")
        #expect(warc.status == 2 && warc.output.contains("carries no signature"), "\(warc.output)")
        // The title in datapackage.json changed, and datapackage-digest.json's hash made to match it: only the signature
        // can tell.
        let forged = try await run(
            "python3",
            [
                "-c",
                """
                import sys, json, hashlib, zipfile
                with zipfile.ZipFile(sys.argv[1]) as a, zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_STORED) as b:
                    package = a.read('datapackage.json').replace(b'"title"', b'"title2"')
                    digest = json.loads(a.read('datapackage-digest.json'))
                    digest['hash'] = 'sha256:' + hashlib.sha256(package).hexdigest()
                    for info in a.infolist():
                        data = a.read(info.filename)
                        if info.filename == 'datapackage.json': data = package
                        if info.filename == 'datapackage-digest.json': data = json.dumps(digest).encode()
                        b.writestr(info.filename, data)
                """,
                signed, folder.path + "/forged.wacz",
            ])
        #expect(forged.status == 0, "\(forged.output)")
        // A datapackage-digest.json that is not JSON: refused, not read as unsigned.
        let garbled = try await run(
            "python3",
            [
                "-c",
                """
                import sys, zipfile
                with zipfile.ZipFile(sys.argv[1]) as a, zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_STORED) as b:
                    for info in a.infolist():
                        b.writestr(info.filename, b'not json' if info.filename == 'datapackage-digest.json' else a.read(info.filename))
                """,
                signed, folder.path + "/garbled.wacz",
            ])
        #expect(garbled.status == 0, "\(garbled.output)")
        let unreadable = try await pack(folder.path + "/garbled.wacz", key: nil)
        #expect(unreadable.status == 2 && unreadable.output.contains("datapackage-digest.json is not a JSON object"), "\(unreadable.output)")
        for key in ["release.pub", nil] {
            let refused = try await pack(folder.path + "/forged.wacz", key: key)
            #expect(refused.status == 2 && refused.output.contains("does not match datapackage-digest.json's hash"), "\(refused.output)")
            #expect(!FileManager.default.fileExists(atPath: folder.path + "/out.zip"))
        }
    }

    @Test("wacz validate passes; every file stored; the index a sorted CDXJ line per response (a POST keyed by its body); the pages the HTML answered 200")
    func exportValidated() async throws {
        let folder = try TemporaryFolder()
        _ = try WARCExportTests.bundle(at: folder.path + "/b.zip")
        let exported = try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", "wacz", "-o", folder.path + "/b.wacz"])
        #expect(exported.status == 0 && exported.output.contains("7 entries"), "\(exported.output)")
        let validated = try await run(try #require(wacz), ["validate", "-f", folder.path + "/b.wacz"])
        #expect(validated.status == 0 && !validated.output.lowercased().contains("invalid"), "\(validated.output)")
        // Stored, every file (unzip lists the method of each).
        let listed = try await run("unzip", ["-v", folder.path + "/b.wacz"])
        for name in ["archive/data.warc.gz", "indexes/index.cdx", "pages/pages.jsonl", "datapackage.json", "datapackage-digest.json"] {
            #expect(listed.output.split(separator: "\n").contains { $0.hasSuffix(name) && $0.contains("Stored") }, "\(name): \(listed.output)")
        }
        let index = try await run("unzip", ["-p", folder.path + "/b.wacz", "indexes/index.cdx"])
        let lines = index.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 7 && lines == lines.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }, "\(index.output)")
        #expect(lines.contains { $0.hasPrefix("example,docs)/guide 20251231") && $0.contains("\"status\":\"200\"") }, "\(index.output)")
        // The JSON body's leaves as parameters, as pywb keys a replayed POST.
        #expect(
            lines.contains { $0.hasPrefix("example,api)/search?__wb_method=post&q=guide ") && $0.contains("\"method\":\"POST\"") }, "\(index.output)")
        #expect(lines.contains { $0.contains("warc/revisit") }, "\(index.output)")
        // Each line's offset and length are its record's gzip member: warcio reads the record there.
        let python = try #require(warcio).replacingOccurrences(of: "/warcio", with: "/python3")
        let script = """
            import json, sys, zipfile, io
            from warcio.archiveiterator import ArchiveIterator
            z = zipfile.ZipFile(sys.argv[1])
            warc = z.read('archive/data.warc.gz')
            for line in z.read('indexes/index.cdx').decode().splitlines():
                fields = json.loads(line.split(' ', 2)[2])
                member = warc[int(fields['offset']):int(fields['offset']) + int(fields['length'])]
                record = next(iter(ArchiveIterator(io.BytesIO(member))))
                assert record.rec_headers.get_header('WARC-Target-URI') == fields['url'], (fields, record.rec_headers)
            print('offsets ok')
            """
        let offsets = try await run(python, ["-c", script, folder.path + "/b.wacz"])
        #expect(offsets.status == 0 && offsets.output.contains("offsets ok"), "\(offsets.output)")
        let pages = try await run("unzip", ["-p", folder.path + "/b.wacz", "pages/pages.jsonl"])
        let pageLines = pages.output.split(separator: "\n")
        #expect(pageLines.first?.contains("json-pages-1.0") == true && pageLines.count == 4, "\(pages.output)")
        #expect(pageLines.contains { $0.contains("\"url\":\"https://docs.example/guide/\"") }, "\(pages.output)")
        // Reproducible.
        _ = try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", "wacz", "-o", folder.path + "/again.wacz"])
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/b.wacz")) == Data(contentsOf: URL(fileURLWithPath: folder.path + "/again.wacz")))
        // No temporary WARC left beside the output.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.contains("tmp") }.isEmpty)
    }
}

/// The CDXJ keys as pywb computes them at replay (its surt canonicalization and its request-body query).
@Suite("WACZ index keys")
struct WACZKeyTests {
    @Test("SURT: host reversed without www, default port dropped, trailing slash dropped, query sorted, lower case")
    func surt() {
        #expect(WACZExporter.surt("https://www.Example.com/Guide/?b=2&a=1") == "com,example)/guide?a=1&b=2")
        #expect(WACZExporter.surt("http://docs.example:8080/") == "example,docs:8080)/")
        #expect(WACZExporter.surt("https://docs.example:443") == "example,docs)/")
    }

    @Test(
        "an index line's JSON is what JSONSerialization writes with sorted keys: quotes, backslashes, line ends, slashes and non-ASCII alike; other control characters escaped, and read back the same"
    )
    func jsonLineAsFoundationWritesIt() throws {
        let values = [
            "https://docs.example/a/b?q=1&r=\"x\"", "back\\slash", "tab\tnew\nline\rcr", "héllo wörld ✓ 𝄞", "", "</script>",
        ]
        for (number, value) in values.enumerated() {
            let object = ["url": value, "mime": "text/html", "status": "200", "key \(number)": value, "Z": "last", "a": "first"]
            let expected = String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
            #expect(WACZExporter.jsonLine(object) == expected)
            // And it reads back as the same object.
            let read = try JSONSerialization.jsonObject(with: Data(WACZExporter.jsonLine(object).utf8)) as? [String: String]
            #expect(read == object)
        }
        let controls = ["url": "\u{1}\u{8}\u{C}\u{1F}\u{7F}", "Ab": "tie", "ab": "tie"]
        let foundation = try JSONSerialization.data(withJSONObject: controls, options: [.sortedKeys, .withoutEscapingSlashes])
        #expect(WACZExporter.jsonLine(controls) == String(decoding: foundation, as: UTF8.self))
        #expect(try JSONSerialization.jsonObject(with: Data(WACZExporter.jsonLine(controls).utf8)) as? [String: String] == controls)
        #expect(!WACZExporter.jsonLine(controls).unicodeScalars.contains { $0.value < 0x20 })
    }

    @Test("WARC dates and CDX timestamps are String(format:)'s, written by hand; a form's bytes escaped as quote_plus escapes them")
    func datesAsFormatted() {
        var generator = SystemRandomNumberGenerator()
        var seconds: [Double] = [0, -1, 86_399.5, 951_782_400, 253_402_300_799, -62_135_596_800, -62_167_219_200, 253_402_300_800, 400_000_000_000]
        for _ in 0..<5_000 { seconds.append(Double(Int64.random(in: -70_000_000_000...300_000_000_000, using: &generator)) + 0.25) }
        for second in seconds {
            let date = Date(timeIntervalSince1970: second)
            let (y, mo, d, h, mi, s) = WARCExporter.utcFields(date)
            #expect(WARCExporter.warcDate(date) == String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", y, mo, d, h, mi, s), "\(second)")
            #expect(WACZExporter.timestamp(date) == String(format: "%04d%02d%02d%02d%02d%02d", y, mo, d, h, mi, s), "\(second)")
        }
        #expect(WACZExporter.formEncoded("a b/é\u{0}~") == "a+b%2F%C3%A9%00~")
    }

    @Test("a request body as pywb's query: a form decoded, JSON leaves (repeated names numbered), other bytes in base64")
    func bodyQuery() {
        #expect(WACZExporter.bodyQuery(Data("q=a+b&n=%C3%A9".utf8), contentType: "application/x-www-form-urlencoded") == "q=a b&n=é")
        #expect(
            WACZExporter.bodyQuery(Data(#"{"q": "a b", "n": 2.0, "ok": true, "x": null, "ids": [1, 2]}"#.utf8), contentType: "application/json")
                == "ids=1&ids.2_=2&n=2&ok=true&q=a+b&x=null")
        #expect(WACZExporter.bodyQuery(Data([0, 1, 2]), contentType: "application/octet-stream") == "__wb_post_data=AAEC")
        #expect(WACZExporter.bodyQuery(Data("not json".utf8), contentType: "text/plain") == "__wb_post_data=bm90IGpzb24=")
    }
}

let wayback = APIServer.find("wayback")

/// pywb (PyPI), Webrecorder's replay server, replaying the exported WARC and WACZ: every entry answers with the
/// bundle's status and body.
@Suite("pywb replays the exported WARC and WACZ", .enabled(if: wayback != nil, "pywb is not installed: make deps installs it into .venv-pywb"))
struct PywbReplayTests {
    @Test("each GET entry, from the WARC and from the WACZ, replayed by pywb as the bundle answers it (the copy through its revisit)")
    func replayed() async throws {
        let folder = try TemporaryFolder()
        let bodies = try WARCExportTests.bundle(at: folder.path + "/b.zip")
        for format in ["warc", "wacz"] {
            let exported = try await run(packagerExecutable, ["export", folder.path + "/b.zip", "--format", format, "-o", folder.path + "/b." + format])
            #expect(exported.status == 0, "\(exported.output)")
        }
        let manager = try #require(wayback).replacingOccurrences(of: "/wayback", with: "/wb-manager")
        for (collection, file, extra) in [("fromwarc", "b.warc", [String]()), ("fromwacz", "b.wacz", ["--unpack-wacz"])] {
            let initialized = try await run(manager, ["init", collection], in: folder.path)
            #expect(initialized.status == 0, "\(initialized.output)")
            let added = try await run(manager, ["add"] + extra + [collection, folder.path + "/" + file], in: folder.path)
            #expect(added.status == 0, "\(added.output)")
        }
        let server = try await APIServer.start(try #require(wayback), ["-p", "{port}", "-b", "127.0.0.1"], probe: "/", in: folder.path)
        defer { server.stop() }
        let bundle = try MountedBundle(path: folder.path + "/b.zip")
        for collection in ["fromwarc", "fromwacz"] {
            for (url, body) in bodies where !url.contains("api.example") {
                // id_: the recorded bytes, not rewritten for the replay page.
                let replay = try await run("curl", ["-s", "-o", folder.path + "/got", "-w", "%{http_code}", "\(server.base)/\(collection)/2026id_/\(url)"])
                let entry = try #require(bundle.entry(for: url), "\(url)")
                #expect(replay.output == String(entry.status), "\(collection) \(url): \(replay.output)")
                if entry.status == 200 {
                    #expect(try Data(contentsOf: URL(fileURLWithPath: folder.path + "/got")) == body, "\(collection) \(url)")
                }
            }
        }
        // The declared POST, replayed from the WACZ with its JSON body spaced otherwise. (pywb falls back to a POST of
        // the URL when no key matches, so this shows the replay, not the key: the index's line above shows the key.)
        let replay = try await run(
            "curl",
            [
                "-s", "-X", "POST", "-H", "Content-Type: application/json", "-d", #"{ "q": "guide" }"#,
                "\(server.base)/fromwacz/2026id_/https://api.example/search",
            ])
        #expect(replay.output == #"{"hits":["guide"]}"#, "\(replay.output)")
    }
}

/// SHA-256 of bytes, for the tests' expectations.
enum SHA256Digest {
    static func of(_ data: Data) -> [UInt8] {
        Array(Crypto.SHA256.hash(data: data))
    }
}
