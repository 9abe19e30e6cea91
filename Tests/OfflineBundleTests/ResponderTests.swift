import Crypto
import Foundation
import HTTPTypes
import OfflineBundle
import PackagerKit
import TestSupport
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite("answering requests from a mounted bundle")
struct ResponderTests {
    let origin = "https://docs.example.com"

    func loader(_ folder: TemporaryFolder, policy: OfflinePolicy = .bundleOnly) throws -> OfflineLoader {
        try writeSampleBundle(origin: origin, to: folder.path + "/b.zip")
        return try OfflineLoader(path: folder.path + "/b.zip", policy: policy)
    }

    func ask(_ loader: OfflineLoader, _ path: String, method: String = "GET", _ headers: [(String, String)] = []) -> BundleResponse? {
        loader.response(for: BundleRequest(method: method, url: origin + path, headers: fields(headers)))
    }

    @Test("200 with the recorded headers; HEAD has them without a body")
    func recorded() throws {
        let folder = try TemporaryFolder()
        let loader = try loader(folder)
        let page = try #require(ask(loader, "/"))
        #expect(page.status == 200)
        #expect(page.header("etag") == "\"page-v1\"" && page.header("cache-control") == "max-age=300")
        #expect(page.header("last-modified") == "Sat, 21 Nov 2026 10:00:00 GMT")
        // The entry's public fields are its recorded headers, in order.
        let entry = try #require(page.entry)
        #expect(entry.fields.map { "\($0.name.canonicalName): \($0.value)" } == entry.headers.map { "\($0.name): \($0.value)" })
        #expect(entry.fields[.eTag] == "\"page-v1\"" && entry.fields.count > 2)
        #expect(page.header("content-length") == String(samplePage.utf8.count))
        #expect(try page.bodyData() == Data(samplePage.utf8))
        let head = try #require(ask(loader, "/", method: "HEAD"))
        #expect(try head.status == 200 && head.header("content-length") == String(samplePage.utf8.count) && (head.bodyData()).isEmpty)
        // Canonical matching: host case, default port, fragment.
        #expect(loader.response(for: BundleRequest(url: "HTTPS://Docs.Example.com:443/#top"))?.status == 200)
        #expect(ask(loader, "/", method: "POST") == nil)
        #expect(ask(loader, "/nothing") == nil)
    }

    @Test("conditional requests answer 304 with the validators")
    func conditional() throws {
        let folder = try TemporaryFolder()
        let loader = try loader(folder)
        #expect(ask(loader, "/", [("If-None-Match", "\"page-v1\"")])?.status == 304)
        #expect(ask(loader, "/", [("If-None-Match", "W/\"page-v1\", \"other\"")])?.status == 304)
        #expect(ask(loader, "/", [("If-None-Match", "\"other\"")])?.status == 200)
        #expect(ask(loader, "/", [("If-None-Match", "*")])?.status == 304)
        #expect(ask(loader, "/", [("If-Modified-Since", "Sun, 22 Nov 2026 10:00:00 GMT")])?.status == 304)
        #expect(ask(loader, "/", [("If-Modified-Since", "Fri, 20 Nov 2026 10:00:00 GMT")])?.status == 200)
        // If-None-Match wins over If-Modified-Since.
        #expect(ask(loader, "/", [("If-None-Match", "\"other\""), ("If-Modified-Since", "Sun, 22 Nov 2026 10:00:00 GMT")])?.status == 200)
        let notModified = try #require(ask(loader, "/", [("If-None-Match", "\"page-v1\"")]))
        #expect(try notModified.header("etag") == "\"page-v1\"" && notModified.header("content-type") == nil && (notModified.bodyData()).isEmpty)
    }

