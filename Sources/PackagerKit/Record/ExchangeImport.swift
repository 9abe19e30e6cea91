import Crypto
import Foundation
import OfflineBundle

/// One exchange a recording holds (a HAR entry; a WARC response record with its request record), as the recording's
/// reader found it: the request as sent and the answer with its body decoded (no Content-Encoding left on it).
struct ArchivedExchange {
    /// Where it stands in the recording, as reports name it: a HAR entry's number (from 1), a WARC record's offset.
    var number: Int
    var method: String
    var url: String
    /// The request's header fields, names lowercased.
    var requestHeaders: [(name: String, value: String)]
    var requestBody: Data?
    var status: Int
    /// The answer's header fields, names lowercased.
    var responseHeaders: [(name: String, value: String)]
    /// The answer's body, decoded; nil when it has none (204, a redirect without one), or when it is in ``bodyFile``.
    var body: Data?
    /// A file that holds the answer's body, decoded, instead of ``body`` (a large body spooled while a recording is read).
    var bodyFile: String?
    /// The SHA-256 of ``body`` (or of ``bodyFile``'s bytes), when the reader computed it from those very bytes.
    var bodySHA256: BodyDigest?
    /// When the recording says the request was sent.
    var started: Date?

    init(
        number: Int, method: String, url: String, requestHeaders: [(name: String, value: String)], requestBody: Data?, status: Int,
        responseHeaders: [(name: String, value: String)], body: Data?, bodyFile: String? = nil, started: Date?
    ) {
        (self.number, self.method, self.url, self.requestHeaders, self.requestBody) = (number, method, url, requestHeaders, requestBody)
        (self.status, self.responseHeaders, self.body, self.bodyFile, self.started) = (status, responseHeaders, body, bodyFile, started)
    }
}

/// The checks every recording's exchanges go through on their way to bundle entries, whatever recorded them (HAR,
/// WARC): what a bundle cannot hold is skipped with its reason, every secret rule of ``HARImporter`` applies, and two
/// exchanges a bundle's keys make one keep the later answer.
struct ExchangeImport {
    let rules: BundleRules
    let canonicalizer: RequestKeyCanonicalizer
    private(set) var imported = HARImporter.Imported(entries: [], skipped: [])
    /// Each request key taken, by the first 16 bytes of its SHA-256 (a key held as text cost a hundred bytes and more
    /// for every exchange of a large recording): the exchange's number and its entry's index. Beside the store's
    /// entries past 4 MiB (about 114,000 keys), when there is a store.
    private var byKey: DigestTable

    /// Where a request key was taken: the exchange's number, and its entry's index (32 bits each in the table).
    struct Taken {
        var entry: Int
        var index: Int

        var packed: UInt64 { UInt64(entry) << 32 | UInt64(index) }
    }

    /// A request key or a payload's name, as the first 16 bytes of its SHA-256.
    typealias KeyDigest = TableKey

    /// Where the entries go, when not into ``imported``'s array: a bundle's scratch store, bodies compressed as they come.
    let sink: RecordedEntries?
    /// How many entries were taken (a request taken twice counts once).
    var count: Int { byKey.count }

    /// How a report names an exchange by its ``ArchivedExchange/number``: `entry 3`, `the record at offset 1024`.
    let place: @Sendable (Int) -> String
    /// What recorded it, as the 304's reason says: `the HAR`, `the WARC`.
    let recording: String

    init(rules: BundleRules, recording: String, place: @escaping @Sendable (Int) -> String, sink: RecordedEntries? = nil) {
        self.sink = sink
        self.rules = rules
        self.recording = recording
        self.place = place
        canonicalizer = RequestKeyCanonicalizer(rules: rules, formQuery: true)
        byKey = DigestTable(folder: sink?.session.scratch.path)
    }

    /// The URL as reports show it: a token in its query as `[secret]`.
    static func shown(_ url: String) -> String { HARImporter.redactingSecretParameters(url) }

    /// How many skipped exchanges, and how many notes, are listed; past it they are counted.
    static let listLimit = 1_000

