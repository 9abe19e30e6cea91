import Crypto
import Foundation
import OfflineBundle
import Synchronization

/// Web archives read into bundle entries: `packager pack --from-warc` of WARC files (plain or gzipped, 1.0 or 1.1) and
/// WACZ files (their `archive/` WARCs, once every file's SHA-256 matches its `datapackage.json`).
///
/// Each `response` record becomes an entry, with the method, headers and body of the `request` record that goes with
/// it (`WARC-Concurrent-To`, either way), or a GET when the archive holds none; a `revisit` record whose profile is
/// identical-payload-digest takes the body of the response it refers to (by `WARC-Refers-To`, or by its payload
/// digest). Bodies are taken as the server meant them: a chunked body is joined, and a gzip or deflate one inflated.
/// The same checks and secret rules as HAR import apply (``HARImporter``): a request header's value is kept only for
/// harmless names, a token in a query skips the record, a password in a body keeps the body's digest only.
///
/// What cannot be a bundle's answer is skipped and listed, with the record's offset: other record types than these
/// (`resource`, `metadata`, `conversion`…), a revisit of a payload the archive does not hold or of a 304
/// (server-not-modified), a body in an encoding not inflated here (`br`), and everything HAR import skips. A damaged
/// archive (a gzip member cut short, a record whose `Content-Length` lies, a block digest that does not match, a WACZ
/// whose files do not match their digests) is refused whole, naming the record's offset or the file; nothing is written.
public enum WARCImporter {
    /// What the archives gave: the entries, and what was skipped or kept with less, each with its place in the archive
    /// (`the record at offset 1024 of crawl.warc.gz`).
    public struct Imported: Sendable {
        /// The entries, when read into memory (``read(_:rules:)``); empty when they went to a bundle's scratch store.
        public var entries: [RecordedExchange]
        /// How many entries were taken (a request recorded twice counts once).
        public var count: Int
        public var skipped: [(place: String, url: String, reason: String)]
        public var notes: [(place: String, url: String, note: String)]
        /// Records left out, and kept with less, past the first 1,000 of each that ``skipped`` and ``notes`` list (an
        /// archive of a million resource records is counted, not held line by line).
        public var moreSkipped = 0
        public var moreNotes = 0
        /// Records read, of every type.
        public var records: Int
        /// The fingerprints of the keys that signed the WACZ packages read (``WACZExporter`` signatures, each checked).
        public var signers: [String] = []
        /// Where the larger bodies wait, as files, until the bundle is written.
        let spool: ScratchFolder?

        /// Removes the files the entries' larger bodies were spooled to: once the bundle is written (or not).
        public func removeSpool() { spool?.remove() }
    }

    /// Reads the WARC and WACZ files at `paths`, in order (a later answer to the same request is kept), for a bundle
    /// with `rules`.
    ///
    /// Bodies of 16 KiB and more wait in files of a scratch folder until the bundle is written: call
    /// ``Imported/removeSpool()`` once it is (or once it will not be).
    ///
    /// - Throws: ``PackagerError`` naming the file and the record's offset, or the WACZ's file, when one is damaged.
    public static func read(_ paths: [String], rules: BundleRules) throws -> Imported {
        try read(paths, rules: rules, into: nil)
    }

