import Foundation
import OfflineBundle

/// The request a response was recorded for, when the declaration named it (`requests:`): its method, headers and
/// body, and the request headers that choose its answer among the URL's. Its key is the URL and the request's
/// qualifiers (docs/FORMAT.md §5.4); a plain GET without a body or such headers keeps the URL alone as its key.
public struct RecordedRequest: Sendable, Equatable {
    /// The method, uppercase.
    public var method: String
    /// The headers sent, names lowercased; a secret's value is empty (it is never stored).
    public var headers: [Header]
    /// The body sent, nil for none (or a secret body the bundle did not keep: ``bodySecret``).
    public var body: Data?
    /// Whether the body holds a secret: the manifest (and so `export --format har`) keeps none of it, only the key's
    /// `b=` digest; verify and refresh take it from the declaration again (``restoringBody(url:declared:rules:)``).
    public var bodySecret = false
    /// A secret body's digest as the key holds it (`b=`), when the body itself was not kept.
    var withheldBodyDigest: String?
    /// The request headers that choose this answer (the declaration's `vary`, the response's `Vary`, and a credential
    /// by its scheme), names lowercased, with the value the key holds (a credential's scheme alone, lowercased; any
    /// other value as sent, trimmed), or nil when the request did not carry the header.
    public var keyHeaders: [Header]
    /// How the next page is found (``Declaration/Pagination/word``), when the answer's pages are followed.
    public var paginate: String?

    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String?

        public init(name: String, value: String?) {
            self.name = name.lowercased()
            self.value = value
        }
    }

    public init(method: String = "GET", headers: [Header] = [], body: Data? = nil, keyHeaders: [Header] = []) {
        self.method = method.uppercased()
        self.headers = headers
        self.body = body
        self.keyHeaders = keyHeaders
    }

    /// The key's qualifiers (``keyHeaders`` hold key values already).
    var qualifiers: RequestQualifiers { qualifiers(rules: BundleRules(), canonicalKey: "") }

    /// The key's qualifiers under `rules`: the body's digest over its canonical form where a `match` rule covers
    /// `canonicalKey` (docs/FORMAT.md §5.5).
    func qualifiers(rules: BundleRules, canonicalKey: String) -> RequestQualifiers {
        RequestQualifiers(
            method: method, bodyDigest: rules.bodyDigest(canonicalKey: canonicalKey, body: body) ?? withheldBodyDigest,
            headers: keyHeaders.map { .init(name: $0.name, value: $0.value) })
    }

    /// The key for `url` (canonicalized by `canonicalizer`) answered for this request; nil when the URL has none.
    func key(for url: String, canonicalizer: RequestKeyCanonicalizer) -> String? {
        canonicalizer.canonicalize(url).map { $0 + qualifiers.keySuffix }
    }

    /// As the manifest records it: a secret body not at all, only said to be one.
    var manifest: ManifestRequest {
        let kept = bodySecret ? nil : body
        let text = kept.flatMap { String(validating: $0, as: UTF8.self) }
        var recorded = ManifestRequest(
            method: method, headers: headers.map { [$0.name, $0.value ?? ""] }, body: text,
            bodyBase64: text == nil ? kept?.base64EncodedString() : nil, vary: keyHeaders.isEmpty ? nil : keyHeaders.map(\.name), paginate: paginate)
        if bodySecret { recorded.bodySecret = true }
        return recorded
    }

    /// This request with its secret body given back by the declaration: the body of the declared request of the same
    /// method and URL (canonical `url`) whose digest is the key's `b=`. Unchanged when the body was kept, or when no
    /// declared request has it (``Recorded/unsendable`` then says why it is not sent).
    /// Under the bundle's `rules` (`url` is a key's URL, as they made it; the digest is of a body's canonical form
    /// where a `match` rule covers the URL).
    func restoringBody(url: String, declared: [Declaration.Request], rules: BundleRules = BundleRules()) -> RecordedRequest {
        guard body == nil, let digest = withheldBodyDigest else { return self }
        let canonical = RequestKeyCanonicalizer(rules: rules, formQuery: true)
        guard
            let source = declared.first(where: {
                $0.method == method && rules.bodyDigest(canonicalKey: url, body: $0.body) == digest && canonical.canonicalize($0.url) == url
            })
        else { return self }
        var restored = self
        restored.body = source.body
        return restored
    }

    /// The headers to send this request with again (verify, refresh): those recorded, and a secret's, which the bundle
    /// does not keep, from the declaration's request for the same method and URL (canonical `url`).
    /// A later page of a paged answer has another URL than the request declared: its secret comes from a declared
    /// request of the same origin that sends a header of that name.
    func headersToSend(url: String, declared: [Declaration.Request], rules: BundleRules = BundleRules()) -> [(String, String)] {
        sending(url: url, declared: declared, rules: rules).headers
    }

    /// The headers to send again, and the names of the secret ones whose values neither the bundle nor the
    /// declaration gives (sent without them, the answer would be another: an anonymous one, a 401). `url` is a key's
    /// URL as the bundle's `rules` made it (its `drop-query` and `ignore-params` parameters gone).
    func sending(url: String, declared: [Declaration.Request], rules: BundleRules = BundleRules()) -> (headers: [(String, String)], missing: [String]) {
        let canonical = RequestKeyCanonicalizer(rules: rules, formQuery: true)
        let source = declared.first { $0.method == method && canonical.canonicalize($0.url) == url }
        let origin = HTTPOrigin(key: url)
        var missing: [String] = []
        let sent = headers.compactMap { header -> (String, String)? in
            if let value = header.value, !value.isEmpty { return (header.name, value) }
            // What the client writes itself, recorded by its name alone (as older imports kept Host, like a secret):
            // no value to miss. (One a declaration gives a value, a Host for a virtual host, is sent as given.)
            if HeaderPolicy.writtenBySender.contains(header.name.lowercased()) { return nil }
            let named = { (request: Declaration.Request) in request.headers.first { $0.name.lowercased() == header.name } }
            let found = source.flatMap(named) ?? declared.lazy.filter { HTTPOrigin(url: $0.url) == origin }.compactMap(named).first
            if found == nil { missing.append(header.name) }
            return found.map { (header.name, $0.value) }
        }
        return (sent, missing)
    }

    /// What a manifest records, read back (for refresh and verify).
    init(_ manifest: ManifestRequest, keyQualifiers: RequestQualifiers?) {
        self.init(
            method: manifest.method, headers: manifest.headers.compactMap { $0.count == 2 ? Header(name: $0[0], value: $0[1]) : nil },
            body: manifest.bodySecret == true ? nil : manifest.bodyData,
            keyHeaders: (keyQualifiers?.headers ?? []).map { Header(name: $0.name, value: $0.value) })
        paginate = manifest.paginate
        if manifest.bodySecret == true {
            bodySecret = true
            withheldBodyDigest = keyQualifiers?.bodyDigest
        }
    }
}
