import Crypto
import Foundation
import OfflineBundle

/// A bundle written as WACZ 1.1.1 (`packager export --format wacz`): a ZIP, every file stored, that holds
/// `archive/data.warc.gz` (the bundle as WARC, ``WARCExporter``), `indexes/index.cdx` (a CDXJ line per response and
/// revisit record, sorted), `pages/pages.jsonl` (every HTML page answered 200), `datapackage.json` (each file's
/// SHA-256 and size) and `datapackage-digest.json` (the SHA-256 of datapackage.json). replayweb.page and pywb open
/// it; py-wacz's `wacz validate` checks it.
///
/// A request with a body is indexed as pywb keys it at replay: `__wb_method=POST` and the body as query parameters
/// appended to the URL's query (``bodyQuery(_:contentType:)``). The WARC goes to a temporary file of
/// its own beside the output first (removed after), so memory is a record and the index. The export is reproducible.
///
/// **Signing.** With a key (`--sign-key`, the Ed25519 key that signs bundles), `datapackage-digest.json` gains
/// ``signatureField``: the algorithm (`ed25519`), the public key and the signature of the digest's `hash` string (the
/// bytes `sha256:` and the hex of datapackage.json's SHA-256), in base64. It is not the WACZ signing
/// recommendation's `signedData`: that one names ECDSA keys (P-256, P-384) or a domain's certificate, and a
/// bundle's key is Ed25519; tools that read `signedData` see an unsigned WACZ, and `packager pack --from-warc
/// --public-key` checks this one.
public enum WACZExporter {
    /// The field of `datapackage-digest.json` that holds packager's Ed25519 signature of its `hash`.
    public static let signatureField = "packagerSignature"

    /// Writes the bundle at `bundlePath` to `output` as WACZ, its datapackage digest signed by `signingKey` when one is
    /// given.
    @discardableResult
    public static func export(
        bundle bundlePath: String, to output: String, signingKey: Curve25519.Signing.PrivateKey? = nil
    ) throws -> WARCExporter.Summary {
        // The output's folder first: a large bundle's index goes to a scratch file there.
        if let problem = OutputFile.problem(with: output) { throw problem }
        let bundle = try MountedBundle(
            path: bundlePath, options: .wholeBundlePass(scratchIn: (output as NSString).deletingLastPathComponent))
        let created = bundle.createdAt ?? Date(timeIntervalSince1970: 0)
        // The WARC, in a temporary file beside the output, removed with its writer (never synced or renamed: it is
        // copied into the WACZ, then dropped).
        let warc = try AtomicOutput(destination: output + ".warc.gz")
        let warcPath = warc.temporaryPath
        // The index's lines sorted in bounded memory (runs beside the output past 2 MiB), and the pages written as they
        // come, each to a temporary file beside the output, hashed as it is written.
        let folder = (warcPath as NSString).deletingLastPathComponent
        let index = ExternalSorter(folder: folder, memoryLimit: 2 << 20) { $0.lexicographicallyPrecedes($1) }
        let pages = try HashedFile(destination: output + ".pages")
        try pages.write(#"{"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}"# + "\n")
        var mainPage: (url: String, date: Date)?
        let written = try WARCExporter.write(bundle, to: warc, filename: "data.warc.gz") { record in
            try index.append(Array(cdxjLine(record).utf8))
            if record.status == 200, record.method == "GET", MediaTypes.essence(of: record.mediaType) == "text/html" {
                try pages.write(jsonLine(["id": String(recordKey(record.url).prefix(32)), "url": record.url, "ts": isoDate(record.date)]) + "\n")
                if mainPage == nil { mainPage = (record.url, record.date) }
            }
        }
        try warc.flush()
        let indexFile = try HashedFile(destination: output + ".cdx")
        let sorted = try index.sorted()
        var line = [UInt8]()
        while try sorted.next({ (record: UnsafeRawBufferPointer) -> Void in
            line.removeAll(keepingCapacity: true)
            line.append(contentsOf: record)
            line.append(0x0A)
        }) != nil {
            try indexFile.write(line)
        }
        try indexFile.flush()
        try pages.flush()
        var summary = written.summary
        let (warcSize, warcDigest) = (Int(written.size), written.sha256)

        var resources: [[String: Any]] = [
            ["name": "data.warc.gz", "path": "archive/data.warc.gz", "hash": "sha256:" + warcDigest, "bytes": warcSize],
            ["name": "index.cdx", "path": "indexes/index.cdx", "hash": "sha256:" + indexFile.sha256, "bytes": indexFile.size],
            ["name": "pages.jsonl", "path": "pages/pages.jsonl", "hash": "sha256:" + pages.sha256, "bytes": pages.size],
        ]
        resources.sort { ($0["path"] as? String ?? "") < ($1["path"] as? String ?? "") }
        var package: [String: Any] = [
            "profile": "data-package", "wacz_version": "1.1.1", "created": isoDate(created), "software": "packager \(PackagerVersion.string)",
            "title": (bundlePath as NSString).lastPathComponent, "resources": resources,
        ]
        if let mainPage {
            package["mainPageUrl"] = mainPage.url
            package["mainPageDate"] = isoDate(mainPage.date)
        }
        let packageBytes = Array(try JSONSerialization.data(withJSONObject: package, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]))
        let packageHash = "sha256:" + hexString(Array(SHA256.hash(data: packageBytes)))
        var digestObject: [String: Any] = ["path": "datapackage.json", "hash": packageHash]
        if let signingKey {
            summary.signedBy = BundlePublicKey.fingerprint(of: Array(signingKey.publicKey.rawRepresentation))
            // Ed25519 signatures are deterministic: the export stays reproducible.
            digestObject[signatureField] = [
                "algorithm": "ed25519", "publicKey": signingKey.publicKey.rawRepresentation.base64EncodedString(),
                "signature": try signingKey.signature(for: Data(packageHash.utf8)).base64EncodedString(),
            ]
        }
        let digestBytes = Array(try JSONSerialization.data(withJSONObject: digestObject, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]))

