import Foundation
import OfflineBundle

/// HAR 1.2 (what browsers' developer tools, Playwright, mitmproxy and Charles record) read into bundle entries:
/// `packager pack --from-har`.
///
/// Each entry's request becomes its key (method, URL, body digest, and the headers its response's `Vary` names or a
/// credential: docs/FORMAT.md §5.4), its response the answer, keeping only the headers a crawl keeps.
///
/// A recording holds whatever the browser sent, so every secret rule of a declaration applies, and more widely:
/// - a request header's value is kept only for the harmless names of ``harmlessRequestHeaders``; any other is
///   recorded by its name alone, and an answer that varies on one (its value would be the key) is skipped;
/// - a URL whose query names a token (``isSecretParameter(_:)``: `access_token`, `code`, `sig`, …) is skipped, unless
///   `--drop-query` drops that parameter from keys; the report shows it with `[secret]` for the value;
/// - a stored response header (`Link`, `Location`, `Content-Location`, …) whose URL carries such a parameter is not
///   stored (a redirect whose `Location` does is skipped);
/// - a request body with such a field (form, JSON or multipart: `password`, `client_secret`, …) is kept as its digest
///   only (``RecordedRequest/bodySecret``), and said in ``Imported/notes``.
///
/// What the format cannot hold is skipped, each named with its entry number: WebSocket sessions, URLs that are not
/// http or https, requests that got no answer (status 0), 304s, bodies the HAR did not record or records in an
/// encoding other than base64, redirects without a Location, and answers whose headers would take more than
/// ``BundleFormat/maxHeaderBlockBytes``. Damaged input (not JSON, an entry without its request, response, method or
/// URL, a field of the wrong type, bad base64) refuses the whole file.
public enum HARImporter {
    /// What a HAR file gave.
    public struct Imported: Sendable {
        public var entries: [RecordedExchange]
        /// Entries left out: their number in `log.entries` (from 1), URL (a token in its query shown `[secret]`) and why.
        public var skipped: [(entry: Int, url: String, reason: String)]
        /// Entries kept with less than the HAR holds (a request body kept as its digest, a header not stored): their
        /// number, URL and what was left out.
        public var notes: [(entry: Int, url: String, note: String)] = []
        /// Entries left out, and kept with less, past the first 1,000 of each that ``skipped`` and ``notes`` list: a
        /// recording of a million entries the import cannot take is counted, not held line by line.
        public var moreSkipped = 0
        public var moreNotes = 0
    }

    /// Reads the HAR file at `path`.
    ///
    /// - Throws: ``PackagerError`` naming the file (and the entry) when it is not HAR, or an entry is damaged.
    ///
    /// - Parameter dropQueryParameters: the bundle's `drop-query` patterns, so that two requests its keys make one are
    ///   found the same (the later answer is kept).
    public static func read(_ path: String, dropQueryParameters: [String] = []) throws -> Imported {
        try read(path, rules: BundleRules(dropQueryParameters: dropQueryParameters))
    }

    /// Reads the HAR file at `path` for a bundle with `rules`: its `drop-query` patterns and `match` rules (bodies in
    /// their canonical form, ignored query parameters) make the keys, so that two requests the bundle would answer
    /// alike are found the same (the later answer is kept).
    public static func read(_ path: String, rules: BundleRules) throws -> Imported {
        guard let data = FileManager.default.contents(atPath: path) else { throw PackagerError(.io, "cannot read the HAR file", subject: path) }
        return try read(data, name: path, rules: rules)
    }

    /// Request headers whose values say what the client wants, or what it is, and never who its user is: their values
    /// are kept, and a key may hold them. (`Referer` is not among them: a page's URL may carry a token.)
    static let harmlessRequestHeaders: Set<String> = [
        "accept", "accept-language", "accept-encoding", "accept-charset", "content-type", "content-language", "user-agent", "cache-control",
        "pragma", "origin", "dnt", "upgrade-insecure-requests", "x-requested-with", "priority", "save-data", "sec-gpc", "sec-fetch-dest",
        "sec-fetch-mode", "sec-fetch-site", "sec-fetch-user", "sec-purpose", "purpose", "sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform",
        "sec-ch-prefers-color-scheme", "sec-ch-prefers-reduced-motion", "viewport-width", "width", "dpr", "device-memory", "rtt", "downlink",
        "ect", "if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range",
    ]

    /// Whether a recorded request header's value is a secret: any but ``harmlessRequestHeaders`` (a recording holds
    /// whatever custom credential an application sends: `X-Auth`, `Authentication`, `Ocp-Apim-Subscription-Key`).
    /// Such a value is never stored, and an answer that varies on one is left out.
    static func looksSecret(_ name: String) -> Bool { !harmlessRequestHeaders.contains(name) }

