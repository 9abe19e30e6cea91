import Foundation
import OfflineBundle

/// What the bundle recorded for one entry, copied out so probes need not touch the bundle.
struct Recorded: Sendable {
    /// The entry's key: the URL, and a declared request's qualifiers (docs/FORMAT.md §5.4).
    var key: String
    /// The URL asked.
    var url: String
    /// The declared request the entry answers (its method, headers and body), from the manifest; nil for a plain GET.
    var request: RecordedRequest?
    /// The body's volatile JSON fields, and the digest of the body without them, which is compared instead.
    var volatile: [String] = []
    var stableSHA256: String?
    /// The key's qualifiers (the method and body digest the answer was recorded for).
    var keyQualifiers: RequestQualifiers?
    /// The stored headers (a paged answer's `Link` or next-page header is compared with the live one's).
    var headers: [(name: String, value: String)] = []
    var kind: EntryKind
    var status: Int
    var etag: String?
    var lastModified: String?
    var contentType: String?
    var location: String?
    var size: UInt64?
    var sha256: String?
    /// The stored body still carries a content coding (a bundle built with `content-encoding: encoded`): its digest is
    /// of coded bytes, which a decoded live body cannot be compared with.
    var storedCoded: Bool
    /// When the entry was fetched (or packed): what a substituted entry's remote is compared against.
    var fetchedAt: Date?
    /// The bundle's rules: its `match` rules say how the key's body digest was taken (docs/FORMAT.md §5.5).
    var rules = BundleRules()

    init(entry: BundleEntry, declared: Verifier.Declared? = nil, rules: BundleRules = BundleRules()) {
        self.rules = rules
        key = entry.key
        let split = RequestQualifiers.split(key: entry.key)
        url = String(split.url)
        keyQualifiers = split.qualifiers
        if let request = declared?.request { self.request = RecordedRequest(request, keyQualifiers: split.qualifiers) }
        volatile = declared?.volatile ?? []
        stableSHA256 = declared?.stableSha256
        kind = entry.kind
        status = entry.status
        // One decode of the headers, not one per field.
        let headers = entry.headers
        self.headers = headers
        func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
        // Validators the writer made up (a packed file's ETag of its digest) are no origin's: never sent, never compared.
        etag = entry.etagSynthesized ? nil : header("etag")
        lastModified = entry.lastModifiedSynthesized ? nil : header("last-modified")
        contentType = header("content-type")
        location = header("location")
        size = entry.body?.size
        sha256 = entry.body?.sha256
        storedCoded = header("content-encoding").map { $0.lowercased() != "identity" } ?? false
        fetchedAt = entry.fetchedAt
    }
}

extension Recorded {
    /// The method sent: the key's (which the answer was recorded for), whatever the manifest says.
    var method: String { keyQualifiers?.method ?? request?.method ?? "GET" }

    /// Why the entry's request cannot be sent again as recorded, when it cannot: the manifest does not hold the body
    /// the key names.
    var unsendable: String? {
        guard let digest = keyQualifiers?.bodyDigest else { return nil }
        guard rules.bodyDigest(canonicalKey: url, body: request?.body) == digest else {
            if request?.bodySecret == true {
                return "not sent: its request body is a secret the bundle does not keep, and no request of --declaration has it (b=\(digest))"
            }
            return "the manifest does not hold the request body the key names (b=\(digest)): it cannot be sent again"
        }
        return nil
    }

    /// Whether the body is compared without its volatile fields.
    var comparesStableJSON: Bool { !volatile.isEmpty && stableSHA256 != nil }

    /// Whether the recorded body is an HTML page (its links are compared when it changed).
    var isHTML: Bool {
        guard let contentType else { return false }
        let type = MediaTypes.essence(of: contentType)
        return type == "text/html" || type == "application/xhtml+xml"
    }
}
