import Foundation
import HTTPTypes

/// Why a request missed, said against the nearest answer a bundle recorded under the same URL path: which query
/// parameter, method, request header or body made the difference. A report for people (a server's log, an
/// `X-Offline-Miss` header, `packager check --browser`), not part of the format: matching stays exact (H2, H19).
///
/// ```swift
/// if loader.response(for: request) == nil, let why = loader.explainMiss(request) {
///     logger.info("offline miss: \(why)")  // nearest GET http://api.example/items?page=2: query parameter page=3, recorded page=2
/// }
/// ```
public struct MissExplanation: Sendable, Equatable, CustomStringConvertible {
    /// What made the difference first: the kind a server counts misses by.
    public enum Kind: String, Sendable, CaseIterable {
        /// Nothing was recorded under the URL's path (or the URL is not one a bundle can hold).
        case path
        /// A query parameter differs, is missing or is extra.
        case query
        /// Recorded for another method.
        case method
        /// A request header the recorded answer depends on differs.
        case header
        /// The request body differs.
        case body
    }

    /// The nearest recorded request key (its URL, then its request qualifiers), nil when nothing under the path was
    /// recorded.
    public var nearest: String?
    /// The nearest recorded request as a person reads it: `GET http://api.example/items?page=2`,
    /// `POST http://api.example/search (a body)`; nil with ``nearest``.
    public var nearestRequest: String?
    /// What differs between the request and the nearest recorded one, one item each:
    /// `query parameter page=3, recorded page=2`, `method POST, recorded GET`, `header accept: text/csv, recorded
    /// application/json`, `a body of 120 bytes, recorded another`.
    public var differences: [String]
    public var kind: Kind

    public init(nearest: String?, nearestRequest: String?, differences: [String], kind: Kind) {
        self.nearest = nearest
        self.nearestRequest = nearestRequest
        self.differences = differences
        self.kind = kind
    }

    /// `nearest GET http://a/list.html?page=2: query parameter page=3, recorded page=2`, or why nothing is near.
    public var description: String {
        guard let nearestRequest else { return differences.first ?? "nothing recorded under this path" }
        return "nearest \(nearestRequest): " + differences.joined(separator: "; ")
    }

    /// ``description`` as one header field value: visible ASCII only (other bytes as `\xNN`), at most 400 bytes.
    public var fieldValue: String {
        var out = ""
        for byte in description.utf8 {
            if out.utf8.count >= 400 {
                out += "..."
                break
            }
            if byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\") {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += String(format: "\\x%02x", byte)
            }
        }
        return out
    }

    /// The differences between `request` (its canonical key `key`) and the recorded `candidate` key, in the order a
    /// person fixes them: query, method, headers, body.
    /// `bodyDigest` is the request's `b=` as the bundle takes it (over its canonical form under a `match` rule).
    /// `bodyDetail` says where the two bodies differ, when it can (JSON pointers, under a `match` rule).
    static func differences(
        request: BundleRequest, key: String, candidate: String, bodyDigest digest: String?, bodyDetail: (String) -> [String]? = { _ in nil }
    ) -> (items: [String], kind: Kind)? {
        let (url, recorded) = RequestQualifiers.split(key: candidate)
        guard let recorded else { return nil }
        var items: [String] = []
        var kind: Kind?
        func add(_ text: String, _ which: Kind) {
            items.append(text)
            if kind == nil { kind = which }
        }
        for item in queryDifferences(asked: query(of: key[...]), recorded: query(of: url)) { add(item, .query) }
        let method = RequestQualifiers.asciiUppercased(request.method)
        let asked = method == "HEAD" ? "GET" : method
        if asked != recorded.method { add("method \(method), recorded \(recorded.method)", .method) }
        for header in recorded.headers {
            let sent = HTTPField.Name(header.name).flatMap { request.headers[values: $0].first }.map {
                RequestQualifiers.keyValue(name: header.name, value: $0)
            }
            if sent == header.value { continue }
            let mine = sent.map { "\(header.name): \(shown($0))" } ?? "no \(header.name)"
            let theirs = header.value.map { "recorded \(shown($0))" } ?? "recorded without it"
            add("header \(mine), \(theirs)", .header)
        }
        // A GET's body counts only against a GET recorded with one (H19 rule 2): another is no difference.
        let bodyCounts = !(asked == "GET" && recorded.method == "GET" && recorded.bodyDigest == nil)
        if bodyCounts, digest != recorded.bodyDigest {
            let size = request.body?.count ?? 0
            switch (digest, recorded.bodyDigest) {
            case (nil, _): add("no body, recorded one", .body)
            case (_, nil): add("a body of \(size) bytes, recorded none", .body)
            default:
                if let detail = bodyDetail(candidate), !detail.isEmpty {
                    for item in detail { add(item, .body) }
                } else {
                    add("a body of \(size) bytes, recorded another (b=\(recorded.bodyDigest ?? ""))", .body)
                }
            }
        }
        return (items, kind ?? .query)
    }

    /// A recorded request key as a person reads it: its method and URL, and whether it carried a body.
    static func readable(_ key: String) -> String {
        let (url, qualifiers) = RequestQualifiers.split(key: key)
        let method = qualifiers?.method ?? "GET"
        var text = "\(method) \(url)"
        if qualifiers?.bodyDigest != nil { text += " (a body)" }
        let headers = (qualifiers?.headers ?? []).map { header in header.value.map { "\(header.name): \(shown($0))" } ?? "no \(header.name)" }
        if !headers.isEmpty { text += " with " + headers.joined(separator: ", ") }
        return text
    }

    /// A value in a sentence: at most 60 characters.
    static func shown(_ value: String) -> String { value.count > 60 ? String(value.prefix(57)) + "..." : value }

    /// The query of a canonical URL as name and value pairs, in order (the name alone for a parameter without `=`).
    static func query(of url: Substring) -> [(name: Substring, value: Substring?)] {
        guard let mark = url.firstIndex(of: "?") else { return [] }
        return url[url.index(after: mark)...].split(separator: "&", omittingEmptySubsequences: true).map { pair in
            guard let equals = pair.firstIndex(of: "=") else { return (pair, nil) }
            return (pair[..<equals], pair[pair.index(after: equals)...])
        }
    }

    static func queryDifferences(asked: [(name: Substring, value: Substring?)], recorded: [(name: Substring, value: Substring?)]) -> [String] {
        func pair(_ item: (name: Substring, value: Substring?)) -> String { item.value.map { "\(item.name)=\(shown(String($0)))" } ?? String(item.name) }
        var items: [String] = []
        var unmatched = recorded
        for item in asked {
            if let same = unmatched.firstIndex(where: { $0.name == item.name && $0.value == item.value }) {
                unmatched.remove(at: same)
            } else if let named = unmatched.firstIndex(where: { $0.name == item.name }) {
                items.append("query parameter \(pair(item)), recorded \(pair(unmatched[named]))")
                unmatched.remove(at: named)
            } else {
                items.append("query parameter \(pair(item)) not recorded")
            }
        }
        for item in unmatched { items.append("no query parameter \(item.name), recorded \(pair(item))") }
        return items
    }
}