    /// Reads the WARC and WACZ files at `paths` into `entries`, their bodies compressed while the files are read: what
    /// `packager pack --from-warc` does, in bounded memory whatever the archives' size. The result's ``Imported/entries``
    /// is empty.
    ///
    /// - Parameter publicKey: the Ed25519 key every archive must be signed by: each must be a WACZ whose
    ///   `datapackage-digest.json` that key signed (``WACZExporter/signatureField``).
    package static func read(_ paths: [String], rules: BundleRules, into entries: RecordedEntries?, publicKey: [UInt8]? = nil) throws -> Imported {
        // Beside the output, with the store, when there is one: the larger bodies wait on the file system the bundle goes to.
        let spool = try Spool(inMemory: entries == nil, in: entries?.session.scratch.path ?? NSTemporaryDirectory())
        let box = PlaceList(folder: spool.folder.path)
        var exchanges = ExchangeImport(rules: rules, recording: "the WARC", place: { box.place($0) }, sink: entries)
        var records = 0
        var signers: [String] = []
        do {
            for path in paths {
                if path.lowercased().hasSuffix(".wacz") {
                    let scratch = try ScratchFolder(in: NSTemporaryDirectory())
                    spool.keep(unpacked: scratch)
                    let package = try unpackWACZ(path, into: scratch.path, publicKey: publicKey)
                    if let signer = package.signer { signers.append(signer) }
                    for warc in package.warcs {
                        records += try read(warc.path, shownAs: "\(path) (\(warc.name))", into: &exchanges, box: box, spool: spool)
                    }
                } else {
                    if publicKey != nil {
                        throw PackagerError(
                            .invalidInput,
                            "\(path): a WARC file carries no signature (--public-key checks a WACZ's, which export --format wacz --sign-key writes)")
                    }
                    records += try read(path, shownAs: path, into: &exchanges, box: box, spool: spool)
                }
            }
        } catch {
            spool.remove(spooled: true)
            throw error
        }
        spool.remove(spooled: false)
        let count = exchanges.count
        let done = exchanges.finished()
        return Imported(
            entries: done.entries, count: count, skipped: done.skipped.map { (box.place($0.entry), $0.url, $0.reason) },
            notes: done.notes.map { (box.place($0.entry), $0.url, $0.note) }, moreSkipped: done.moreSkipped, moreNotes: done.moreNotes, records: records,
            signers: signers, spool: spool.folder)
    }

    /// How many responses wait for their request record, and requests for their response, before the oldest is taken
    /// alone (a response as a GET) or let go (a request).
    static let pairingWindow = 256

    /// A record's HTTP message: the start line's words, the header fields (names lowercased) and the body as stored.
    struct HTTPMessage: Sendable {
        var startLine: [Substring]
        var headers: [(name: String, value: String)]
        var body: Data
    }