    mutating func skip(_ number: Int, _ url: String, _ reason: String) {
        guard imported.skipped.count < Self.listLimit else {
            imported.moreSkipped += 1
            return
        }
        imported.skipped.append((number, Self.shown(url), reason))
    }

    mutating func note(_ number: Int, _ url: String, _ text: String) {
        guard imported.notes.count < Self.listLimit else {
            imported.moreNotes += 1
            return
        }
        imported.notes.append((number, Self.shown(url), text))
    }

    /// Takes `exchange` as an entry, or skips it saying why.
    ///
    /// - Throws: ``PackagerError`` when the table of request keys cannot be kept in its scratch file.
    mutating func add(_ exchange: ArchivedExchange) throws {
        let (number, url, method, status) = (exchange.number, exchange.url, exchange.method, exchange.status)
        guard HTTPRules.isFetchableURL(url) else { return skip(number, url, "not an http or https URL") }
        if status == 101 { return skip(number, url, "a WebSocket session, which a bundle cannot hold") }
        guard (200...599).contains(status) else {
            return skip(
                number, url,
                status == 0 ? "no answer was recorded (status 0: the request failed or was blocked)" : "status \(status) is not a final HTTP status")
        }
        if status == 304 { return skip(number, url, "a 304 holds no content: \(recording) recorded a revalidation, not the answer") }
        guard method != "HEAD" else { return skip(number, url, "a HEAD is answered from its GET") }
        guard RequestQualifiers.isKeyMethod(method) else {
            return skip(number, url, "the method '\(method)' is not one a bundle's key can name (letters only)")
        }
        // A token in the query would be in the key (the index, the manifest, every report), unless --drop-query drops it.
        if let key = canonicalizer.canonicalize(url), case let names = HARImporter.secretParameters(inURL: String(RequestQualifiers.split(key: key).url)),
            !names.isEmpty
        {
            let listed = names.map { "'\($0)'" }.joined(separator: ", ")
            let flags = names.map { "--drop-query \($0)" }.joined(separator: " ")
            return skip(number, url, "its query carries a credential (\(listed)), which its key would hold (pass \(flags) to keep it without)")
        }
        // HTTP/2's pseudo-fields and what the client writes itself (Host, Content-Length, the connection's fields) are
        // not the request's to keep: recorded, Host would be a secret by name alone (``HARImporter/looksSecret(_:)``)
        // and leave every entry unverifiable.
        let sent = exchange.requestHeaders.filter { !$0.name.hasPrefix(":") && !HeaderPolicy.writtenBySender.contains($0.name.lowercased()) }
        let answered = exchange.responseHeaders.filter { !$0.name.hasPrefix(":") }
        if let body = exchange.requestBody, body.count > BundleRequest.maxBodySize {
            return skip(number, url, "the request body is \(body.count) bytes, over the \(BundleRequest.maxBodySize) bytes a bundle's readers match on")
        }
        if [301, 302, 303, 307, 308].contains(status), !answered.contains(where: { $0.name == "location" }) {
            return skip(number, url, "a redirect (\(status)) without a Location header: it leads nowhere")
        }
        var recorded: RecordedRequest
        switch Recorder.request(
            method: method, body: exchange.requestBody, sent: sent, vary: [], responseHeaders: answered, secret: HARImporter.looksSecret,
            scan: SecretScan([]))
        {
        case .success(let request): recorded = request
        case .failure(let problem): return skip(number, url, problem.message)
        }
        // A password or a client secret in the body: the digest alone (the key's b=) is kept.
        if let body = exchange.requestBody, let field = HARImporter.secretField(inBody: body) {
            recorded.bodySecret = true
            note(number, url, "its request body has a '\(field)' field: only the body's digest is kept (the key's b=), not the body")
        }
        guard let key = canonicalizer.canonicalize(url).map({ $0 + recorded.qualifiers(rules: rules, canonicalKey: $0).keySuffix }) else {
            return skip(number, url, "not a URL a bundle can hold")
        }
        // A redirect to a URL that carries a token (an OAuth code) would store it.
        if (300...399).contains(status), let location = answered.first(where: { $0.name == "location" }),
            let parameter = HARImporter.secretParameter(inText: location.value)
        {
            return skip(number, url, "its Location carries a credential ('\(parameter)'), which the bundle would hold")
        }
        // The body is decoded: no Content-Encoding describes it any more. A stored URL that carries a token (a Link to
        // the next page with its token) is left out.
        var headers = [(name: String, value: String)]()
        for header in Recorder.storedHeaders(answered, policy: .decoded, secrets: SecretScan([])) where header.name != "content-encoding" {
            if let parameter = HARImporter.secretParameter(inText: header.value) {
                note(number, url, "its '\(header.name)' header carries a credential ('\(parameter)'): not stored")
            } else {
                headers.append(header)
            }
        }
        // As the writer lays the headers out (FORMAT §4.5): a block past the bound would be refused, and the whole
        // bundle with it.
        let block = headers.reduce(0) { $0 + $1.name.utf8.count + 3 + RequestQualifiers.trimmedSpaces($1.value).utf8.count }
        guard block <= BundleFormat.maxHeaderBlockBytes else {
            return skip(
                number, url,
                "its stored headers (\(headers.count) line\(headers.count == 1 ? "" : "s")) take \(block) bytes, past the \(BundleFormat.maxHeaderBlockBytes) an entry may hold"
            )
        }
        let body = exchange.body ?? Data()
        let source: BundleWriter.BodySource? = exchange.bodyFile.map { .file($0) } ?? ((status == 204 || body.isEmpty && status != 200) ? nil : .data(body))
        var written = RecordedExchange(
            url: url, status: status, headers: headers, body: source,
            fetchedAt: exchange.started, originDate: answered.first { $0.name == "date" }.flatMap { HTTPDates.parse($0.value) })
        written.request = recorded
        written.bodySHA256 = exchange.bodySHA256
        // The same request twice in one recording (a page polled, reloaded): the later answer is kept.
        let digest = KeyDigest(key)
        let earlier: Taken?
        do {
            earlier = try byKey.value(for: digest).map(Taken.init)
        } catch {
            throw PackagerError(.io, "cannot keep the recording's request keys", cause: error)
        }
        if let earlier {
            let earlierURL = Self.shown(sink?.url(of: earlier.index) ?? imported.entries[earlier.index].url)
            skip(earlier.entry, earlierURL, "the same request as \(place(number)), whose answer is kept")
            imported.notes.removeAll { $0.entry == earlier.entry }
        }
        let taken: Taken
        if let sink {
            // Into the store, where an entry is not replaced: the earlier one is left out of the bundle instead.
            if let earlier { sink.supersede(earlier.index) }
            taken = Taken(entry: number, index: sink.add(written, ownsFile: false))
        } else if let earlier {
            imported.entries[earlier.index] = written
            taken = Taken(entry: number, index: earlier.index)
        } else {
            taken = Taken(entry: number, index: imported.entries.count)
            imported.entries.append(written)
        }
        do {
            guard taken.entry <= Int(UInt32.max), taken.index <= Int(UInt32.max) else {
                throw PackagerError(.invalidInput, "a recording of more than 4,294,967,295 exchanges")
            }
            try byKey.set(taken.packed, for: digest)
        } catch {
            throw PackagerError(.io, "cannot keep the recording's request keys", cause: error)
        }
    }

    /// What was taken, the skipped and the notes in the recording's order.
    func finished() -> HARImporter.Imported {
        var result = imported
        result.skipped.sort { $0.entry < $1.entry }
        result.notes.sort { $0.entry < $1.entry }
        return result
    }
}

extension ExchangeImport.Taken {
    init(_ packed: UInt64) { self.init(entry: Int(packed >> 32), index: Int(packed & 0xFFFF_FFFF)) }
}

extension TableKey {
    /// The first 16 bytes of the SHA-256 of `key`'s UTF-8.
    init(_ key: String) { self.init(sha256Of: Array(key.utf8)) }
}