extension MountedBundle {
    /// Why `request` finds no entry here, against the entry recorded under the same path whose request differs least
    /// (by the number of differences; the first in key order on a tie). Nil when the request has an entry.
    public func explainMiss(_ request: BundleRequest) -> MissExplanation? {
        guard let key = canonicalizer.canonicalize(request.url) else {
            return MissExplanation(nearest: nil, nearestRequest: nil, differences: ["not a URL a bundle holds"], kind: .path)
        }
        let path = key.firstIndex(of: "?").map { String(key[..<$0]) } ?? key
        // At most this many are compared: a path recorded with many queries must not make each miss expensive.
        let candidates = entriesUnderPath(path).prefix(256)
        // The request's body digest, once for all the candidates.
        let digest = RequestQualifiers.bodyDigest(of: BundleRules.bodyForMatching(bodyMatches, canonicalKey: key, body: request.body))
        // Where the body differs, said by JSON pointer where a JSON or GraphQL rule covers the URL.
        let rule = BundleRules.bodyRule(bodyMatches, canonicalKey: key)
        func bodyDetail(_ candidate: String) -> [String]? {
            guard let rule, rule.form != .form, let body = request.body, let mine = rule.canonical(Array(body)),
                let recordedBody = recordedRequestBody(candidate), let theirs = rule.canonical(Array(recordedBody)),
                let places = CanonicalJSON.differences(mine, theirs)
            else { return nil }
            var items = places.prefix(3).map { place in
                "body \(place.pointer.isEmpty ? "(the whole document)" : place.pointer): "
                    + (place.mine.map(MissExplanation.shown) ?? "absent") + ", recorded " + (place.recorded.map(MissExplanation.shown) ?? "absent")
            }
            if places.count > 3 { items.append("and \(places.count - 3) more places in the body") }
            return items
        }
        var best: (key: String, items: [String], kind: MissExplanation.Kind)?
        for entry in candidates {
            let candidate = index.entryKey(entry)
            guard let (items, kind) = MissExplanation.differences(request: request, key: key, candidate: candidate, bodyDigest: digest, bodyDetail: bodyDetail)
            else { continue }
            // A candidate that differs in nothing would have answered: this request is not a miss here.
            if items.isEmpty { return nil }
            if best == nil || items.count < best!.items.count { best = (candidate, items, kind) }
        }
        guard let best else {
            let similar = similarPath(to: path).map { " (recorded: \($0))" } ?? ""
            return MissExplanation(nearest: nil, nearestRequest: nil, differences: ["nothing recorded under \(path)\(similar)"], kind: .path)
        }
        return MissExplanation(nearest: best.key, nearestRequest: MissExplanation.readable(best.key), differences: best.items, kind: best.kind)
    }
}

extension MountedBundle {
    /// The request body the manifest records for `key` (a request key with its qualifiers); nil when it records none,
    /// keeps it secret, or the manifest cannot be read.
    func recordedRequestBody(_ key: String) -> Data? {
        if let bodies = recordedBodies.withLock({ $0 }) { return bodies[key] }
        var bodies: [String: Data] = [:]
        if let manifest = try? manifest() {
            for entry in manifest.entries {
                if let body = entry.request?.bodyData, body.count <= 64 << 10 { bodies[entry.key] = body }
            }
        }
        recordedBodies.withLock { $0 = bodies }
        return bodies[key]
    }
}

extension OfflineLoader {
    /// Why `request` finds no answer in these bundles (``MountedBundle/explainMiss(_:)``): the explanation with the
    /// fewest differences among the bundles', the first bundle's on a tie. Nil when one of them answers it.
    public func explainMiss(_ request: BundleRequest) -> MissExplanation? {
        var best: MissExplanation?
        for bundle in bundles {
            guard let explanation = bundle.explainMiss(request) else { return nil }
            if best == nil || (best!.nearest == nil && explanation.nearest != nil)
                || (explanation.nearest != nil && explanation.differences.count < best!.differences.count)
            {
                best = explanation
            }
        }
        return best
    }
}