    @Test("Range answers 206, 416 out of range, and the whole body for several ranges or a stale If-Range")
    func ranges() throws {
        let folder = try TemporaryFolder()
        let loader = try loader(folder)
        let part = try #require(ask(loader, "/logo.png", [("Range", "bytes=100-199")]))
        #expect(part.status == 206 && part.header("content-range") == "bytes 100-199/50000" && part.header("content-length") == "100")
        #expect(try part.bodyData() == sampleImage[100..<200])
        let tail = try #require(ask(loader, "/logo.png", [("Range", "bytes=-10")]))
        #expect(try tail.status == 206 && (tail.bodyData()) == sampleImage[49_990...])
        let open = try #require(ask(loader, "/logo.png", [("Range", "bytes=49000-")]))
        #expect(try open.status == 206 && (open.bodyData()).count == 1000)
        let beyond = try #require(ask(loader, "/logo.png", [("Range", "bytes=60000-")]))
        #expect(beyond.status == 416 && beyond.header("content-range") == "bytes */50000")
        #expect(ask(loader, "/logo.png", [("Range", "bytes=0-1,5-6")])?.status == 200)
        #expect(ask(loader, "/logo.png", [("Range", "bytes=0-1"), ("If-Range", "\"logo-0\"")])?.status == 200)
        #expect(ask(loader, "/logo.png", [("Range", "bytes=0-1"), ("If-Range", "\"logo-1\"")])?.status == 206)
        // Ranges are for GET: HEAD gets the whole representation's headers.
        #expect(ask(loader, "/logo.png", method: "HEAD", [("Range", "bytes=0-1")])?.status == 200)
    }

    @Test("gzip when the client accepts it, identity when not; redirects, blocked entries and 404s as recorded")
    func encodingAndKinds() throws {
        let folder = try TemporaryFolder()
        let loader = try loader(folder)
        let gzipped = try #require(ask(loader, "/", [("Accept-Encoding", "br, gzip;q=0.8")]))
        #expect(gzipped.header("content-encoding") == "gzip" && gzipped.header("vary") == "Accept-Encoding")
        let bytes = try gzipped.bodyData()
        #expect(gzipped.header("content-length") == String(bytes.count) && bytes.count < samplePage.utf8.count / 4)
        #expect(try gunzip(bytes) == Data(samplePage.utf8))
        #expect(ask(loader, "/", [("Accept-Encoding", "gzip;q=0")])?.header("content-encoding") == nil)
        #expect(ask(loader, "/", [("Accept-Encoding", "*;q=1, gzip;q=0")])?.header("content-encoding") == nil)
        #expect(ask(loader, "/", [("Accept-Encoding", "*")])?.header("content-encoding") == "gzip")
        // The gzip representation has its own strong validator; both carry Vary, 304s included.
        #expect(gzipped.header("etag") == "\"page-v1-gzip\"")
        #expect(ask(loader, "/", [("Accept-Encoding", "gzip"), ("If-None-Match", "\"page-v1-gzip\"")])?.status == 304)
        #expect(ask(loader, "/", [("If-None-Match", "\"page-v1\"")])?.header("vary") == "Accept-Encoding")
        #expect(ask(loader, "/")?.header("content-encoding") == nil)
        // A stored (incompressible) body is never gzip-framed.
        #expect(ask(loader, "/logo.png", [("Accept-Encoding", "gzip")])?.header("content-encoding") == nil)

        let redirect = try #require(ask(loader, "/old"))
        #expect(redirect.status == 301 && redirect.header("location") == "/")
        let blocked = try #require(ask(loader, "/ads.js"))
        #expect(try blocked.status == 204 && blocked.entry?.kind == .blocked && (blocked.bodyData()).isEmpty && blocked.header("content-length") == nil)
        let gone = try #require(ask(loader, "/gone.html"))
        #expect(try gone.status == 404 && (gone.bodyData()) == Data("<h1>Not here</h1>".utf8))
    }

