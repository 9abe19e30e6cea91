import Foundation
import HTTPTypes

/// Answers HTTP requests from a mounted bundle, as the origin would have answered them.
///
/// - GET and HEAD are answered (HEAD from the GET entry, without a body); another method only by an entry recorded
///   for it, in a bundle with request variants, which also chooses among a URL's answers by the request's body and
///   headers (``MountedBundle/entry(for:)-(BundleRequest)``, docs/FORMAT.md §8.4 H19).
/// - Recorded redirects and error pages are answered as recorded; blocked
///   entries with their empty response.
/// - Conditional requests: `If-None-Match` (weak comparison, `*`) and, when it
///   is absent, `If-Modified-Since` against `Last-Modified`, answer 304.
/// - `Range` (one `bytes=` range; `If-Range` honoured) answers 206, or 416 when
///   nothing of the body is in range. A request for several ranges is answered
///   with the whole body (200), which RFC 9110 allows a server to do.
/// - A deflated body goes to a client that accepts gzip as `Content-Encoding:
///   gzip`: once checked, without inflating it (the first gzip answer of a body under SHA-256 checking, or of a
///   version-1 bundle, inflates once to check it; see ``BodyReader``).
///
/// Bodies are read lazily from the ``BundleResponse``.
public struct BundleResponder: Sendable {
    public let bundle: MountedBundle

    public init(bundle: MountedBundle) { self.bundle = bundle }

    /// The response for `request`, or nil when the bundle has no entry for it (a miss). A URL with a query that no
    /// entry answers is answered by its query-less entry where the bundle's ignore-query rules say the origin ignores
    /// the query (``MountedBundle/entryIgnoringQuery(for:)``).
    public func respond(to request: BundleRequest) -> BundleResponse? {
        let method = request.method.uppercased()
        let plain = method == "GET" || method == "HEAD"
        guard let entry = bundle.entry(for: request) ?? (plain ? bundle.entryIgnoringQuery(for: request) : nil) else { return nil }
        return respond(to: request, with: entry, head: method == "HEAD")
    }

    /// The response `entry` gives to `request`.
    package func respond(to request: BundleRequest, with entry: BundleEntry, head: Bool) -> BundleResponse {
        let body = entry.body
        var request = request
        let method = request.method.uppercased()
        if method != "GET" && method != "HEAD" {
            // Validators and ranges are GET's (RFC 9110 §13.1, §14.2): another method's answer is the recorded one, whole.
            for name in [HTTPField.Name.ifNoneMatch, .ifModifiedSince, .range, .ifRange] { request.headers[name] = nil }
        }
        return Self.respond(
            to: request, status: entry.status, headers: entry.headers, size: body?.size, storedSize: body?.compression == .deflate ? body?.storedSize : nil,
            head: head
        ) { status, headers, part in
            let made: BundleResponse.Body
            switch part {
            case .none: made = .empty
            case .whole: made = .entry(entry)
            case .range(let range): made = .range(entry, range)
            case .gzip: made = .gzip(entry)
            }
            return BundleResponse(status: status, headers: headers, body: made, entry: entry, source: .bundle(bundle.label))
        }
    }

    /// What part of the content a response carries.
    package enum Part {
        case none
        case whole
        case range(Range<UInt64>)
        /// The stored deflate stream, framed as gzip.
        case gzip
    }

    /// The response that stored content (`status`, `headers`, and a body of `size` bytes, or none when nil) gives to
    /// `request`: the rules of the type's documentation, for a bundle entry as for a runtime rule's content.
    /// `storedSize` is the size of a deflate stream the body is stored as, which a client that accepts gzip gets.
    /// The most stored header fields a response carries (see ``BundleFormat/maxHeaderBlockBytes``).
    static let maxFields = 32_768