    /// One WARC file's records into `exchanges`, each response as soon as its request is read (they are neighbours in
    /// the files tools write, in either order), so that memory holds the records still waiting for their pair, not the
    /// archive; the number of records read.
    static func read(_ path: String, shownAs shown: String, into exchanges: inout ExchangeImport, box: PlaceList, spool: Spool) throws -> Int {
        let reader = WARCRecordStream(path: path)
        defer { reader.stop() }
        let warc = spool.warc(path, shownAs: shown)
        // Requests read before their response, by their ID (and by the response they name); responses read before their
        // request, by theirs (and by the request they name).
        // Records waiting for the other half of their exchange, by record ID, each with the ID it names in
        // WARC-Concurrent-To; and the IDs the other half will name. Both are bounded: an archive whose requests never
        // get a response (failed fetches), or whose responses have no request, holds a window of them, not all.
        var requests: [String: (record: WARCReader.Record, other: String?)] = [:]
        var requestOrder: [String] = []
        var requestFor: [String: String] = [:]
        var waiting: [String: (record: WARCReader.Record, other: String?)] = [:]
        var waitingFor: [String: String] = [:]
        var waitingOrder: [String] = []
        var count = 0
        func take(_ record: WARCReader.Record, request: WARCReader.Record?) throws {
            try response(record, request: request, shown: shown, warc: warc, into: &exchanges, box: box, spool: spool)
        }
        func takeRequest(_ id: String) -> WARCReader.Record? {
            guard let held = requests.removeValue(forKey: id) else { return nil }
            if let other = held.other { requestFor[other] = nil }
            return held.record
        }
        func takeWaiting(_ id: String) -> WARCReader.Record? {
            guard let held = waiting.removeValue(forKey: id) else { return nil }
            if let other = held.other { waitingFor[other] = nil }
            return held.record
        }
        while let record = try reader.next() {
            count += 1
            let id = record.fields["warc-record-id"] ?? "offset \(record.offset)"
            let other = record.fields["warc-concurrent-to"]
            switch record.type {
            case "response", "revisit":
                if let requestID = requestFor[id] ?? other.flatMap({ requests[$0] != nil ? $0 : nil }), let request = takeRequest(requestID) {
                    try take(record, request: request)
                } else {
                    waiting[id] = (record, other)
                    waitingOrder.append(id)
                    if let other { waitingFor[other] = id }
                    // An archive without request records (some crawlers write none) would hold every response here:
                    // past 256 waiting, the oldest is taken as a GET (its request, if any, is not its neighbour).
                    if waiting.count > Self.pairingWindow, let oldest = waitingOrder.first {
                        waitingOrder.removeFirst()
                        if let alone = takeWaiting(oldest) { try take(alone, request: nil) }
                    }
                }
            case "request":
                if let responseID = other.flatMap({ waiting[$0] != nil ? $0 : nil }) ?? waitingFor[id], let response = takeWaiting(responseID) {
                    waitingOrder.removeAll { $0 == responseID }
                    try take(response, request: record)
                } else {
                    requests[id] = (record, other)
                    requestOrder.append(id)
                    if let other { requestFor[other] = id }
                    // A request whose response never comes (a failed fetch) is let go past 256 waiting: a response that
                    // comes after that many others is taken as a GET.
                    if requests.count > Self.pairingWindow {
                        while let oldest = requestOrder.first, takeRequest(oldest) == nil { requestOrder.removeFirst() }
                        if !requestOrder.isEmpty { requestOrder.removeFirst() }
                    }
                    // The IDs of requests already paired are dropped from the order now and then, not one by one.
                    if requestOrder.count > 4 * Self.pairingWindow { requestOrder.removeAll { requests[$0] == nil } }
                }
            case "warcinfo", "metadata":
                continue
            default:
                let number = try box.add(offset: record.offset, of: shown)
                exchanges.skip(number, record.fields["warc-target-uri"] ?? "-", "a '\(record.type)' record holds no HTTP exchange a bundle can answer with")
            }
        }
        // Responses whose request the archive does not hold: GETs.
        for id in waitingOrder { if let alone = takeWaiting(id) { try take(alone, request: nil) } }
        return count
    }