    @Test("a tampered bundle is refused at mount when a public key is required")
    func tamperedRefused() throws {
        let folder = try TemporaryFolder()
        let key = Curve25519.Signing.PrivateKey()
        try writeSampleBundle(origin: origin, to: folder.path + "/signed.zip", signingKey: key)
        let publicKey = Array(key.publicKey.rawRepresentation)
        #expect(throws: Never.self) { try OfflineLoader(path: folder.path + "/signed.zip", publicKey: publicKey) }
        // Change one recorded header in the index, with its CRC fixed: the digest in the ZIP comment no longer matches.
        func tamper(_ bytes: inout [UInt8]) {
            let at = bytes.firstRange(of: Array("max-age=300".utf8))!.lowerBound
            bytes.replaceSubrange(at..<(at + 11), with: Array("max-age=999".utf8))
        }
        try forgeMetadataEntry("index.bin", in: folder.path + "/signed.zip", tamper)
        var error = try #require(throws: BundleError.self) { try OfflineLoader(path: folder.path + "/signed.zip", publicKey: publicKey) }
        #expect(error.code == .signature && error.message.contains("does not match index.bin"), "\(error)")
        // The forger also rewrites the digest in the comment: the signature block still names the old one.
        try forgeBundleDigest(in: folder.path + "/signed.zip")
        error = try #require(throws: BundleError.self) { try OfflineLoader(path: folder.path + "/signed.zip", publicKey: publicKey) }
        #expect(error.code == .signature && error.message.contains("made over another bundle digest"), "\(error)")
        // And the digest the block names: now only the Ed25519 signature itself can tell.
        try forgeSignedDigest(in: folder.path + "/signed.zip")
        error = try #require(throws: BundleError.self) { try OfflineLoader(path: folder.path + "/signed.zip", publicKey: publicKey) }
        #expect(error.code == .signature && error.message.contains("does not verify"), "\(error)")
        // Without a required key, the forged bundle mounts: what the key protects is exactly this.
        #expect(throws: Never.self) { try OfflineLoader(path: folder.path + "/signed.zip") }
        // An unsigned bundle is refused too.
        try writeSampleBundle(origin: origin, to: folder.path + "/unsigned.zip")
        #expect(throws: BundleError.self) { try OfflineLoader(path: folder.path + "/unsigned.zip", publicKey: publicKey) }
    }

    @Test("many tasks look up and read bodies at once, each checked against its digest")
    func concurrentReads() async throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter()
        var expected: [String: String] = [:]
        for i in 0..<200 {
            let body = i % 2 == 0 ? Data(String(repeating: "page \(i) ", count: 50 + i).utf8) : noise(1000 + i * 37, seed: UInt64(i))
            expected["https://c.example/\(i)"] = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
            writer.add(.init(url: "https://c.example/\(i)", headers: [("content-type", i % 2 == 0 ? "text/plain" : "image/png")], body: .data(body)))
        }
        try writer.write(to: folder.path + "/c.zip")
        let loader = try OfflineLoader(path: folder.path + "/c.zip")
        let digests = expected
        let failures = await withTaskGroup(of: Int.self) { group in
            for task in 0..<32 {
                group.addTask {
                    var bad = 0
                    for step in 0..<200 {
                        let url = "https://c.example/\((task * 7 + step * 13) % 200)"
                        let gzip = step % 3 == 0
                        guard let response = loader.response(for: BundleRequest(url: url, headers: gzip ? [.acceptEncoding: "gzip"] : [:])),
                            var body = try? response.bodyData()
                        else {
                            bad += 1
                            continue
                        }
                        if response.header("content-encoding") == "gzip" { body = (try? gunzipInMemory(body)) ?? Data() }
                        if SHA256.hash(data: body).map({ String(format: "%02x", $0) }).joined() != digests[url] { bad += 1 }
                    }
                    return bad
                }
            }
            return await group.reduce(0, +)
        }
        #expect(failures == 0)
    }
}

/// A gzip member (as the responder frames it) inflated in memory with the reader's own zlib binding.
func gunzipInMemory(_ data: Data) throws -> Data {
    let bytes = [UInt8](data)
    guard bytes.count >= 18 else { throw BundleError(.corruptBody, "short gzip") }
    let n = bytes.count
    let size = Int(bytes[n - 4]) | Int(bytes[n - 3]) << 8 | Int(bytes[n - 2]) << 16 | Int(bytes[n - 1]) << 24
    let raw = Array(bytes[10..<(n - 8)])
    return Data(try raw.withUnsafeBytes { try RawInflate.inflate($0, expectedSize: size, entry: "test") })
}

