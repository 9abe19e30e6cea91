import Foundation
import HTTPTypes
import OfflineBundle

/// One recorded exchange, as a bundle keeps it: a request key (its URL, and the request when it is more than a plain
/// GET) and the response that answers it. Every way in makes these (crawl, browser, declared requests, HAR and WARC
/// import, refresh, all through one recording step), and ``BundleWriter`` writes them.
public struct RecordedExchange: Sendable {
    /// The request URL; it is canonicalized into the key.
    public var url: String
    /// The HTTP status.
    public var status: Int
    /// How the entry came to be.
    public var kind: EntryKind
    /// Response headers as received; hop-by-hop and credential headers are dropped on write.
    package var headers: [(name: String, value: String)]
    /// ``headers`` as HTTP fields (names lowercased when written).
    public var fields: HTTPFields {
        get { HTTPFields(pairs: headers) }
        set { headers = newValue.map { (name: $0.name.canonicalName, value: $0.value) } }
    }
    /// The body, or nil for none.
    public var body: BundleWriter.BodySource?
    /// When the response was fetched.
    public var fetchedAt: Date?
    /// The `Date` the origin sent with the response.
    public var originDate: Date?
    /// Whether a `last-modified` header among ``headers`` was made up by the caller rather than sent by an origin.
    public var lastModifiedSynthesized: Bool
    /// For substituted entries: the local file that answered, as the declaration names it.
    public var source: String?
    /// Whether the entry answers with a strong ETag derived from the body's SHA-256 when the headers have none. The
    /// bundle records it as synthesized (a flag, derived when answering), never as the origin's.
    public var synthesizeETag: Bool
    /// The body already hashed and compressed (by a crawl's ``BodyPipeline``); ``body`` is then nil.
    var prepared: PreparedBody?
    /// The SHA-256 of ``body``'s bytes, when the step that made the entry computed it from those very bytes (a WARC
    /// import, checking a record's `sha256:` payload digest): the writer does not hash them again when it hashes a
    /// body in memory (a large file is hashed as it is streamed, and an entry read back from a store has none).
    var bodySHA256: BodyDigest?
    /// The declared request the response answers, when it is more than a plain GET of ``url``: its key then carries
    /// the request's qualifiers (docs/FORMAT.md §5.4), and the manifest records the request.
    public var request: RecordedRequest?
    /// JSON pointers of the body's volatile fields (`browser`… `requests[].volatile`), and the SHA-256 of the body's
    /// JSON without them, which verify, refresh and diff compare instead of the body's.
    public var volatile: [String] = []
    public var stableSHA256: String?
    /// The key's qualifiers as another bundle recorded them (refresh carries an entry over under its very key).
    var carriedKeySuffix: String?

    /// Creates an exchange.
    public init(
        url: String, status: Int = 200, kind: EntryKind = .recorded, fields: HTTPFields = [:], body: BundleWriter.BodySource? = nil,
        fetchedAt: Date? = nil, originDate: Date? = nil, source: String? = nil, synthesizeETag: Bool = false, lastModifiedSynthesized: Bool = false
    ) {
        self.init(
            url: url, status: status, kind: kind, headers: fields.map { (name: $0.name.canonicalName, value: $0.value) }, body: body,
            fetchedAt: fetchedAt, originDate: originDate, source: source, synthesizeETag: synthesizeETag,
            lastModifiedSynthesized: lastModifiedSynthesized)
    }

    /// An exchange with headers as name and value pairs, as the recording steps hold them.
    package init(
        url: String, status: Int = 200, kind: EntryKind = .recorded, headers: [(name: String, value: String)], body: BundleWriter.BodySource? = nil,
        fetchedAt: Date? = nil, originDate: Date? = nil, source: String? = nil, synthesizeETag: Bool = false, lastModifiedSynthesized: Bool = false
    ) {
        self.synthesizeETag = synthesizeETag
        self.originDate = originDate
        self.lastModifiedSynthesized = lastModifiedSynthesized
        self.url = url
        self.status = status
        self.kind = kind
        self.headers = headers
        self.body = body
        self.fetchedAt = fetchedAt
        self.source = source
    }
}