    /// One response or revisit record, with the request record that went with it, into `exchanges`.
    static func response(
        _ record: WARCReader.Record, request: WARCReader.Record?, shown: String, warc: Int, into exchanges: inout ExchangeImport, box: PlaceList,
        spool: Spool
    ) throws {
        let number = try box.add(offset: record.offset, of: shown)
        let url = Self.targetURI(record.fields["warc-target-uri"] ?? "")
        guard !url.isEmpty else { return exchanges.skip(number, "-", "it names no WARC-Target-URI") }
        let message: HTTPMessage
        switch record.message ?? Result(catching: { try http(record.block) }).mapError({ $0 as? Unreadable ?? Unreadable(reason: "\($0)") }) {
        case .success(let parsed): message = parsed
        case .failure(let problem): return exchanges.skip(number, url, problem.reason)
        }
        guard message.startLine.count >= 2, message.startLine[0].hasPrefix("HTTP/"), let status = Int(message.startLine[1]) else {
            return exchanges.skip(number, url, "its block is not an HTTP response (\(message.startLine.prefix(3).joined(separator: " ").prefix(40)))")
        }
        let body: Spool.BodyPlace
        var bodySHA256: BodyDigest?
        if record.type == "revisit" {
            let profile = record.fields["warc-profile"] ?? ""
            guard profile.hasSuffix("/identical-payload-digest") else {
                return exchanges.skip(number, url, "a revisit whose profile is '\(profile)': it says the server answered 304, and holds no content")
            }
            guard
                let referred = try record.fields["warc-refers-to"].flatMap({ try spool.payload($0) })
                    ?? record.fields["warc-payload-digest"].flatMap({ try spool.payload($0) })
            else {
                return exchanges.skip(number, url, "a revisit of a payload this archive does not hold (it must come after the response it refers to)")
            }
            body = referred
        } else {
            if let digest = record.fields["warc-payload-digest"], record.payloadMatches ?? Self.payload(of: message, matches: digest) == false {
                throw PackagerError(
                    .invalidInput, "\(shown): the record at offset \(record.offset) does not match its WARC-Payload-Digest (\(digest)): its payload is damaged")
            }
            do {
                let (payload, asStored) = try decodedTelling(message)
                body = try spool.keep(payload)
                if asStored { bodySHA256 = record.payloadSHA256 }
            } catch let problem as Unreadable {
                return exchanges.skip(number, url, problem.reason)
            }
            try spool.remember(body, of: record, in: warc)
        }
        var method = "GET"
        var requestHeaders: [(name: String, value: String)] = []
        var requestBody: Data?
        if let request, let sent = try? (request.message?.get() ?? http(request.block)), let verb = sent.startLine.first {
            method = verb.uppercased()
            requestHeaders = sent.headers
            let sentBody = (try? decoded(sent)) ?? sent.body
            requestBody = sentBody.isEmpty && !["POST", "PUT", "PATCH"].contains(method) ? nil : sentBody
        }
        var exchange = ArchivedExchange(
            number: number, method: method, url: url, requestHeaders: requestHeaders, requestBody: requestBody, status: status,
            responseHeaders: message.headers.filter { $0.name != "transfer-encoding" && $0.name != "content-length" }, body: nil,
            started: record.fields["warc-date"].flatMap { HTTPDates.parseRFC3339($0) })
        exchange.bodySHA256 = bodySHA256
        switch body {
        case .memory(let data): exchange.body = data
        case .file(let file): exchange.bodyFile = file
        }
        try exchanges.add(exchange)
    }

    /// Whether `message`'s payload, as stored or dechunked, is the one `digest` names; nil for a digest not known here.
    static func payload(of message: HTTPMessage, matches digest: String) -> Bool? {
        var sha256: BodyDigest?
        return payload(of: message, matches: digest, sha256: &sha256)
    }

    /// ``payload(of:matches:)``, and the payload's SHA-256 as stored in `sha256` when `digest` is a SHA-256 that matches it.
    static func payload(of message: HTTPMessage, matches digest: String, sha256: inout BodyDigest?) -> Bool? {
        let stored = WARCReader.digest(digest, matches: message.body, sha256: &sha256)
        guard stored == false else { return stored }
        return WARCReader.digest(digest, matches: (try? dechunked(message.body)) ?? Data()) == true
    }

    /// WARC 1.0 wrote the target URI in angle brackets; 1.1 does not.
    static func targetURI(_ text: String) -> String {
        text.hasPrefix("<") && text.hasSuffix(">") ? String(text.dropFirst().dropLast()) : text
    }

    /// A record whose HTTP message cannot be read as a bundle's answer: skipped, for this reason.
    struct Unreadable: Error, Sendable { var reason: String }

    /// The HTTP message a `request`, `response` or `revisit` block holds.
    static func http(_ block: Data) throws -> HTTPMessage {
        let crlf = WARCLines.blankLine(in: block, from: block.startIndex, count: block.count)
        let separator =
            crlf.map { (block.startIndex + $0)..<(block.startIndex + $0 + 4) } ?? block.range(of: Data("\n\n".utf8))
        let headEnd = separator?.lowerBound ?? block.endIndex
        let head = try WARCLines.head(block, from: block.startIndex, count: headEnd - block.startIndex, strict: false)
        guard !head.startLine.isEmpty else { throw Unreadable(reason: "its block holds no HTTP message") }
        let startLine = head.startLine.split(separator: " ", maxSplits: 2)
        let body = separator.map { Data(block[$0.upperBound...]) } ?? Data()
        return HTTPMessage(startLine: startLine, headers: head.fields, body: body)
    }