    /// Whether a query parameter or body field of this name (compared without case) carries a credential: OAuth's
    /// `access_token`, `refresh_token`, `id_token` and `code`, signed URLs' `sig`, `signature`, `X-Amz-Signature`,
    /// `X-Amz-Credential`, `X-Goog-Signature`, keys (`key`, `api_key`, `apikey`), passwords, sessions, and any name
    /// holding `token`, `secret`, `password`, `passwd`, `signature` or `credential`.
    static func isSecretParameter(_ name: String) -> Bool {
        let name = name.lowercased()
        let exact: Set<String> = [
            "code", "sig", "key", "api_key", "apikey", "api-key", "pass", "pwd", "auth", "jwt", "session", "sessionid", "session_id", "sid", "otp",
            "x-amz-security-token", "x-amz-signature", "x-amz-credential", "x-goog-signature", "x-goog-credential",
        ]
        if exact.contains(name) { return true }
        return ["token", "secret", "password", "passwd", "signature", "credential"].contains { name.contains($0) }
    }

    /// HAR 1.2's fields that a bundle takes, each optional: a recording from any tool decodes, and what is missing is
    /// judged entry by entry. (Read by ``fastFile(_:)``; with Codable where it does not take the document.)
    struct File: Decodable {
        struct Log: Decodable { var entries: [Entry]? }
        var log: Log?
    }

    struct Pair: Decodable {
        var name: String?
        var value: String?
    }

    /// Any JSON value, not read: what matters is that it is there.
    struct Present: Decodable {
        init() {}
        init(from decoder: any Decoder) throws {}
    }

    struct Entry: Decodable {
        struct Request: Decodable {
            struct PostData: Decodable {
                var text: String?
                var params: [Pair]?
                /// Not HAR 1.2's: packager writes `base64` for a body that is not UTF-8.
                var encoding: String?
            }
            var method: String?
            var url: String?
            var headers: [Pair]?
            var postData: PostData?
            /// The body's length, when the tool knew it (-1 or absent otherwise); a number, whole or not.
            var bodySize: Double?
            /// packager's export: the body held a secret, and the bundle kept only its digest.
            var _bodySecret: Bool?
        }
        struct Response: Decodable {
            struct Content: Decodable {
                var size: Int?
                var text: String?
                var encoding: String?
            }
            var status: Int?
            var headers: [Pair]?
            var content: Content?
            /// HAR 1.2's redirect target, which some tools fill in without a Location header.
            var redirectURL: String?
        }
        var request: Request?
        var response: Response?
        var startedDateTime: String?
        var _webSocketMessages: [Present]?
        var _resourceType: String?
    }

    static func read(_ data: Data, name: String, rules: BundleRules = BundleRules()) throws -> Imported {
        func fail(_ message: String) -> PackagerError { PackagerError(.invalidInput, "\(name): \(message)") }
        let file: File
        do {
            file = try fastFile(data) ?? JSONDecoder().decode(File.self, from: data)
        } catch let misplaced as Misplaced {
            throw fail(Self.misplaced(misplaced.path, expected: misplaced.expected))
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            throw fail("not a HAR file: it is not JSON (\(context.debugDescription))")
        } catch DecodingError.typeMismatch(let type, let context) {
            throw fail(Self.misplaced(context.codingPath, expected: Self.kind(of: type)))
        } catch DecodingError.dataCorrupted(let context) {
            throw fail(Self.misplaced(context.codingPath, expected: nil))
        } catch {
            throw fail("not a HAR file: \(error)")
        }
        guard let list = file.log?.entries else { throw fail("not a HAR file: it has no log.entries") }
        var exchanges = ExchangeImport(rules: rules, recording: "the HAR", place: { "entry \($0)" })
        // For what the fast reading does not take (a time without seconds, say).
        let dates = ISO8601DateFormatter()
        for (offset, entry) in list.enumerated() {
            let number = offset + 1
            func entryFail(_ message: String) -> PackagerError { fail("entry \(number) of log.entries: \(message)") }
            guard let request = entry.request else { throw entryFail("request is missing") }
            guard let response = entry.response else { throw entryFail("response is missing") }
            guard let url = request.url, !url.isEmpty else { throw entryFail("request.url is missing") }
            guard let method = request.method?.uppercased(), !method.isEmpty else { throw entryFail("request.method is missing") }
            func skip(_ reason: String) { exchanges.skip(number, url, reason) }
            let status = response.status ?? 0
            guard HTTPRules.isFetchableURL(url) else {
                skip("not an http or https URL")
                continue
            }
            if entry._webSocketMessages != nil || entry._resourceType == "websocket" {
                skip("a WebSocket session, which a bundle cannot hold")
                continue
            }
            var answered = pairs(response.headers)
            if (300...399).contains(status), !answered.contains(where: { $0.name == "location" }), let target = response.redirectURL, !target.isEmpty {
                answered.append(("location", target))
            }
            // The request body: postData.text (as sent); a form given only as params is rebuilt as the form encoding.
            var requestBody: Data?
            do {
                requestBody = try Self.decoded(request.postData?.text, encoding: request.postData?.encoding, field: "request.postData", fail: entryFail)
            } catch let unread as Unreadable {
                skip(unread.reason)
                continue
            }
            if requestBody == nil, let params = request.postData?.params, !params.isEmpty {
                requestBody = Data(params.map { "\(formEncoded($0.name ?? ""))=\(formEncoded($0.value ?? ""))" }.joined(separator: "&").utf8)
            }
            // A body the recording left out (a tool that drops uploads, packager's export of a secret body): keyed
            // without it, the answer would go to requests without a body.
            if requestBody == nil, request._bodySecret == true || (request.bodySize ?? 0) > 0, (200...599).contains(status) {
                skip(
                    request._bodySecret == true
                        ? "its request body held a secret, which the HAR does not hold: its key cannot be made"
                        : "the HAR holds no request body for it (bodySize \(Int(request.bodySize ?? 0))): its key cannot be made")
                continue
            }
            // The response body, decoded as the HAR holds it (base64 when it says so). HAR 1.2 always records content;
            // without it, a body-less answer (204, a redirect) is still whole.
            let content = response.content
            if content == nil && (200...599).contains(status) && status != 204 && status != 304 && !(300...399).contains(status) {
                skip("the HAR holds no response.content for it: its body was not recorded")
                continue
            }
            let size = content?.size ?? 0
            var body: Data?
            do {
                body = try Self.decoded(content?.text, encoding: content?.encoding, field: "response.content", fail: entryFail)
            } catch let unread as Unreadable {
                skip(unread.reason)
                continue
            }
            if content?.text == nil && size > 0 && (200...599).contains(status) && status != 304 {
                skip("the HAR holds no body for it (content.size \(size)): the recording left it out")
                continue
            }
            try exchanges.add(
                ArchivedExchange(
                    number: number, method: method, url: url, requestHeaders: pairs(request.headers), requestBody: requestBody, status: status,
                    responseHeaders: answered, body: body, started: entry.startedDateTime.flatMap { HTTPDates.parseRFC3339($0) ?? dates.date(from: $0) }))
        }
        return exchanges.finished()
    }