@Suite("HTTP dates by RFC 9110's grammar, and nothing else")
struct HTTPDateTests {
    @Test("the three forms parse to the same instant; the fields are checked; a leap second reads as 59")
    func validForms() {
        let instant = Date(timeIntervalSince1970: 784_111_777)
        for text in [
            "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun Nov 06 08:49:37 1994",
            " Sun, 06 Nov 1994 08:49:37 GMT\t",
        ] {
            #expect(HTTPDates.parse(text) == instant, "\(text)")
        }
        #expect(HTTPDates.parse("Thu, 29 Feb 2024 00:00:00 GMT") == Date(timeIntervalSince1970: 1_709_164_800))
        #expect(HTTPDates.parse("Sat, 30 Jun 2012 23:59:60 GMT") == Date(timeIntervalSince1970: 1_341_100_799))
        // Whatever weekday is written: the grammar's names, not the calendar's.
        #expect(HTTPDates.parse("Mon, 06 Nov 1994 08:49:37 GMT") == instant)
    }

    @Test("lenient forms are not HTTP dates: lowercase names, other zones, impossible fields, short days, four-digit RFC 850 years")
    func invalidForms() {
        for text in [
            "Sun, 06 Nov 1994 08:49:37 gmt", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 06 Nov 1994 08:49:37 +0000",
            "Sun, 06 nov 1994 08:49:37 GMT", "sun, 06 Nov 1994 08:49:37 GMT", "Sun, 30 Feb 1994 08:49:37 GMT", "Thu, 29 Feb 2023 00:00:00 GMT",
            "Sun, 06 Nov 1994 25:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 08:49:61 GMT", "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun, 06-Nov-94 08:49:37 GMT", "Sun Nov 6 08:49:37 1994",
            "Sunday, 06 Nov 1994 08:49:37 GMT", "0", "", "Sun, 06 Nov 1994 08:49:37 GMTX", "Sun, 06 Nov 1994 08:49 GMT",
        ] {
            #expect(HTTPDates.parse(text) == nil, "\(text)")
        }
    }

    @Test("a two-digit RFC 850 year is the latest with those digits not more than 50 years ahead")
    func twoDigitYears() throws {
        let now = try #require(HTTPDates.parse("Wed, 25 Nov 2026 12:00:00 GMT"))
        #expect(HTTPDates.parse("Friday, 01-Jan-77 00:00:00 GMT", now: now) == HTTPDates.parse("Sat, 01 Jan 1977 00:00:00 GMT"))
        #expect(HTTPDates.parse("Saturday, 01-Jan-76 00:00:00 GMT", now: now) == HTTPDates.parse("Wed, 01 Jan 2076 00:00:00 GMT"))
        #expect(HTTPDates.parse("Thursday, 01-Jan-26 00:00:00 GMT", now: now) == HTTPDates.parse("Thu, 01 Jan 2026 00:00:00 GMT"))
    }

    @Test("every date formatted as an IMF-fixdate parses back to itself")
    func roundTrip() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let date = Date(timeIntervalSince1970: TimeInterval(Int64.random(in: -2_000_000_000...253_402_300_799, using: &random)))
            #expect(HTTPDates.parse(HTTPDates.format(date)) == date)
        }
    }
}

@Suite("Accept-Encoding weights by RFC 9110's qvalue grammar")
struct QValueTests {
    @Test("weights that match the grammar decide; others count as no weight (q=1), so gzip is accepted")
    func qvalues() {
        #expect(BundleResponder.qvalue("0") == 0 && BundleResponder.qvalue("0.5") == 500 && BundleResponder.qvalue("0.125") == 125)
        #expect(BundleResponder.qvalue("1") == 1000 && BundleResponder.qvalue("1.000") == 1000 && BundleResponder.qvalue("0.") == 0)
        for bad in ["nan", "1e400", "-1", "0.0001", "2", "1.5", "0x1p3", "", " 0", "inf"] {
            #expect(BundleResponder.qvalue(Substring(bad)) == nil, "\(bad)")
        }
        #expect(BundleResponder.acceptsGzip("gzip;q=nan"))
        #expect(BundleResponder.acceptsGzip("gzip;q=1e400"))
        #expect(!BundleResponder.acceptsGzip("gzip;q=0.000"))
        #expect(!BundleResponder.acceptsGzip("gzip;q=0, *;q=1"))
        #expect(BundleResponder.acceptsGzip("br, gzip;q=0.001"))
    }
}

