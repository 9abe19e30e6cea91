import Crypto
import Foundation
import HTTPTypes
import OfflineBundle
import TestSupport
import Testing

@testable import PackagerKit

/// The format's test vectors (docs/vectors/): small bundles and `expected.json`, the answers another implementation
/// can test itself against (docs/FORMAT.md §11).
///
/// - The version-3 vectors are rewritten from their recipes below and compared byte for byte with the committed
///   files, so the writer's output for fixed inputs cannot drift unnoticed.
/// - Every request in `expected.json` is replayed through the reader and the responder, and must get the recorded
///   answer: status, headers in order, body digest, or the error code.
///
/// `PACKAGER_WRITE_VECTORS=1 swift test --filter VectorTests` writes the vectors and `expected.json` anew (then review
/// the diff: it is the format's behaviour).
@Suite("format test vectors (docs/vectors)", .serialized)
struct VectorTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/vectors").path
    static let writing = ProcessInfo.processInfo.environment["PACKAGER_WRITE_VECTORS"] == "1"
    static let base = "http://vectors.example/site/"

    // MARK: Recipes

    static func signingKey() throws -> Curve25519.Signing.PrivateKey {
        let text = try String(contentsOfFile: folder + "/vector-test-key.key", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return try Curve25519.Signing.PrivateKey(rawRepresentation: try #require(Data(base64Encoded: text)))
    }

    /// The deflate level the committed vectors were written at (the default then): the bytes depend on it.
    static let level = 8

    /// `packager pack docs/vectors/site --base-url http://vectors.example/site/ --drop-query 'utm_*' --compression-level 8`.
    ///
    /// The first vectors were written before packs carried an ignore-query rule (`ignoresQuery: false` keeps their bytes);
    /// `v3-pack-query.zip` is a pack as `packager pack` writes one now, with the rule.
    static func writePack(to path: String, signed: Bool, ignoresQuery: Bool = false, storesIndex: Bool = false) throws {
        var writer = BundleWriter.Options(dropQueryParameters: ["utm_*"], compressionLevel: level, timeClamp: nil)
        if signed { writer.signingKey = try signingKey() }
        writer.storesIndex = storesIndex
        _ = try Packer(options: .init(baseURL: base, writer: writer, ignoresQuery: ignoresQuery)).pack(source: folder + "/site", output: path)
    }

    /// A crawl's bundle, as `packager build` records one: the origin's validators and times, a redirect, an error page,
    /// a blocked URL, a substituted file, and the declaration's rules.
    static func writeCrawl(to path: String) throws {
        let site = folder + "/site"
        let fetched = Date(timeIntervalSince1970: 1_767_323_045)  // 2026-01-02T03:04:05Z
        let rules = BundleRules(
            dropQueryParameters: ["utm_*", "fbclid"], block: ["*://ads.example/*"], substitutions: ["https://cdn.example/lib.js"],
            substitutionPrefixes: ["https://fonts.example/css/"])
        var writer = BundleWriter(options: .init(rules: rules, createdAt: fetched.addingTimeInterval(60), compressionLevel: level, timeClamp: nil))
        let html = [("content-type", "text/html"), ("etag", "\"65a1b2c3-21f\""), ("last-modified", "Thu, 01 Jan 2026 00:00:00 GMT")]
        writer.add(
            .init(
                url: base, headers: html + [("cache-control", "max-age=600")], body: .file(site + "/index.html"), fetchedAt: fetched, originDate: fetched))
        writer.add(
            .init(
                url: base + "about/", headers: [("content-type", "text/html"), ("etag", "W/\"b0-1\"")], body: .file(site + "/about/index.html"),
                fetchedAt: fetched, originDate: fetched))
        writer.add(.init(url: base + "about", status: 301, headers: [("location", base + "about/")], fetchedAt: fetched, originDate: fetched))
        writer.add(
            .init(
                url: base + "style.css", headers: [("content-type", "text/css"), ("last-modified", "Thu, 01 Jan 2026 00:00:00 GMT")],
                body: .file(site + "/style.css"), fetchedAt: fetched))
        writer.add(
            .init(
                url: base + "img/dot.png", headers: [("content-type", "image/png"), ("etag", "\"45-1\"")], body: .file(site + "/img/dot.png"),
                fetchedAt: fetched, originDate: fetched))
        writer.add(
            .init(
                url: base + "gone.html", status: 404, headers: [("content-type", "text/html")], body: .data(Data("<p>not here</p>\n".utf8)),
                fetchedAt: fetched, originDate: fetched))
        writer.add(.init(url: "http://ads.example/pixel.gif", status: 204, kind: .blocked))
        writer.add(
            .init(
                url: "https://cdn.example/lib.js", kind: .substituted, headers: [("content-type", "text/javascript; charset=utf-8")],
                body: .data(Data("console.log('local copy');\n".utf8)), source: "vendor/lib.js", synthesizeETag: true))
        try writer.write(to: path)
    }

    /// Declared requests (§5.4): a POST by body, `Accept` and `Accept-Language` variants, a bearer's answer beside an
    /// anonymous one, a 404 fixture and a plain GET, as `packager build` records `requests:`.
    static let api = "http://api.example/"

    static func writeRequests(to path: String) throws {
        let fetched = Date(timeIntervalSince1970: 1_767_323_045)
        var writer = BundleWriter(options: .init(rules: BundleRules(), createdAt: fetched, compressionLevel: level, timeClamp: nil))
        func add(
            _ path: String, status: Int = 200, type: String, body: String, headers: [(String, String)] = [], request: RecordedRequest? = nil
        ) {
            var entry = RecordedExchange(
                url: api + path, status: status, headers: [("content-type", type)] + headers, body: .data(Data(body.utf8)), fetchedAt: fetched)
            entry.request = request
            writer.add(entry)
        }
        let json = "application/json"
        for (query, hit) in [("a", "apple"), ("b", "banana")] {
            add(
                "search", type: json, body: "{\"hits\": [\"\(hit)\"]}",
                request: RecordedRequest(
                    method: "POST", headers: [.init(name: "content-type", value: json)], body: Data("{\"q\": \"\(query)\"}".utf8)))
        }
        add(
            "items", type: json, body: "[{\"id\": 1}]", headers: [("vary", "Accept")],
            request: RecordedRequest(headers: [.init(name: "accept", value: json)], keyHeaders: [.init(name: "accept", value: json)]))
        add(
            "items", type: "text/csv", body: "id\n1\n", headers: [("vary", "Accept")],
            request: RecordedRequest(headers: [.init(name: "accept", value: "text/csv")], keyHeaders: [.init(name: "accept", value: "text/csv")]))
        for (language, word) in [("fr", "bonjour"), ("de", "hallo")] {
            add(
                "greeting", type: "text/plain", body: word, headers: [("content-language", language), ("vary", "Accept-Language")],
                request: RecordedRequest(
                    headers: [.init(name: "accept-language", value: language)], keyHeaders: [.init(name: "accept-language", value: language)]))
        }
        add(
            "private", type: json, body: "{\"secret\": \"for bearers\"}",
            request: RecordedRequest(headers: [.init(name: "authorization", value: "")], keyHeaders: [.init(name: "authorization", value: "bearer")]))
        add("private", type: json, body: "{\"public\": true}")
        add("missing", status: 404, type: json, body: "{\"error\": \"no such thing\"}", request: RecordedRequest())
        add("status", type: "text/plain", body: "ok")
        // A query read as a form (header flag bit 1): `+` is a space, and one name's values keep their order.
        add("sql?sql=select+name+from+t&_col=type&_col=name", type: json, body: "[\"type, name\"]", request: RecordedRequest())
        add("sql?sql=select+name+from+t&_col=name&_col=type", type: json, body: "[\"name, type\"]", request: RecordedRequest())
        try writer.write(to: path)
    }

    static let apiRequests: [Request] = [
        request(api + "search", [("Content-Type", "application/json")], method: "POST", body: "{\"q\": \"a\"}"),
        request(api + "search", method: "POST", body: "{\"q\": \"b\"}"),
        request(api + "search", method: "post", body: "{\"q\": \"a\"}"),
        request(api + "search", method: "POST", body: "{\"q\": \"c\"}"),
        request(api + "search", method: "POST"),
        request(api + "search"),
        request(api + "items", [("Accept", "application/json")]),
        request(api + "items", [("Accept", "application/json")], method: "HEAD"),
        request(api + "items", [("Accept", "text/csv")]),
        request(api + "items", [("Accept", "text/csv;q=0.5, application/json;q=0.9")]),
        request(api + "items", [("Accept", "text/*")]),
        request(api + "items", [("Accept", "application/xml")]),
        request(api + "items", [("Accept", "text/csv;q=0")]),
        request(api + "items"),
        request(api + "items", method: "POST"),
        request(api + "greeting", [("Accept-Language", "fr-CH, de;q=0.5")]),
        request(api + "greeting", [("Accept-Language", "de")]),
        request(api + "greeting", [("Accept-Language", "es")]),
        request(api + "private", [("Authorization", "Bearer any-token")]),
        request(api + "private", [("Authorization", "bearer other")]),
        request(api + "private"),
        request(api + "private", [("Authorization", "Basic dXNlcjpwYXNz")]),
        request(api + "missing"),
        request(api + "status"),
        request(api + "status", method: "HEAD"),
        request(api + "status", method: "DELETE"),
        request(api + "sql?sql=select%20name%20from%20t&_col=type&_col=name"),
        request(api + "sql?_col=name&sql=select+name+from+t&_col=type"),
        request(api + "sql?sql=select%2Bname%2Bfrom%2Bt&_col=type&_col=name"),
        request(api + "sql?sql=select+name+from+t&_col=name"),
        // JSON bodies under a match rule (v3-match-json.zip, §5.5): the recorded document written otherwise, with another
        // request id, is answered; another value is not.
        request(
            api + "find", [("Content-Type", "application/json")], method: "POST",
            body: "{\"q\": \"a\", \"page\": {\"size\": 10, \"from\": 0}, \"requestId\": \"r-1\"}"),
        request(
            api + "find", [("Content-Type", "application/json")], method: "POST", body: "{\"requestId\":\"r-9\",\"page\":{\"from\":0,\"size\":10},\"q\":\"a\"}"),
        request(api + "find", [("Content-Type", "application/json")], method: "POST", body: "{\"q\": \"\\u0061\", \"page\": {\"from\": 0, \"size\": 10}}"),
        request(api + "find", [("Content-Type", "application/json")], method: "POST", body: "{\"q\": \"b\", \"page\": {\"size\": 10, \"from\": 0}}"),
        request(api + "find", [("Content-Type", "application/json")], method: "POST", body: "{\"q\": \"a\", \"page\": {\"size\": 10.0, \"from\": 0}}"),
        // Form bodies under a match rule: the parameters in another order, `%20` for `+`, another csrf_token: answered.
        request(api + "login", [("Content-Type", "application/x-www-form-urlencoded")], method: "POST", body: "lang=en%20GB&csrf_token=zz&user=ann"),
        request(api + "login", [("Content-Type", "application/x-www-form-urlencoded")], method: "POST", body: "user=bob&lang=en+GB"),
        // A GraphQL POST under `match … graphql /variables/requestId` (v3-match-graphql.zip): pretty-printed, its
        // variables in another order, another request id: answered; another variable: a miss.
        request(
            api + "graphql", [("Content-Type", "application/json")], method: "POST",
            body:
                "{\"operationName\": \"S\", \"variables\": {\"requestId\": \"r-9\", \"wanted\": \"FR-75\"}, \"query\": \"# one subdivision\\nquery S(\\n  $wanted: String\\n) {\\n  s(code: $wanted, note: \\\"\\\"\\\"\\n    caf\\u00e9\\n  \\\"\\\"\\\") {\\n    name,\\n    type\\n  }\\n}\\n\"}"
        ),
        request(
            api + "graphql", [("Content-Type", "application/json")], method: "POST",
            body:
                "{\"query\": \"query S($wanted: String) { s(code: $wanted, note: \\\"café\\\") { name type } }\", \"variables\": {\"wanted\": \"FR-13\"}, \"operationName\": \"S\"}"
        ),
        // Cache-busting parameters under `match … ignore-params t _`: any value, or none, is the recorded file; v=3 is not.
        request(api + "static/app.js?t=1733999999&v=2"),
        request(api + "static/app.js?v=2&_=1&T=5"),
        request(api + "static/app.js?v=3&t=1"),
    ]

    /// A POST whose JSON body is matched in its canonical form, without its request id (`match … json-body /requestId`).
    static func writeMatchJSON(to path: String) throws {
        let fetched = Date(timeIntervalSince1970: 1_767_323_045)
        let rules = BundleRules(match: [
            BundleRules.jsonBodyRule(pattern: api + "find", ignoring: ["/requestId"]),
            BundleRules.formBodyRule(pattern: api + "login", ignoring: ["csrf_token"]),
        ])
        var writer = BundleWriter(options: .init(rules: rules, createdAt: fetched, compressionLevel: level, timeClamp: nil))
        var entry = RecordedExchange(
            url: api + "find", headers: [("content-type", "application/json")], body: .data(Data("{\"hits\": [\"apple\"]}".utf8)), fetchedAt: fetched)
        entry.request = RecordedRequest(
            method: "POST", headers: [.init(name: "content-type", value: "application/json")],
            body: Data("{\"q\": \"a\", \"page\": {\"size\": 10, \"from\": 0}, \"requestId\": \"r-1\"}".utf8))
        writer.add(entry)
        var login = RecordedExchange(
            url: api + "login", headers: [("content-type", "text/plain")], body: .data(Data("welcome, ann".utf8)), fetchedAt: fetched)
        login.request = RecordedRequest(
            method: "POST", headers: [.init(name: "content-type", value: "application/x-www-form-urlencoded")],
            body: Data("user=ann&csrf_token=t1&lang=en+GB".utf8))
        writer.add(login)
        try writer.write(to: path)
    }

    /// A GraphQL POST matched in its canonical form without its request id (`match … graphql /variables/requestId`), and
    /// a script whose cache-busting parameters leave its keys (`match … ignore-params t _`).
    static func writeMatchGraphQL(to path: String) throws {
        let fetched = Date(timeIntervalSince1970: 1_767_323_045)
        let rules = BundleRules(match: [
            BundleRules.jsonBodyRule(pattern: api + "graphql", form: .graphql, ignoring: ["/variables/requestId"]),
            BundleRules.ignoreParamsRule(pattern: api + "static/*", names: ["t", "_"]),
        ])
        var writer = BundleWriter(options: .init(rules: rules, createdAt: fetched, compressionLevel: level, timeClamp: nil))
        var entry = RecordedExchange(
            url: api + "graphql", headers: [("content-type", "application/json")],
            body: .data(Data("{\"data\": {\"s\": {\"name\": \"Paris\", \"type\": \"Metropolitan department\"}}}".utf8)), fetchedAt: fetched)
        entry.request = RecordedRequest(
            method: "POST", headers: [.init(name: "content-type", value: "application/json")],
            body: Data(
                "{\"query\": \"query S($wanted: String) { s(code: $wanted, note: \\\"café\\\") { name type } }\", \"variables\": {\"wanted\": \"FR-75\", \"requestId\": \"r-1\"}, \"operationName\": \"S\"}"
                    .utf8))
        writer.add(entry)
        writer.add(
            RecordedExchange(
                url: api + "static/app.js?v=2&t=1733000001", headers: [("content-type", "text/javascript")], body: .data(Data("console.log(2)\n".utf8)),
                fetchedAt: fetched))
        try writer.write(to: path)
    }

    /// The same bundle with ZIP64 end records (a ZIP64 end record and locator, and the classic end record's fields at
    /// their sentinels), as a writer with 65,535 entries or more writes them.
    static func rewriteAsZip64(_ source: String, to path: String) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        let eocd = try #require((0...(bytes.count - 22)).reversed().first { bytes.u32($0) == 0x0605_4b50 })
        let entries = UInt64(bytes.u16(eocd + 10))
        let cdSize = UInt64(bytes.u32(eocd + 12))
        let cdOffset = UInt64(bytes.u32(eocd + 16))
        let comment = Array(bytes[(eocd + 22)...])
        bytes.removeSubrange(eocd...)
        let zip64Offset = UInt64(bytes.count)
        var tail = [UInt8]()
        tail.appendLE(UInt32(0x0606_4b50))
        tail.appendLE(UInt64(44))
        tail.appendLE(UInt16(0x033F))
        tail.appendLE(UInt16(45))
        tail.appendLE(UInt32(0))
        tail.appendLE(UInt32(0))
        tail.appendLE(entries)
        tail.appendLE(entries)
        tail.appendLE(cdSize)
        tail.appendLE(cdOffset)
        tail.appendLE(UInt32(0x0706_4b50))
        tail.appendLE(UInt32(0))
        tail.appendLE(zip64Offset)
        tail.appendLE(UInt32(1))
        tail.appendLE(UInt32(0x0605_4b50))
        tail.appendLE(UInt16(0))
        tail.appendLE(UInt16(0))
        tail.appendLE(UInt16(0xFFFF))
        tail.appendLE(UInt16(0xFFFF))
        tail.appendLE(UInt32(0xFFFF_FFFF))
        tail.appendLE(UInt32(0xFFFF_FFFF))
        tail.appendLE(UInt16(comment.count))
        tail.append(contentsOf: comment)
        try Data(bytes + tail).write(to: URL(fileURLWithPath: path))
    }

    /// Rewrites `index.bin` of the bundle at `path` (same length), fixes its CRC-32, and records its new SHA-256 in the
    /// archive comment, as a forger would: only the reader's own checks of the index can then refuse it.
    static func forgeIndex(in path: String, _ transform: (inout [UInt8]) -> Void) throws {
        var forged = [UInt8]()
        try forgeMetadataEntry(BundleFormat.indexEntryName, in: path) { bytes in
            transform(&bytes)
            forged = bytes
        }
        let digest = hexString(Array(SHA256.hash(data: forged)))
        var file = try Data(contentsOf: URL(fileURLWithPath: path))
        let marker = Data((BundleFormat.commentPrefix + "sha256:").utf8)
        let at = try #require(file.range(of: marker, options: .backwards))
        file.replaceSubrange(at.upperBound..<(at.upperBound + 64), with: Data(digest.utf8))
        try file.write(to: URL(fileURLWithPath: path))
    }

    /// Copies `source` to `path` and applies `damage` to the copy.
    static func damaged(_ source: String, to path: String, _ damage: (String) throws -> Void) throws {
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: source, toPath: path)
        try damage(path)
    }

    static func pack(_ out: String) -> String { out + "/v3-pack.zip" }

    /// The next release of the vector site (the home page grown, the stylesheet gone, a page added), packed as
    /// `v3-pack.zip` was, and the delta from `v3-pack.zip` to it (§12): the home page as a patch of its old body, the
    /// new page carried, `index.bin` and `manifest.json` as patches.
    static func writeNext(into out: String) throws {
        let scratch = try TemporaryFolder()
        let site = scratch.path + "/site"
        try FileManager.default.copyItem(atPath: folder + "/site", toPath: site)
        let home = try String(contentsOfFile: site + "/index.html", encoding: .utf8)
        try String(repeating: home, count: 12).write(toFile: site + "/index.html", atomically: false, encoding: .utf8)
        try FileManager.default.removeItem(atPath: site + "/style.css")
        try "<!doctype html><title>News</title><p>A page of the next release.</p>\n".write(toFile: site + "/news.html", atomically: false, encoding: .utf8)
        let writer = BundleWriter.Options(dropQueryParameters: ["utm_*"], compressionLevel: level, timeClamp: nil)
        _ = try Packer(options: .init(baseURL: base, writer: writer, ignoresQuery: false)).pack(source: site, output: out + "/v3-pack-next.zip")
        try DeltaBundles.make(old: pack(out), new: out + "/v3-pack-next.zip", to: out + "/delta-pack-next.zip")
        // The same delta with its index as an edit (§12.4) rather than a byte patch.
        _ = try DeltaBundles.make(
            old: try MountedBundle(path: pack(out)), new: out + "/v3-pack-next.zip", to: out + "/delta-pack-next-edit.zip", wholeBodies: false,
            indexForm: .edit)
    }

    /// Recorded queries under an ignore-query rule (H2): `search.html` with two queries the origin answered with the page
    /// itself (the query does not matter there), `list.html` whose `?page=2` is another page (it does).
    static func writeQueryVariants(to path: String) throws {
        let fetched = Date(timeIntervalSince1970: 1_767_323_045)  // 2026-01-02T03:04:05Z
        let rules = BundleRules(ignoreQuery: [base + "*"])
        var writer = BundleWriter(options: .init(rules: rules, createdAt: fetched.addingTimeInterval(60), compressionLevel: level, timeClamp: nil))
        let html = [("content-type", "text/html")]
        for (path, body) in [
            ("search.html", "<p>Search</p>\n"), ("search.html?q=ruby", "<p>Search</p>\n"), ("search.html?q=sapphire", "<p>Search</p>\n"),
            ("list.html", "<p>Page 1</p>\n"), ("list.html?page=2", "<p>Page 2</p>\n"),
        ] {
            writer.add(.init(url: base + path, headers: html, body: .data(Data(body.utf8)), fetchedAt: fetched))
        }
        try writer.write(to: path)
    }

    /// Writes every version-3 vector into `out` (the version-2 ones are only read).
    static func writeVectors(into out: String) throws {
        try writePack(to: out + "/v3-pack.zip", signed: false)
        try writePack(to: out + "/v3-pack-signed.zip", signed: true)
        try writePack(to: out + "/v3-pack-query.zip", signed: false, ignoresQuery: true)
        try writeQueryVariants(to: out + "/v3-query-variants.zip")
        try writeMatchJSON(to: out + "/v3-match-json.zip")
        try writeMatchGraphQL(to: out + "/v3-match-graphql.zip")
        try writeCrawl(to: out + "/v3-crawl.zip")
        try writeRequests(to: out + "/v3-requests.zip")
        // A request qualifier of the wrong shape (a method in lowercase), on the last key: refused at mount as hostile.
        try damaged(out + "/v3-requests.zip", to: out + "/hostile-qualifier.zip") { path in
            try forgeIndex(in: path) { bytes in
                let mark = Array(" m=POST".utf8)
                guard let at = (0...(bytes.count - mark.count)).reversed().first(where: { Array(bytes[$0..<($0 + mark.count)]) == mark }) else { return }
                for i in 4..<7 { bytes[at + i] |= 0x20 }
            }
        }
        // A header flag this reader does not know: refused, not ignored.
        try damaged(pack(out), to: out + "/unknown-header-flag.zip") { path in
            try forgeIndex(in: path) { bytes in bytes[IndexLayout.flagsOffset] |= 0x04 }
        }
        try rewriteAsZip64(out + "/v3-crawl.zip", to: out + "/v3-crawl-zip64.zip")
        try writeNext(into: out)
        // Version 3 stores index.bin or deflates it: the same pack with it stored mounts alike, with the same digest.
        try writePack(to: out + "/v3-pack-stored-index.zip", signed: false, storesIndex: true)
        // A deflated index.bin that claims more than 64 bytes per stored byte: refused unread as hostile.
        try damaged(pack(out), to: out + "/hostile-index-ratio.zip") { path in
            let bundle = try MountedBundle(path: path)
            let entry = try #require(bundle.metadata[BundleFormat.indexEntryName])
            let stream = try bundle.file.read(
                at: try MountedBundle.metadataDataOffset(entry, in: bundle.file, bodyArea: bundle.directory.centralDirectoryOffset),
                count: Int(entry.compressedSize), what: entry.name)
            try replaceMetadataEntry(
                BundleFormat.indexEntryName, in: path, data: stream, method: 8, crc32: entry.crc32, size: Int(entry.compressedSize) * 64 + 1)
        }
        // A version-2 bundle whose index.bin is deflated (version 2 stores it): refused unread as hostile.
        try damaged(folder + "/v2-pack.zip", to: out + "/hostile-v2-deflated-index.zip") { path in
            let index = try MountedBundle(path: path).index.bytes
            let stream = try ZlibDeflate.deflate(index, level: 6)
            try replaceMetadataEntry(BundleFormat.indexEntryName, in: path, data: stream, method: 8, crc32: CRC32.checksum(index), size: index.count)
        }
        let pack = pack(out)
        // A flipped byte inside the deflate stream of the home page: mounts; every read of that body is refused.
        try damaged(pack, to: out + "/broken-body.zip") { path in
            let bundle = try MountedBundle(path: path)
            let record = bundle.index.body(at: try #require(bundle.entry(forKey: base)?.body).index)
            try flipByte(at: Int(record.dataOffset) + 20, in: path)
        }
        // A flipped byte in index.bin: its CRC-32 fails at mount.
        try damaged(pack, to: out + "/broken-index.zip") { path in
            let bundle = try MountedBundle(path: path)
            let entry = try #require(bundle.metadata[BundleFormat.indexEntryName])
            try flipByte(at: Int(entry.localHeaderOffset) + 30 + entry.name.utf8.count + 200, in: path)
        }
        // Cut short: the end records are gone.
        try damaged(pack, to: out + "/broken-truncated.zip") { path in
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            try data.prefix(data.count - 40).write(to: URL(fileURLWithPath: path))
        }
        // An informational status (a client would wait for the final one): refused at mount as hostile.
        try damaged(pack, to: out + "/hostile-status.zip") { path in
            try forgeIndex(in: path) { bytes in
                let entries = Int(bytes.u64(IndexLayout.entriesOffsetOffset))
                bytes[entries + 12] = 102
                bytes[entries + 13] = 0
            }
        }
        // An entry flag this reader does not know: refused, not ignored.
        try damaged(pack, to: out + "/unknown-flag.zip") { path in
            try forgeIndex(in: path) { bytes in
                bytes[Int(bytes.u64(IndexLayout.entriesOffsetOffset)) + 15] |= 0x80
            }
        }
    }

    // MARK: Requests

    struct Request: Codable, Equatable {
        var method: String
        var url: String
        var headers: [[String]]
        /// The request body, as text (absent: none).
        var body: String?
    }

    struct Answer: Codable, Equatable {
        /// nil for a miss (the bundle has no entry for the request).
        var status: Int?
        var headers: [[String]]?
        var bodyLength: Int?
        var bodySHA256: String?
        /// The error code when answering fails (`corrupt-body`).
        var error: String?
    }

    struct Exchange: Codable, Equatable {
        var request: Request
        var answer: Answer
    }

    struct Vector: Codable, Equatable {
        var file: String
        var publicKey: String?
        /// `ok`, or the error code mounting gives.
        var mount: String
        var formatVersion: Int?
        var entries: Int?
        var bodies: Int?
        var exchanges: [Exchange]
        /// For a delta (§12): the bundle it is mounted over, relative to `docs/vectors/`.
        var base: String?
    }

    struct Expected: Codable, Equatable {
        var comment: String
        var vectors: [Vector]
    }

    static func request(_ url: String, _ headers: [(String, String)] = [], method: String = "GET", body: String? = nil) -> Request {
        Request(method: method, url: url, headers: headers.map { [$0.0, $0.1] }, body: body)
    }

    /// The requests asked of a bundle of the vector site, packed or crawled.
    static let siteRequests: [Request] = [
        request(base),
        request("HTTP://VECTORS.example:80/site/?utm_source=mail#top"),
        request(base, [("Accept-Encoding", "gzip")]),
        request(base, [("Accept-Encoding", "gzip;q=0, *")]),
        // A weight outside RFC 9110's grammar is no weight (H7).
        request(base, [("Accept-Encoding", "gzip;q=nan")]),
        request(base, method: "HEAD"),
        request(base, [("Range", "bytes=0-9")]),
        request(base, [("Range", "bytes=-5")]),
        request(base, [("Range", "bytes=100-")]),
        request(base, [("Range", "bytes=5000-")]),
        request(base, [("Range", "bytes=0-18446744073709551615")]),
        request(base, [("Range", "bytes=0-1,4-5")]),
        request(base, [("Range", "bytes=10-5")]),
        request(base, [("Range", "bytes=0-9"), ("Accept-Encoding", "gzip")]),
        request(base, [("Range", "bytes=0-9"), ("If-Range", "\"not-this\"")]),
        request(base, [("If-None-Match", "\"d4141da8ee1c5761d4864de290aca2ab\"")]),
        request(base, [("If-None-Match", "\"d4141da8ee1c5761d4864de290aca2ab-gzip\""), ("Accept-Encoding", "gzip")]),
        request(base, [("If-None-Match", "\"65a1b2c3-21f\"")]),
        request(base, [("If-None-Match", "W/\"65a1b2c3-21f\", \"x\"")]),
        request(base, [("If-None-Match", "*")]),
        request(base, [("If-Modified-Since", "Thu, 01 Jan 2026 00:00:00 GMT")]),
        request(base, [("If-Modified-Since", "Wed, 31 Dec 2025 23:59:59 GMT")]),
        // HTTP dates by the grammar (H9): the obsolete forms parse; lenient ones do not.
        request(base, [("If-Modified-Since", "Thursday, 01-Jan-26 00:00:00 GMT")]),
        request(base, [("If-Modified-Since", "Thu Jan  1 00:00:00 2026")]),
        request(base, [("If-Modified-Since", "Thu, 01 Jan 2026 00:00:00 gmt")]),
        request(base, [("If-Modified-Since", "Thu, 01 Jan 2026 00:00:00 UTC")]),
        request(base, [("If-Modified-Since", "Thu, 01 Jan 2026 00:00:00 +0000")]),
        request(base, [("If-Modified-Since", "Mon, 30 Feb 2026 00:00:00 GMT")]),
        request(base, [("If-Modified-Since", "Thu, 01 Jan 2026 25:00:00 GMT")]),
        request(base, [("If-Modified-Since", "Thu, 01 jan 2026 00:00:00 GMT")]),
        request(base, method: "POST"),
        request(base + "about"),
        request(base + "about/"),
        request(base + "about/index.html"),
        request(base + "about/./../about/index.html"),
        request(base + "style.css", [("Accept-Encoding", "gzip")]),
        request(base + "img/dot.png", [("Accept-Encoding", "gzip")]),
        request(base + "data.json"),
        request(base + "empty.txt"),
        request(base + "empty.txt", [("Range", "bytes=0-0")]),
        request(base + "gone.html"),
        request(base + "missing.html"),
        request("http://ads.example/pixel.gif"),
        request("https://cdn.example/lib.js"),
        request("https://cdn.example/lib.js", [("If-None-Match", "\"386e41cba18e8dfc6aadceb2d3362bec\"")]),
        // A query no entry has: answered by the query-less entry only under an ignore-query rule (§4.6).
        request(base + "about/index.html?q=dictionary&check_keywords=yes"),
        request(base + "style.css?v=3", [("Accept-Encoding", "gzip")]),
        request(base + "?utm_source=mail&page=2"),
        request(base + "missing.html?q=x"),
        // Recorded queries (v3-query-variants.zip): answered as the page where each recorded one was, a miss where one
        // was another page.
        request(base + "search.html?q=emerald"),
        request(base + "search.html?q=ruby"),
        request(base + "list.html?page=2"),
        request(base + "list.html?page=3"),
    ]

    static func answer(_ request: Request, bundle: MountedBundle) -> Answer {
        var fields = HTTPFields()
        for pair in request.headers { if let name = HTTPField.Name(pair[0]) { fields.append(HTTPField(name: name, value: pair[1])) } }
        let asked = BundleRequest(method: request.method, url: request.url, headers: fields, body: request.body.map { Data($0.utf8) })
        guard let response = BundleResponder(bundle: bundle).respond(to: asked)
        else { return Answer() }
        do {
            let body = try response.bodyData()
            return Answer(
                status: response.status, headers: response.headers.map { [$0.name.canonicalName, $0.value] }, bodyLength: body.count,
                bodySHA256: hexString(Array(SHA256.hash(data: body))))
        } catch let error as BundleError {
            return Answer(status: response.status, error: error.code.description)
        } catch {
            return Answer(status: response.status, error: "\(error)")
        }
    }

    /// Mounts `file` as the vector says and asks it every request.
    static func run(file: String, publicKey: String?, base: String? = nil, requests: [Request]) -> Vector {
        var options = MountedBundle.Options()
        if let publicKey { options.requiredPublicKey = try? BundlePublicKey(contentsOf: folder + "/" + publicKey).bytes }
        do {
            let bundle =
                try base.map { try MountedBundle(deltaPath: folder + "/" + file, base: try MountedBundle(path: folder + "/" + $0), options: options) }
                ?? MountedBundle(path: folder + "/" + file, options: options)
            return Vector(
                file: file, publicKey: publicKey, mount: "ok", formatVersion: bundle.formatVersion, entries: bundle.entryCount, bodies: bundle.bodyCount,
                exchanges: requests.map { Exchange(request: $0, answer: answer($0, bundle: bundle)) }, base: base)
        } catch let error as BundleError {
            return Vector(file: file, publicKey: publicKey, mount: error.code.description, exchanges: [], base: base)
        } catch {
            return Vector(file: file, publicKey: publicKey, mount: "\(error)", exchanges: [], base: base)
        }
    }

    /// Which vectors `expected.json` lists, with the key each is mounted with.
    static let plan: [(file: String, publicKey: String?, base: String?)] = [
        ("v1-unsigned.zip", nil, nil), ("v1-signed.zip", "vector-test-key.pub", nil),
        ("v3-pack.zip", nil, nil), ("v3-pack.zip", "vector-test-key.pub", nil), ("v3-pack-signed.zip", "vector-test-key.pub", nil),
        ("v3-pack-query.zip", nil, nil), ("v3-query-variants.zip", nil, nil), ("v3-match-json.zip", nil, nil), ("v3-crawl.zip", nil, nil),
        ("v3-crawl-zip64.zip", nil, nil), ("v3-match-graphql.zip", nil, nil),
        ("broken-body.zip", nil, nil), ("broken-index.zip", nil, nil), ("broken-truncated.zip", nil, nil), ("hostile-status.zip", nil, nil),
        ("unknown-flag.zip", nil, nil), ("v3-requests.zip", nil, nil), ("hostile-qualifier.zip", nil, nil), ("unknown-header-flag.zip", nil, nil),
        // A delta (§12): over its base it answers as v3-pack-next.zip; alone it is refused; over another bundle too.
        ("v3-pack-next.zip", nil, nil), ("delta-pack-next.zip", nil, "v3-pack.zip"), ("delta-pack-next.zip", nil, nil),
        ("delta-pack-next.zip", nil, "v3-crawl.zip"), ("delta-pack-next-edit.zip", nil, "v3-pack.zip"),
        ("v3-pack-stored-index.zip", nil, nil), ("hostile-index-ratio.zip", nil, nil), ("hostile-v2-deflated-index.zip", nil, nil),
        // Version 2, as packager wrote it before version 3 (index.bin stored, the bodies' digests in the manifest), read
        // as before: these files are no longer written, only read. v2-delta-pack-next.zip is a delta of that time
        // (delta.json without the target's format version), over v2-pack.zip.
        ("v2-pack.zip", nil, nil), ("v2-pack-signed.zip", "vector-test-key.pub", nil), ("v2-pack-query.zip", nil, nil), ("v2-crawl.zip", nil, nil),
        ("v2-crawl-zip64.zip", nil, nil), ("v2-requests.zip", nil, nil), ("v2-pack-next.zip", nil, nil),
        ("v2-delta-pack-next.zip", nil, "v2-pack.zip"),
    ]

    static let comment =
        "Expected answers of the bundles in this folder (docs/FORMAT.md §11). For each vector: how mounting it ends (ok, or an error code), then"
        + " requests and their answers: status (absent for a miss), response headers in order, the body's length and SHA-256 (of the bytes as"
        + " sent: gzip when the answer is gzip), or the error code reading the body gives. Written by VectorTests with PACKAGER_WRITE_VECTORS=1."

    static func expected() -> Expected {
        Expected(comment: comment, vectors: plan.map { run(file: $0.file, publicKey: $0.publicKey, base: $0.base, requests: siteRequests + apiRequests) })
    }

    // MARK: Tests

    @Test("the writer writes the version-3 vectors byte for byte (reproducible for fixed inputs)")
    func writerReproducesVectors() throws {
        if Self.writing {
            try Self.writeVectors(into: Self.folder)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try (encoder.encode(Self.expected()) + Data("\n".utf8)).write(to: URL(fileURLWithPath: Self.folder + "/expected.json"))
        }
        let scratch = try TemporaryFolder()
        try Self.writeVectors(into: scratch.path)
        for name in [
            "v3-pack.zip", "v3-pack-query.zip", "v3-query-variants.zip", "v3-match-json.zip", "v3-match-graphql.zip", "v3-crawl.zip", "v3-crawl-zip64.zip",
            "broken-body.zip",
            "broken-index.zip",
            "hostile-status.zip",
            "unknown-flag.zip", "v3-requests.zip", "hostile-qualifier.zip", "unknown-header-flag.zip", "v3-pack-next.zip", "delta-pack-next.zip",
            "delta-pack-next-edit.zip", "v3-pack-stored-index.zip", "hostile-index-ratio.zip", "hostile-v2-deflated-index.zip",
        ] {
            let written = try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/" + name))
            let committed = try Data(contentsOf: URL(fileURLWithPath: Self.folder + "/" + name))
            #expect(written == committed, "\(name) differs from docs/vectors/\(name): the writer's output changed")
        }
        // Ed25519 signatures need not repeat byte for byte across implementations: the signed vector must have the same
        // index (digest) as the unsigned one and verify.
        let signed = try MountedBundle(path: scratch.path + "/v3-pack-signed.zip")
        #expect(signed.digest == (try MountedBundle(path: Self.folder + "/v3-pack-signed.zip")).digest)
        #expect(signed.digest == (try MountedBundle(path: Self.folder + "/v3-pack.zip")).digest)
    }

    @Test("check passes every vector that mounts, deltas of both formats over their bases included, and fails the others")
    func checkEveryVector() throws {
        for (file, key, base) in Self.plan {
            let publicKey = try key.map { try BundlePublicKey(contentsOf: Self.folder + "/" + $0).bytes }
            let report = Checker.check(path: Self.folder + "/" + file, bases: base.map { [Self.folder + "/" + $0] } ?? [], publicKey: publicKey)
            let mounts = Self.run(file: file, publicKey: key, base: base, requests: []).mount == "ok"
            // broken-body.zip mounts, and check reads every body: it fails there.
            #expect(report.issues.isEmpty == (mounts && file != "broken-body.zip"), "\(file) over \(base ?? "nothing"): \(report.issues)")
        }
    }

    @Test("a delta between versions (a fleet's first version-3 release over its version-2 one, and back) rebuilds byte for byte and answers as its target")
    func deltasAcrossVersions() throws {
        let scratch = try TemporaryFolder()
        for (old, new, format) in [("v2-pack.zip", "v3-pack-next.zip", 2), ("v3-pack.zip", "v2-pack-next.zip", 1)] {
            let delta = scratch.path + "/\(old)-\(new)"
            let summary = try DeltaBundles.make(old: Self.folder + "/" + old, new: Self.folder + "/" + new, to: delta)
            #expect(summary.info.format == format, "\(old) to \(new)")
            try DeltaBundles.apply([delta, Self.folder + "/" + old], to: delta + ".rebuilt")
            #expect(try Data(contentsOf: URL(fileURLWithPath: delta + ".rebuilt")) == Data(contentsOf: URL(fileURLWithPath: Self.folder + "/" + new)))
            let over = try MountedBundle(deltaPath: delta, base: try MountedBundle(path: Self.folder + "/" + old))
            let target = try MountedBundle(path: Self.folder + "/" + new)
            #expect(over.digest == target.digest && over.formatVersion == target.formatVersion)
            for request in Self.siteRequests {
                let (a, b) = (Self.answer(request, bundle: over), Self.answer(request, bundle: target))
                // A body rebuilt from a patch is deflated by the runtime: its gzip answer differs in bytes (§12.5).
                if a.headers?.contains(where: { $0.first?.lowercased() == "content-encoding" }) == true { continue }
                #expect(a == b, "\(old) to \(new): \(request.method) \(request.url) \(request.headers)")
            }
        }
    }

    @Test("every vector mounts, answers and fails as expected.json says")
    func expectedAnswers() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.folder + "/expected.json"))
        let expected = try JSONDecoder().decode(Expected.self, from: data)
        #expect(expected.vectors.count == Self.plan.count)
        for vector in expected.vectors {
            let actual = Self.run(file: vector.file, publicKey: vector.publicKey, base: vector.base, requests: vector.exchanges.map(\.request))
            #expect(actual.mount == vector.mount, "\(vector.file)")
            #expect(actual.formatVersion == vector.formatVersion && actual.entries == vector.entries && actual.bodies == vector.bodies, "\(vector.file)")
            for (a, e) in zip(actual.exchanges, vector.exchanges) {
                #expect(a.answer == e.answer, "\(vector.file): \(e.request.method) \(e.request.url) \(e.request.headers)")
            }
        }
    }

    @Test("expected.json says what H19 promises for request variants, and what readers refuse")
    func requestVariantRules() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.folder + "/expected.json"))
        let expected = try JSONDecoder().decode(Expected.self, from: data)
        let v = try #require(expected.vectors.first { $0.file == "v3-requests.zip" })
        func answer(_ url: String, _ headers: [[String]] = [], method: String = "GET", body: String? = nil) throws -> Answer {
            try #require(
                v.exchanges.first {
                    $0.request.url == Self.api + url && $0.request.headers == headers && $0.request.method == method && $0.request.body == body
                }
            ).answer
        }
        func sha(_ text: String) -> String { hexString(Array(SHA256.hash(data: Data(text.utf8)))) }
        #expect(v.mount == "ok" && v.entries == 12)
        // Method and body.
        let apple = sha("{\"hits\": [\"apple\"]}")
        #expect(try answer("search", [["Content-Type", "application/json"]], method: "POST", body: "{\"q\": \"a\"}").bodySHA256 == apple)
        #expect(try answer("search", method: "post", body: "{\"q\": \"a\"}").bodySHA256 == sha("{\"hits\": [\"apple\"]}"))
        #expect(try answer("search", method: "POST", body: "{\"q\": \"b\"}").bodySHA256 == sha("{\"hits\": [\"banana\"]}"))
        #expect(try answer("search", method: "POST", body: "{\"q\": \"c\"}").status == nil)
        #expect(try answer("search", method: "POST").status == nil)
        #expect(try answer("search").status == nil)
        // Content negotiation; no acceptable variant is a miss, never another's bytes.
        #expect(try answer("items", [["Accept", "text/csv"]]).bodySHA256 == sha("id\n1\n"))
        #expect(try answer("items", [["Accept", "text/csv;q=0.5, application/json;q=0.9"]]).bodySHA256 == sha("[{\"id\": 1}]"))
        #expect(try answer("items", [["Accept", "text/*"]]).bodySHA256 == sha("id\n1\n"))
        #expect(try answer("items", [["Accept", "application/xml"]]).status == nil)
        // q=0 refuses the CSV, and no range names JSON: nothing is acceptable.
        #expect(try answer("items", [["Accept", "text/csv;q=0"]]).status == nil)
        #expect(try answer("items", [["Accept", "application/json"]], method: "HEAD").bodyLength == 0)
        #expect(try answer("items", method: "POST").status == nil)
        #expect(try answer("greeting", [["Accept-Language", "fr-CH, de;q=0.5"]]).bodySHA256 == sha("bonjour"))
        #expect(try answer("greeting", [["Accept-Language", "es"]]).status == nil)
        // A credential's answer goes to a request with one of its scheme only; the anonymous one to none with a credential.
        #expect(try answer("private", [["Authorization", "Bearer any-token"]]).bodySHA256 == sha("{\"secret\": \"for bearers\"}"))
        #expect(try answer("private", [["Authorization", "bearer other"]]).bodySHA256 == sha("{\"secret\": \"for bearers\"}"))
        #expect(try answer("private").bodySHA256 == sha("{\"public\": true}"))
        #expect(try answer("private", [["Authorization", "Basic dXNlcjpwYXNz"]]).status == nil)
        #expect(try answer("missing").status == 404)
        #expect(try answer("status", method: "DELETE").status == nil)
        // Form queries: `%20` is the `+` a declaration wrote; the order of one name's values tells two answers apart; `%2B`
        // is a plus, not a space.
        #expect(try answer("sql?sql=select%20name%20from%20t&_col=type&_col=name").bodySHA256 == sha("[\"type, name\"]"))
        #expect(try answer("sql?_col=name&sql=select+name+from+t&_col=type").bodySHA256 == sha("[\"name, type\"]"))
        #expect(try answer("sql?sql=select%2Bname%2Bfrom%2Bt&_col=type&_col=name").status == nil)
        #expect(try answer("sql?sql=select+name+from+t&_col=name").status == nil)
        // The other vectors have no qualifiers: a POST with a body is a miss there, as before.
        let pack = try #require(expected.vectors.first { $0.file == "v3-pack.zip" && $0.publicKey == nil })
        #expect(pack.exchanges.filter { $0.request.url.hasPrefix(Self.api) }.allSatisfy { $0.answer.status == nil })
        #expect(expected.vectors.first { $0.file == "hostile-qualifier.zip" }?.mount == "hostile")
        #expect(expected.vectors.first { $0.file == "unknown-header-flag.zip" }?.mount == "unsupported")
    }

    @Test("expected.json says what the format promises, not only what the code did")
    func expectationsAreTheFormatsRules() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: Self.folder + "/expected.json"))
        let expected = try JSONDecoder().decode(Expected.self, from: data)
        func vector(_ file: String, key: String? = nil) throws -> Vector { try #require(expected.vectors.first { $0.file == file && $0.publicKey == key }) }
        func answer(_ v: Vector, _ url: String, _ headers: [[String]] = [], method: String = "GET") throws -> Answer {
            try #require(v.exchanges.first { $0.request.url == url && $0.request.headers == headers && $0.request.method == method }).answer
        }
        func header(_ a: Answer, _ name: String) -> String? { a.headers?.first { $0[0].lowercased() == name }?[1] }
        let pack = try vector("v3-pack.zip")
        let crawl = try vector("v3-crawl.zip")
        #expect(pack.mount == "ok" && pack.formatVersion == 3 && pack.entries == 9 && pack.bodies == 6)
        // The packed home page: a synthesized ETag of the digest; gzip gets its own ETag and Vary.
        let home = try answer(pack, Self.base)
        #expect(home.status == 200 && header(home, "etag") == "\"d4141da8ee1c5761d4864de290aca2ab\"" && home.bodyLength == 543)
        let gzip = try answer(pack, Self.base, [["Accept-Encoding", "gzip"]])
        #expect(header(gzip, "content-encoding") == "gzip" && header(gzip, "etag") == "\"d4141da8ee1c5761d4864de290aca2ab-gzip\"")
        #expect(header(gzip, "vary") == "Accept-Encoding")
        #expect(try answer(pack, Self.base, [["Accept-Encoding", "gzip;q=0, *"]]).headers.map { h in !h.contains { $0[0] == "Content-Encoding" } } == true)
        #expect(try answer(pack, "HTTP://VECTORS.example:80/site/?utm_source=mail#top").bodySHA256 == home.bodySHA256)
        #expect(try answer(pack, Self.base, method: "HEAD").bodyLength == 0)
        #expect(try header(answer(pack, Self.base, method: "HEAD"), "content-length") == "543")
        #expect(try answer(pack, Self.base, method: "POST").status == nil)
        // Ranges address the identity bytes, also when gzip is accepted.
        #expect(try answer(pack, Self.base, [["Range", "bytes=0-9"]]).status == 206)
        #expect(try header(answer(pack, Self.base, [["Range", "bytes=0-9"]]), "content-range") == "bytes 0-9/543")
        #expect(try header(answer(pack, Self.base, [["Range", "bytes=-5"]]), "content-range") == "bytes 538-542/543")
        #expect(try answer(pack, Self.base, [["Range", "bytes=0-9"], ["Accept-Encoding", "gzip"]]).bodyLength == 10)
        #expect(try answer(pack, Self.base, [["Range", "bytes=5000-"]]).status == 416)
        #expect(try header(answer(pack, Self.base, [["Range", "bytes=5000-"]]), "content-range") == "bytes */543")
        #expect(try answer(pack, Self.base, [["Range", "bytes=0-18446744073709551615"]]).bodyLength == 543)
        #expect(try answer(pack, Self.base, [["Range", "bytes=0-1,4-5"]]).status == 200)
        #expect(try answer(pack, Self.base, [["Range", "bytes=10-5"]]).status == 200)
        #expect(try answer(pack, Self.base, [["Range", "bytes=0-9"], ["If-Range", "\"not-this\""]]).status == 200)
        #expect(try answer(pack, Self.base + "empty.txt", [["Range", "bytes=0-0"]]).status == 416)
        // Conditional requests: the right ETag for the representation, weak comparison, * matches.
        #expect(try answer(pack, Self.base, [["If-None-Match", "\"d4141da8ee1c5761d4864de290aca2ab\""]]).status == 304)
        #expect(try answer(pack, Self.base, [["If-None-Match", "\"d4141da8ee1c5761d4864de290aca2ab-gzip\""], ["Accept-Encoding", "gzip"]]).status == 304)
        #expect(try answer(pack, Self.base, [["If-None-Match", "*"]]).status == 304)
        #expect(try answer(crawl, Self.base, [["If-None-Match", "W/\"65a1b2c3-21f\", \"x\""]]).status == 304)
        #expect(try answer(crawl, Self.base, [["If-Modified-Since", "Thu, 01 Jan 2026 00:00:00 GMT"]]).status == 304)
        #expect(try answer(crawl, Self.base, [["If-Modified-Since", "Wed, 31 Dec 2025 23:59:59 GMT"]]).status == 200)
        // Recorded redirects, error pages and blocked URLs are answered as recorded.
        let redirect = try answer(pack, Self.base + "about")
        #expect(redirect.status == 301 && header(redirect, "location") == Self.base + "about/")
        #expect(try answer(crawl, Self.base + "gone.html").status == 404)
        #expect(try answer(crawl, "http://ads.example/pixel.gif").status == 204)
        #expect(try answer(crawl, "http://ads.example/pixel.gif").headers.map { h in !h.contains { $0[0] == "Content-Length" } } == true)
        #expect(try answer(crawl, Self.base + "missing.html").status == nil)
        // A substituted file's synthesized ETag is a validator like any other when answering.
        #expect(try answer(crawl, "https://cdn.example/lib.js", [["If-None-Match", "\"386e41cba18e8dfc6aadceb2d3362bec\""]]).status == 304)
        // Version 1 still answers; ZIP64 end records change nothing; the damaged ones fail with their codes.
        #expect(try vector("v1-signed.zip", key: "vector-test-key.pub").mount == "ok")
        #expect(try answer(vector("v1-unsigned.zip"), Self.base).bodySHA256 == home.bodySHA256)
        #expect(try vector("v3-crawl-zip64.zip").exchanges.map(\.answer) == crawl.exchanges.map(\.answer))
        #expect(try vector("v3-pack.zip", key: "vector-test-key.pub").mount == "signature")
        #expect(try vector("v3-pack-signed.zip", key: "vector-test-key.pub").mount == "ok")
        #expect(try answer(vector("broken-body.zip"), Self.base).error == "corrupt-body")
        #expect(try answer(vector("broken-body.zip"), Self.base, [["Accept-Encoding", "gzip"]]).error == "corrupt-body")
        #expect(try vector("broken-index.zip").mount == "corrupt-index")
        #expect(try vector("broken-truncated.zip").mount == "not-a-bundle")
        #expect(try vector("hostile-status.zip").mount == "hostile")
        #expect(try vector("unknown-flag.zip").mount == "unsupported")
    }

    @Test("standard tools list and extract the vectors")
    func standardTools() throws {
        for file in ["v3-pack.zip", "v3-crawl.zip", "v3-crawl-zip64.zip"] {
            let unzip = try TestSupport.run("unzip", ["-t", Self.folder + "/" + file])
            #expect(unzip.status == 0, "\(file): \(unzip.output)")
            let bsdtar = try TestSupport.run("bsdtar", ["-tf", Self.folder + "/" + file])
            #expect(bsdtar.status == 0 && bsdtar.output.contains("index.bin"), "\(file): \(bsdtar.output)")
        }
    }

    @Test("body names: 16 hex digits, more where two digests share them, never two alike")
    func bodyNames() {
        func digest(_ hex: String) -> [UInt8] { bytesFromHex(hex.padding(toLength: 64, withPad: "0", startingAt: 0))! }
        let digests = [
            digest("00"), digest("0123456789abcdef00"), digest("0123456789abcdef01"), digest("0123456789abcdef1"), digest("0123456789abcdf"),
            digest("ff"),
        ]
        #expect(BundleWriter.bodyNameDigits(digests) == [16, 18, 18, 17, 16, 16])
        let names = zip(digests, BundleWriter.bodyNameDigits(digests)).map { BundleFormat.bodyEntryName(sha256: $0, digits: $1) }
        #expect(Set(names).count == names.count)
    }
}