    /// A body recorded in an encoding no body is read in: the entry is skipped, for this reason.
    struct Unreadable: Error { var reason: String }

    /// A body's `text` as the HAR's `field` (`request.postData`, `response.content`) holds it, decoded: base64 when its
    /// `encoding` says so, else the text's UTF-8 (HAR 1.2 names no other encoding); nil without text.
    ///
    /// - Throws: ``Unreadable`` for another encoding; `fail`'s error for base64 that does not decode.
    static func decoded(_ text: String?, encoding: String?, field: String, fail: (String) -> PackagerError) throws -> Data? {
        let lowered = encoding?.lowercased() ?? ""
        guard ["", "base64", "utf-8", "utf8"].contains(lowered) else {
            throw Unreadable(reason: "\(field).encoding '\(encoding ?? "")' is not one a body is read in (base64, or none)")
        }
        guard let text else { return nil }
        guard lowered == "base64" else { return Data(text.utf8) }
        guard let decoded = Data(base64Encoded: text, options: .ignoreUnknownCharacters) else { throw fail("\(field).text is not valid base64") }
        return decoded
    }

    /// Where a decoding error is, as a person finds it in the file (`entry 2 of log.entries: response.status`, entries
    /// counted from 1 as the skipped ones are), and what HAR 1.2 puts there when that is known.
    static func misplaced(_ path: [any CodingKey], expected: String?) -> String {
        var rest = path[...]
        var place = ""
        if rest.count >= 3, rest[rest.startIndex].stringValue == "log", rest[rest.startIndex + 1].stringValue == "entries",
            let index = rest[rest.startIndex + 2].intValue
        {
            place = "entry \(index + 1) of log.entries: "
            rest = rest.dropFirst(3)
        }
        let field = rest.map { $0.intValue.map { "[\($0)]" } ?? "." + $0.stringValue }.joined()
        let named = field.isEmpty ? (place.isEmpty ? "its top level" : "the entry") : String(field.dropFirst())
        guard let expected else { return "not a HAR file: \(place)\(named) is not what HAR 1.2 puts there" }
        return "not a HAR file: \(place)\(named) should be \(expected), as HAR 1.2 has it"
    }

    /// What a decoding type is, in HAR's words.
    static func kind(of type: Any.Type) -> String {
        switch type {
        case is Int.Type, is Double.Type: "a number"
        case is String.Type: "a string"
        case is [Any].Type: "a list"
        default: "an object"
        }
    }

    /// `[{name, value}]` as pairs, names lowercased.
    static func pairs(_ list: [Pair]?) -> [(name: String, value: String)] {
        (list ?? []).compactMap { pair in
            guard let name = pair.name, let value = pair.value else { return nil }
            return (name.lowercased(), value)
        }
    }

    static func formEncoded(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._*")
        return (text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text).replacingOccurrences(of: "%20", with: "+")
    }
}