    package static func respond(
        to request: BundleRequest, status: Int, headers stored: [(name: String, value: String)], size: UInt64?, storedSize: UInt64?, head: Bool,
        make: (Int, HTTPFields, Part) -> BundleResponse
    ) -> BundleResponse {
        // The index's header strings are decoded once per request, not once per field looked at. Headers that would
        // change the client's state for the serving origin (cookies, HSTS) are never replayed, even when a hand-made
        // bundle carries them; Content-Length is computed for each response; a stored name that is not a valid
        // field name is dropped.
        var headers = HTTPFields()
        // The list is compared with the field name's canonical (lowercase) form: `Set-Cookie` is `set-cookie`.
        // A mounted index holds no header block past 128 KiB (§4.5), so at most 32,768 lines; a content's headers from
        // elsewhere are held to a bound too, far under the 65,535 fields a field list can hold (it traps past them).
        for (name, value) in stored.prefix(Self.maxFields) {
            if let fieldName = HTTPField.Name(name), HeaderPolicy.isReplayed(fieldName) {
                headers.append(HTTPField(name: fieldName, value: value))
            }
        }
        let etag = headers[.eTag]
        // The stored ETag fields as they are (H3's "R's ETag" joins several with ", " for comparing; a 206 restores the
        // fields themselves, not the joined value).
        let etagFields = headers[values: .eTag]
        let lastModified = headers[.lastModified]
        func response(_ status: Int, _ part: Part, length: UInt64, extra: HTTPFields = [:]) -> BundleResponse {
            var all = headers
            all.append(contentsOf: extra)
            // RFC 9110 §8.6: no Content-Length on 204 (a blocked entry) or 304.
            if status != 204 && status != 304 { all[.contentLength] = String(length) }
            return make(status, all, head ? .none : part)
        }
        guard status == 200, let size else {
            return response(status, size == nil ? .none : .whole, length: size ?? 0)
        }
        // H5: a stored Accept-Ranges is removed, and ours appended after the stored fields.
        headers[.acceptRanges] = nil
        headers.append(HTTPField(name: .acceptRanges, value: "bytes"))
        // A deflated body has two representations (identity and gzip); caches must key on Accept-Encoding,
        // and the gzip one gets its own strong validator so a Range resumed with If-Range never splices the two.
        // A stored `Content-Encoding: identity` says the same as none (the writer deflates such a body too).
        if headers[.contentEncoding]?.lowercased() == "identity" { headers[.contentEncoding] = nil }
        let compressed = storedSize != nil && headers[.contentEncoding] == nil
        if compressed { headers.append(HTTPField(name: .vary, value: "Accept-Encoding")) }
        let gzip = compressed && acceptsGzip(request.headers[.acceptEncoding])
        if gzip, let etag { headers[.eTag] = gzipETag(etag) }

        // Conditional requests (RFC 9110 §13.2.2: If-None-Match first, If-Modified-Since only without it).
        if let match = request.headers[.ifNoneMatch] {
            let current = gzip ? etag.map(gzipETag) : etag
            if match.trimmingCharacters(in: .whitespaces) == "*" || (current.map { weakMatch(match, $0) } ?? false) {
                return make(304, notModifiedFields(headers), .none)
            }
        } else if let since = request.headers[.ifModifiedSince], let lastModified,
            let sinceDate = HTTPDates.parse(since), let modified = HTTPDates.parse(lastModified), modified <= sinceDate
        {
            return make(304, notModifiedFields(headers), .none)
        }

        // Range, for GET only (RFC 9110 §14.2), unless If-Range names another version. Ranges address the identity bytes.
        if !head, let rangeHeader = request.headers[.range], ifRangeHolds(request.headers[.ifRange], etag: etag, lastModified: lastModified) {
            switch parseRange(rangeHeader, size: size) {
            case .single(let range):
                if gzip { headers[values: .eTag] = etagFields }
                return response(
                    206, .range(range), length: range.upperBound - range.lowerBound,
                    extra: [.contentRange: "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(size)"])
            case .unsatisfiable:
                // Ranges address the identity bytes: the 416 names the identity representation's ETag, as a 206 does.
                var fields = headers
                if gzip { fields[values: .eTag] = etagFields }
                fields[.contentType] = nil
                fields[.contentRange] = "bytes */\(size)"
                fields[.contentLength] = "0"
                return make(416, fields, .none)
            case .ignored:
                break
            }
        }

        if gzip, let storedSize {
            let gzipLength = UInt64(DeflatedBody.gzipHeader.count) + storedSize + 8
            return response(200, .gzip, length: gzipLength, extra: [.contentEncoding: "gzip"])
        }
        return response(200, .whole, length: size)
    }

    /// The strong validator of the gzip representation: the identity ETag with `-gzip` inside its quotes.
    static func gzipETag(_ etag: String) -> String {
        guard etag.hasSuffix("\""), etag.count >= 2 else { return etag }
        return String(etag.dropLast()) + "-gzip\""
    }

    /// The fields of a 304: the validators and caching headers a 200 would carry (RFC 9110 §15.4.5), no body.
    private static func notModifiedFields(_ headers: HTTPFields) -> HTTPFields {
        let kept: Set<HTTPField.Name> = [.eTag, .lastModified, .cacheControl, .expires, .vary, .contentLocation]
        return HTTPFields(headers.filter { kept.contains($0.name) })
    }

    // MARK: - HTTP rules