@Suite("several ETag fields")
struct SeveralETagTests {
    @Test("a 206 or 416 keeps an entry's ETag fields as stored, with or without gzip accepted, not one joined value")
    func etagFieldsKept() throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter()
        writer.add(
            .init(
                url: "https://example.com/t.txt", headers: [("content-type", "text/plain"), ("etag", "\"a\""), ("etag", "\"b\"")],
                body: .data(Data(String(repeating: "text ", count: 200).utf8))))
        try writer.write(to: folder.path + "/b.zip")
        let loader = try OfflineLoader(path: folder.path + "/b.zip")
        for extra in [[], [("Accept-Encoding", "gzip")]] as [[(String, String)]] {
            for range in ["bytes=0-3", "bytes=5000-"] {
                let answer = try #require(loader.response(for: BundleRequest(url: "https://example.com/t.txt", headers: fields([("Range", range)] + extra))))
                #expect([206, 416].contains(answer.status))
                #expect(answer.headers[values: .eTag] == ["\"a\"", "\"b\""], "\(range) \(extra): \(answer.headers[values: .eTag])")
            }
        }
    }
}

extension SeveralETagTests {
    @Test("a stored Accept-Ranges is removed and ours appended after the stored fields (H5)")
    func acceptRangesAppended() throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter()
        writer.add(
            .init(
                url: "https://example.com/t.txt", headers: [("content-type", "text/plain"), ("accept-ranges", "none"), ("etag", "\"a\"")],
                body: .data(Data(String(repeating: "text ", count: 200).utf8))))
        try writer.write(to: folder.path + "/b.zip")
        let answer = try #require(try OfflineLoader(path: folder.path + "/b.zip").response(for: BundleRequest(url: "https://example.com/t.txt")))
        let names = answer.headers.map(\.name.canonicalName)
        #expect(names.prefix(4) == ["content-type", "etag", "accept-ranges", "vary"], "\(names)")
        #expect(answer.headers[values: .acceptRanges] == ["bytes"])
    }

    @Test("a stored Age counts only as delta-seconds (H18)")
    func storedAgeIsDeltaSeconds() {
        let fetched = Date(timeIntervalSince1970: 1_000_000)
        let now = fetched.addingTimeInterval(10)
        #expect(BundleEntry.age(fetchedAt: fetched, originDate: nil, recordedAge: "100", now: now) == 110)
        for bad in ["1e3", "-5", "nan", "12abc", "", "0x10"] {
            #expect(BundleEntry.age(fetchedAt: fetched, originDate: nil, recordedAge: bad, now: now) == 10, "\(bad)")
        }
        #expect(BundleEntry.age(fetchedAt: nil, originDate: nil, recordedAge: "100", now: now) == nil)
    }
}

extension SeveralETagTests {
    @Test("headers that leave state in a browser for the serving origin (NEL, Report-To, Accept-CH, Service-Worker-Allowed) are never replayed")
    func browserStateHeadersDropped() throws {
        let folder = try TemporaryFolder()
        var writer = BundleWriter()
        let stateful = [
            ("NEL", "{\"report_to\":\"a\",\"max_age\":9e9}"), ("Report-To", "{\"group\":\"a\"}"), ("Reporting-Endpoints", "a=\"https://x/\""),
            ("Accept-CH", "Sec-CH-UA"), ("Critical-CH", "Sec-CH-UA"), ("Service-Worker-Allowed", "/"),
        ]
        writer.add(.init(url: "https://example.com/", headers: [("content-type", "text/html")] + stateful, body: .data(Data("<p>x</p>".utf8))))
        try writer.write(to: folder.path + "/b.zip")
        let answer = try #require(try OfflineLoader(path: folder.path + "/b.zip").response(for: BundleRequest(url: "https://example.com/")))
        #expect(answer.status == 200)
        for (name, _) in stateful { #expect(answer.headers[HTTPField.Name(name)!] == nil, "\(name)") }
    }
}