    /// The body as the server meant it: chunks joined, and inflated when it was sent gzip or deflate.
    static func decoded(_ message: HTTPMessage) throws -> Data { try decodedTelling(message).body }

    /// ``decoded(_:)``, and whether that is the body as stored (neither dechunked nor inflated).
    static func decodedTelling(_ message: HTTPMessage) throws -> (body: Data, asStored: Bool) {
        var body = message.body
        var asStored = true
        if message.headers.contains(where: { $0.name == "transfer-encoding" && $0.value.lowercased().contains("chunked") }) {
            body = try dechunked(body)
            asStored = false
        }
        guard let coding = message.headers.first(where: { $0.name == "content-encoding" })?.value.lowercased(), coding != "identity", !body.isEmpty else {
            return (body, asStored)
        }
        guard ["gzip", "x-gzip", "deflate"].contains(coding) else {
            throw Unreadable(reason: "its body is sent with Content-Encoding '\(coding)', which is not inflated here (gzip and deflate are)")
        }
        guard let inflated = ContentDecoding.decode(Array(body), encoding: coding, limit: Int(UInt32.max)) else {
            throw Unreadable(reason: "its body does not inflate as its Content-Encoding '\(coding)' says")
        }
        return (Data(inflated), false)
    }

    /// A chunked body's chunks joined (RFC 9112 §7.1); trailers are dropped.
    static func dechunked(_ body: Data) throws -> Data {
        var result = Data()
        var index = body.startIndex
        while index < body.endIndex {
            guard let lineEnd = body[index...].range(of: Data("\r\n".utf8)) else { throw Unreadable(reason: "its chunked body is cut short") }
            let sizeText = String(decoding: body[index..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else {
                throw Unreadable(reason: "its chunked body has a chunk size that is not hexadecimal")
            }
            index = lineEnd.upperBound
            if size == 0 { break }
            guard body.endIndex - index >= size else { throw Unreadable(reason: "its chunked body is cut short") }
            result.append(body[index..<(index + size)])
            index += size
            if body[index...].starts(with: Data("\r\n".utf8)) { index += 2 }
        }
        return result
    }

    /// The WARC files of the WACZ at `path`, written into `folder`, once every file of the package matches the SHA-256
    /// its `datapackage.json` records.
    static func unpackWACZ(_ path: String, into folder: String, publicKey: [UInt8]?) throws -> (warcs: [(name: String, path: String)], signer: String?) {
        let reader = try LibArchive.Reader(path: path)
        var digests: [String: String] = [:]
        var datapackage: Data?
        var packageDigest: Data?
        var warcs: [(name: String, path: String)] = []
        while let header = try reader.next() {
            guard header.type == .file else { continue }
            var hash = SHA256()
            let isWARC = header.path.hasPrefix("archive/") && (header.path.hasSuffix(".warc") || header.path.hasSuffix(".warc.gz"))
            var file: FileHandle?
            var kept = Data()
            if isWARC {
                let target = folder + "/\(warcs.count)-" + (header.path as NSString).lastPathComponent
                guard FileManager.default.createFile(atPath: target, contents: nil) else { throw PackagerError(.io, "cannot write \(target)") }
                file = FileHandle(forWritingAtPath: target)
                warcs.append((header.path, target))
            }
            try reader.readData { bytes in
                hash.update(bufferPointer: bytes)
                if let file {
                    file.write(Data(bytes))
                } else if header.path == "datapackage.json" || header.path == "datapackage-digest.json" {
                    kept.append(contentsOf: bytes)
                }
            }
            if header.path == "datapackage-digest.json" { packageDigest = kept }
            try file?.close()
            if header.path == "datapackage.json" { datapackage = kept }
            digests[header.path] = hash.finalize().map { String(format: "%02x", $0) }.joined()
        }
        guard let datapackage, let package = try? JSONSerialization.jsonObject(with: datapackage) as? [String: Any],
            let resources = package["resources"] as? [[String: Any]]
        else {
            throw PackagerError(.invalidInput, "\(path): not a WACZ: it has no datapackage.json listing its resources")
        }
        // Every WARC read is one the package lists with its digest: an unlisted one would escape the check.
        let listed = Set(resources.compactMap { $0["hash"] is String ? $0["path"] as? String : nil })
        if let unlisted = warcs.first(where: { !listed.contains($0.name) }) {
            throw PackagerError(.invalidInput, "\(path): \(unlisted.name) is not listed with its digest in datapackage.json: it cannot be checked")
        }
        for resource in resources {
            guard let name = resource["path"] as? String, let hash = resource["hash"] as? String else { continue }
            guard let actual = digests[name] else { throw PackagerError(.invalidInput, "\(path): \(name), listed in datapackage.json, is not in the package") }
            let expected = hash.lowercased().hasPrefix("sha256:") ? String(hash.dropFirst(7)).lowercased() : nil
            if let expected, expected != actual {
                throw PackagerError(.invalidInput, "\(path): \(name) does not match the SHA-256 datapackage.json records for it: the package is damaged")
            }
        }
        guard !warcs.isEmpty else { throw PackagerError(.invalidInput, "\(path): the WACZ holds no WARC under archive/") }
        let signer = try checkSignature(of: path, digest: packageDigest, datapackageSHA256: digests["datapackage.json"] ?? "", publicKey: publicKey)
        return (warcs, signer)
    }

    /// Checks `datapackage-digest.json` (`digest`): its hash is datapackage.json's, and its signature
    /// (``WACZExporter/signatureField``), when it has one, is good; `publicKey`, when given, must be the key that made it.
    /// The signer's fingerprint; nil when the package is not signed.
    static func checkSignature(of path: String, digest: Data?, datapackageSHA256: String, publicKey: [UInt8]?) throws -> String? {
        let object = digest.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
        if digest != nil, object == nil {
            throw PackagerError(.invalidInput, "\(path): datapackage-digest.json is not a JSON object: the package is damaged")
        }
        if let object {
            guard let hash = object["hash"] as? String, hash.lowercased() == "sha256:" + datapackageSHA256 else {
                throw PackagerError(.invalidInput, "\(path): datapackage-digest.json does not hold datapackage.json's SHA-256: the package is damaged")
            }
        }
        guard let signature = object?[WACZExporter.signatureField] as? [String: Any], let hash = object?["hash"] as? String else {
            if publicKey != nil {
                throw PackagerError(
                    .invalidInput, "\(path): the WACZ is not signed (export --format wacz --sign-key signs one), and --public-key asks for a signature")
            }
            return nil
        }
        guard signature["algorithm"] as? String == "ed25519", let keyText = signature["publicKey"] as? String, let key = Data(base64Encoded: keyText),
            let signed = (signature["signature"] as? String).flatMap({ Data(base64Encoded: $0) }),
            let verifier = try? Curve25519.Signing.PublicKey(rawRepresentation: key)
        else {
            throw PackagerError(.invalidInput, "\(path): its signature in datapackage-digest.json is not an Ed25519 key and signature in base64")
        }
        guard verifier.isValidSignature(signed, for: Data(hash.utf8)) else {
            throw PackagerError(
                .invalidInput, "\(path): its signature does not match datapackage-digest.json's hash: the package was changed after it was signed")
        }
        let fingerprint = BundlePublicKey.fingerprint(of: Array(key))
        if let publicKey, publicKey != Array(key) {
            throw PackagerError(
                .invalidInput, "\(path): signed by \(fingerprint), not by the key given (\(BundlePublicKey.fingerprint(of: publicKey)))")
        }
        return fingerprint
    }
}