    /// Whether an If-None-Match list matches `etag` by weak comparison (RFC 9110 §8.8.3.2).
    ///
    /// The list is read as entity-tags (`W/"…"` or `"…"`), so a comma inside quotes is part of a tag,
    /// not a separator; items that are not entity-tags match nothing.
    static func weakMatch(_ list: String, _ etag: String) -> Bool {
        let trimmed = list.trimmingCharacters(in: .whitespaces)
        if trimmed == "*" { return true }
        let target = opaqueTag(Substring(etag.trimmingCharacters(in: .whitespaces)))
        guard !target.isEmpty else { return false }
        var rest = Substring(trimmed)
        while let quote = rest.firstIndex(of: "\"") {
            let afterQuote = rest.index(after: quote)
            guard let close = rest[afterQuote...].firstIndex(of: "\"") else { return false }
            if HTTPRules.weaklyEqual(String(rest[quote...close]), String(target)) { return true }
            rest = rest[rest.index(after: close)...]
        }
        return false
    }

    /// The quoted part of an entity-tag (`"abc"` of `W/"abc"`), or empty when it has none.
    private static func opaqueTag(_ tag: Substring) -> Substring {
        let t = tag.hasPrefix("W/") ? tag.dropFirst(2) : tag
        guard t.count >= 2, t.first == "\"", t.last == "\"" else { return "" }
        return t
    }

    /// Whether a Range should be honoured given If-Range: a strong ETag match or an exact Last-Modified.
    static func ifRangeHolds(_ ifRange: String?, etag: String?, lastModified: String?) -> Bool {
        guard let ifRange = ifRange?.trimmingCharacters(in: .whitespaces) else { return true }
        if ifRange.hasPrefix("\"") || ifRange.hasPrefix("W/") {
            guard let etag, !etag.hasPrefix("W/"), !ifRange.hasPrefix("W/") else { return false }
            return ifRange == etag
        }
        return lastModified == ifRange
    }

    enum RangeRequest: Equatable {
        case single(Range<UInt64>)
        case unsatisfiable
        /// Malformed, not bytes, or several ranges: answered with the whole body.
        case ignored
    }

    /// Parses `bytes=a-b`, `bytes=a-`, `bytes=-n` against a body of `size` bytes.
    static func parseRange(_ header: String, size: UInt64) -> RangeRequest {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes=") else { return .ignored }
        let specs = text.dropFirst(6).split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard specs.count == 1, let spec = specs.first, let dash = spec.firstIndex(of: "-") else { return .ignored }
        let first = spec[..<dash]
        let last = spec[spec.index(after: dash)...]
        if first.isEmpty {
            guard !last.isEmpty, last.allSatisfy(\.isASCIIDigit) else { return .ignored }
            let suffix = UInt64(last) ?? .max
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .single((size - min(suffix, size))..<size)
        }
        guard first.allSatisfy(\.isASCIIDigit), last.allSatisfy(\.isASCIIDigit) else { return .ignored }
        // A position past UInt64 is past any body: read as the largest value, never trapped on.
        let start = UInt64(first) ?? .max
        let value = last.isEmpty ? nil : (UInt64(last) ?? .max)
        if let value, value < start { return .ignored }
        guard start < size else { return .unsatisfiable }
        // value < size - 1 implies value + 1 < size: no overflow, whatever the header says.
        let end = value.map { $0 < size - 1 ? $0 + 1 : size } ?? size
        return .single(start..<end)
    }

    /// Whether an Accept-Encoding value accepts gzip (a `q=0` refuses it).
    package static func acceptsGzip(_ header: String?) -> Bool {
        guard let header else { return false }
        var gzipQ: Int?
        var anyQ: Int?
        for item in header.lowercased().split(separator: ",") {
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            let q = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { qvalue($0.dropFirst(2)) } ?? 1000
            switch parts.first {
            case "gzip", "x-gzip": gzipQ = q
            case "*": anyQ = q
            default: break
            }
        }
        // An explicit gzip item wins over "*" (RFC 9110 §12.5.3).
        return (gzipQ ?? anyQ ?? 0) > 0
    }

    /// A weight by RFC 9110 §12.4.2's grammar, `0[.ddd]` or `1[.000]`, in thousandths; nil for anything else (`nan`,
    /// `1e400`, `-1`, `0.0001`, `2`), which H7 reads as no weight.
    package static func qvalue(_ text: Substring) -> Int? {
        let b = Array(text.utf8)
        guard let first = b.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1"), b.count <= 5 else { return nil }
        if b.count == 1 { return first == UInt8(ascii: "1") ? 1000 : 0 }
        guard b[1] == UInt8(ascii: "."), b.dropFirst(2).allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        let digits = b.dropFirst(2).map { Int($0 - 0x30) } + [0, 0, 0]
        let thousandths = digits[0] * 100 + digits[1] * 10 + digits[2]
        if first == UInt8(ascii: "1") { return thousandths == 0 ? 1000 : nil }
        return thousandths
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