        let atomic = try AtomicOutput(destination: output)
        try withExtendedLifetime(atomic) {
            let writer = try LibArchive.ArchiveWriter(descriptor: atomic.descriptor, format: .wacz)
            try writer.addFile(path: "archive/data.warc.gz", contentsOf: warcPath)
            for (path, bytes) in [("datapackage-digest.json", digestBytes), ("datapackage.json", packageBytes)] {
                try bytes.withUnsafeBytes { try writer.addFile(path: path, bytes: $0) }
            }
            try writer.addFile(path: "indexes/index.cdx", contentsOf: indexFile.path)
            try writer.addFile(path: "pages/pages.jsonl", contentsOf: pages.path)
            try writer.close()
        }
        try atomic.commit()
        withExtendedLifetime((warc, indexFile, pages)) {}
        return summary
    }

    /// The record's CDXJ line: its SURT key and 14-digit time, then its fields as JSON.
    /// A temporary file beside the output (removed with it, never renamed), written in order and hashed as it is.
    final class HashedFile {
        private let output: AtomicOutput
        private var hasher = SHA256()
        private(set) var size = 0

        init(destination: String) throws { output = try AtomicOutput(destination: destination) }

        var path: String { output.temporaryPath }
        var sha256: String { hexString(Array(hasher.finalize())) }

        func write(_ text: String) throws { try write(Array(text.utf8)) }

        func write(_ bytes: [UInt8]) throws {
            hasher.update(data: bytes)
            size += bytes.count
            try output.write(bytes)
        }

        func flush() throws { try output.flush() }
    }

    static func cdxjLine(_ record: WARCExporter.IndexedRecord) -> String {
        var url = record.url
        var fields: [String: String] = [
            "url": record.url, "mime": record.revisit ? "warc/revisit" : Self.mime(record.mediaType), "status": String(record.status),
            "digest": record.payloadDigest, "length": String(record.length), "offset": String(record.offset), "filename": "data.warc.gz",
        ]
        if record.method != "GET" {
            // As pywb keys a request with a body: its method, then the body as query parameters.
            var appended = "__wb_method=" + record.method
            if let body = record.requestBody, !body.isEmpty, ["POST", "PUT"].contains(record.method) {
                let query = bodyQuery(body, contentType: record.requestContentType ?? "")
                if !query.isEmpty { appended += "&" + String(query.prefix(4096)) }
            }
            url += (url.contains("?") ? "&" : "?") + appended
            fields["method"] = record.method
            fields["requestBody"] = appended
        }
        return surt(url) + " " + timestamp(record.date) + " " + jsonLine(fields)
    }

    /// A request body as pywb's replay turns it into query parameters, so that a replayed POST finds its answer: a form
    /// decoded, a JSON document's leaves as `name=value` (a repeated name as `name.2_`, …), anything else (or a
    /// document that does not parse) in base64 as `__wb_post_data`.
    static func bodyQuery(_ body: Data, contentType: String) -> String {
        let type = contentType.lowercased().trimmingCharacters(in: .whitespaces)
        let binary = { "__wb_post_data=" + body.base64EncodedString() }
        if type.hasPrefix("application/x-www-form-urlencoded") {
            guard let text = String(data: body, encoding: .utf8) else { return binary() }
            return text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? text
        }
        if type.hasPrefix("application/json") || type.hasPrefix("text/plain") {
            guard let document = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) else {
                return type.hasPrefix("text/plain") ? binary() : ""
            }
            var pairs: [(String, String)] = []
            var seen: [String: Int] = [:]
            func key(_ name: String) -> String {
                guard let count = seen[name] else {
                    seen[name] = 1
                    return name
                }
                seen[name] = count + 1
                return name + "." + String(count + 1) + "_"
            }
            func walk(_ value: Any, _ name: String) {
                switch value {
                case let object as [String: Any]:
                    for (member, child) in object.sorted(by: { $0.key < $1.key }) { walk(child, member) }
                case let array as [Any]:
                    for child in array { walk(child, name) }
                default:
                    guard !name.isEmpty else { return }
                    pairs.append((key(name), leaf(value)))
                }
            }
            walk(document, "")
            return pairs.map { formEncoded($0.0) + "=" + formEncoded($0.1) }.joined(separator: "&")
        }
        return binary()
    }

    /// A JSON leaf as pywb writes it: `true`, `false`, `null`, a whole number without its fraction.
    static func leaf(_ value: Any) -> String {
        if value is NSNull { return "null" }
        if let number = value as? NSNumber {
            // JSONSerialization gives a boolean as a number of type `c` (CChar), which JSON has no other use for.
            if String(cString: number.objCType) == "c" { return number.boolValue ? "true" : "false" }
            let double = number.doubleValue
            if double.rounded() == double, abs(double) < 1e18 { return String(Int64(double)) }
            return String(double)
        }
        return "\(value)"
    }

    /// `text` as a form encodes it (Python's `quote_plus`): letters, digits and `_.-~` as they are, a space as `+`.
    static func formEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "):
                out += "+"
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                out.unicodeScalars.append(contentsOf: ["%", hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            }
        }
        return out
    }

    /// A URL as a SURT, the sort key of CDX indexes, as pywb keys it: the host's labels reversed and comma-separated (a
    /// leading `www` left out, a port other than the scheme's kept), `)`, then the path (without a trailing slash, but
    /// the root's) and the query, its parameters sorted; all in lower case.
    static func surt(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url.lowercased() }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        let rest = url[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        var authority = rest[..<authorityEnd].lowercased()
        if let at = authority.lastIndex(of: "@") { authority = String(authority[authority.index(after: at)...]) }
        var port = ""
        if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]") {
            let number = String(authority[authority.index(after: colon)...])
            if !((scheme == "http" && number == "80") || (scheme == "https" && number == "443")) { port = ":" + number }
            authority = String(authority[..<colon])
        }
        var labels = authority.split(separator: ".").map(String.init)
        if labels.count > 2, labels.first?.hasPrefix("www") == true, labels.first?.dropFirst(3).allSatisfy(\.isNumber) == true { labels.removeFirst() }
        var tail = String(rest[authorityEnd...].prefix { $0 != "#" })
        if tail.isEmpty || tail.hasPrefix("?") { tail = "/" + tail }
        var path = String(tail[..<(tail.firstIndex(of: "?") ?? tail.endIndex)])
        // As the surt library (and so pywb) keys a URL: a path's trailing slash left out, the root's kept.
        if path.count > 1, path.hasSuffix("/") { path.removeLast() }
        tail = path
        if let question = url.firstIndex(of: "?") {
            let query = url[url.index(after: question)...].prefix { $0 != "#" }.split(separator: "&").map(String.init).sorted()
            if !query.isEmpty { tail += "?" + query.joined(separator: "&") }
        }
        return labels.reversed().joined(separator: ",") + port + ")" + tail.lowercased()
    }

    /// The media type as CDX indexes list it: its essence, `unk` when there is none.
    static func mime(_ contentType: String) -> String {
        let essence = MediaTypes.essence(of: contentType)
        return essence.isEmpty ? "unk" : essence
    }

    /// The 14-digit UTC time of a CDX line.
    static func timestamp(_ date: Date) -> String {
        WARCExporter.utcText(date, after: [nil, nil, nil, nil, nil, nil]) {
            String(format: "%04d%02d%02d%02d%02d%02d", $0.0, $0.1, $0.2, $0.3, $0.4, $0.5)
        }
    }

    static func isoDate(_ date: Date) -> String { WARCExporter.warcDate(date) }

    /// One line of JSON with sorted keys, as JSONSerialization writes it (``JSONValue/writeSortingKeys(to:)``: through
    /// JSONSerialization, the index's lines were a tenth of a WACZ export's time).
    static func jsonLine(_ object: [String: String]) -> String {
        var out: [UInt8] = []
        JSONValue.object(object.mapValues(JSONValue.string)).writeSortingKeys(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    static func recordKey(_ url: String) -> String { hexString(Array(SHA256.hash(data: Data(url.utf8)))) }
}
