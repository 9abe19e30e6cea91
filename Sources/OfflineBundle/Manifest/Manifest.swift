import Foundation

/// The human-readable manifest, `manifest.json` (schema version 3; version-1 and version-2 manifests decode too).
///
/// Tools and people read it; the loader answers requests from `index.bin`
/// and never needs to decode it. docs/FORMAT.md describes every field.
public struct Manifest: Codable, Sendable, Equatable {
    /// Always `packager-bundle`.
    public var format: String
    /// The format version (``BundleFormat/version``: 3 for bundles written now; 2 and 1 for older ones).
    public var formatVersion: Int
    /// The tool that wrote the bundle, with its version (nothing host-specific).
    public var generator: String
    /// When the content was captured (RFC 3339), when the writer was given a time; absent otherwise so that bundles stay reproducible.
    public var createdAt: String?
    /// The declaration's rules the bundle carries (version 1 manifests carry only the dropped query parameters).
    public var rules: BundleRules
    /// Query parameter name patterns dropped from request keys (`*` matches any run).
    public var dropQueryParameters: [String] { rules.dropQueryParameters }
    /// One record per request key, sorted by key.
    public var entries: [ManifestEntry]
    /// Counts and sizes over the whole bundle.
    public var totals: ManifestTotals

    /// Creates a manifest.
    public init(generator: String, createdAt: String? = nil, rules: BundleRules, entries: [ManifestEntry], totals: ManifestTotals) {
        self.format = "packager-bundle"
        self.formatVersion = Int(BundleFormat.version)
        self.generator = generator
        self.createdAt = createdAt
        self.rules = rules
        self.entries = entries
        self.totals = totals
    }

    private enum CodingKeys: String, CodingKey {
        case format, formatVersion, generator, createdAt, rules, dropQueryParameters, entries, totals
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        format = try c.decode(String.self, forKey: .format)
        formatVersion = try c.decode(Int.self, forKey: .formatVersion)
        generator = try c.decode(String.self, forKey: .generator)
        createdAt = try c.decodeIfPresent(String.self, forKey: .createdAt)
        if let rules = try c.decodeIfPresent(BundleRules.self, forKey: .rules) {
            self.rules = rules
        } else {
            rules = BundleRules(dropQueryParameters: try c.decodeIfPresent([String].self, forKey: .dropQueryParameters) ?? [])
        }
        entries = try c.decode([ManifestEntry].self, forKey: .entries)
        totals = try c.decode(ManifestTotals.self, forKey: .totals)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(format, forKey: .format)
        try c.encode(formatVersion, forKey: .formatVersion)
        try c.encode(generator, forKey: .generator)
        try c.encodeIfPresent(createdAt, forKey: .createdAt)
        try c.encode(rules, forKey: .rules)
        try c.encode(entries, forKey: .entries)
        try c.encode(totals, forKey: .totals)
    }
}

/// One request key and the response recorded for it.
public struct ManifestEntry: Codable, Sendable, Equatable {
    /// The canonical request key (an absolute URL).
    public var key: String
    /// The request method the response answers: `GET` in version-1 manifests; absent in version 2, where every entry
    /// answers GET (and HEAD from it).
    public var method: String?
    /// recorded, substituted or blocked.
    public var kind: EntryKind
    /// The HTTP status.
    public var status: Int
    /// The stored response headers as `[name, value]` pairs, names lowercased, in recorded order.
    public var headers: [[String]]
    /// The media type without parameters, when known.
    public var mediaType: String?
    /// The charset parameter of Content-Type, when present.
    public var charset: String?
    /// The body, or nil when the response had none.
    public var body: ManifestBody?
    /// Validators and freshness, copied from the headers for easy reading.
    public var etag: String?
    public var lastModified: String?
    public var cacheControl: String?
    public var expires: String?
    /// When the response was fetched (RFC 3339), when known.
    public var fetchedAt: String?
    /// The `Date` the origin sent (RFC 3339), when it sent one.
    public var date: String?
    /// The validators the writer made up rather than recorded from an origin: `etag`, `last-modified`.
    public var synthesized: [String]?
    /// For redirects: the absolute target URL.
    public var redirectTo: String?
    /// For substituted entries: the local file, relative to the declaration, that answered.
    public var source: String?
    /// `identity` when the body is stored decoded; otherwise the Content-Encoding of the stored bytes.
    public var contentEncoding: String?
    /// For a declared request (a method other than GET, a body, headers that choose among a URL's answers): the
    /// request as it was sent, secrets left out, so verify and refresh can send it again.
    public var request: ManifestRequest?
    /// JSON pointers (`*` for any one step) of the fields that change on every answer (a query time, a timestamp):
    /// verify, refresh and diff leave them out.
    public var volatile: [String]?
    /// SHA-256 of the body's JSON with the volatile fields removed (keys sorted, no spaces): what verify, refresh and
    /// diff compare when ``volatile`` is set.
    public var stableSha256: String?

    /// Creates an entry.
    public init(
        key: String, method: String? = nil, kind: EntryKind, status: Int, headers: [[String]], mediaType: String? = nil,
        charset: String? = nil, body: ManifestBody? = nil, etag: String? = nil, lastModified: String? = nil,
        cacheControl: String? = nil, expires: String? = nil, fetchedAt: String? = nil, date: String? = nil, redirectTo: String? = nil,
        source: String? = nil, contentEncoding: String? = nil, synthesized: [String]? = nil, request: ManifestRequest? = nil, volatile: [String]? = nil,
        stableSha256: String? = nil
    ) {
        self.request = request
        self.volatile = volatile
        self.stableSha256 = stableSha256
        self.date = date
        self.synthesized = synthesized
        self.key = key
        self.method = method
        self.kind = kind
        self.status = status
        self.headers = headers
        self.mediaType = mediaType
        self.charset = charset
        self.body = body
        self.etag = etag
        self.lastModified = lastModified
        self.cacheControl = cacheControl
        self.expires = expires
        self.fetchedAt = fetchedAt
        self.redirectTo = redirectTo
        self.source = source
        self.contentEncoding = contentEncoding
    }
}

/// The request a declared entry was recorded for.
public struct ManifestRequest: Codable, Sendable, Hashable {
    /// The method, uppercase.
    public var method: String
    /// The request headers sent, as `[name, value]` pairs, names lowercased; secret values are left out (their names
    /// are kept with an empty value, and verify takes the value from the declaration again).
    public var headers: [[String]]
    /// The request body, as text when it is UTF-8, else in ``bodyBase64``; neither when ``bodySecret``.
    public var body: String?
    public var bodyBase64: String?
    /// True when the request body held a secret: it is not recorded at all, only its digest (the key's `b=`).
    public var bodySecret: Bool?
    /// The request headers that choose this answer among the URL's (the key's `h=` qualifiers), lowercase.
    public var vary: [String]?
    /// How the next page of a paged answer is found (`link`, `json:/next_url`, `header:next-page`), so refresh walks
    /// the pages again; nil when it is not followed.
    public var paginate: String?

    public init(method: String, headers: [[String]], body: String? = nil, bodyBase64: String? = nil, vary: [String]? = nil, paginate: String? = nil) {
        self.paginate = paginate
        self.method = method
        self.headers = headers
        self.body = body
        self.bodyBase64 = bodyBase64
        self.vary = vary
    }

    /// The body's bytes, nil for none.
    public var bodyData: Data? {
        if let body { return Data(body.utf8) }
        return bodyBase64.flatMap { Data(base64Encoded: $0) }
    }
}

/// Where a body is stored and how to check it.
public struct ManifestBody: Codable, Sendable, Equatable {
    /// SHA-256 of the body bytes, lowercase hex, in version-1 and version-2 manifests. Version 3 leaves it to the
    /// index, which holds it anyway (``BundleEntry/Body/sha256``): for 100,000 small files it took 4 MB of the bundle.
    public var sha256: String?
    /// The ZIP entry name, `bodies/<sha256>`, in version-1 manifests (version 2 leaves it to the index).
    public var entry: String?
    /// The body's size in bytes.
    public var size: UInt64
    /// The size of the ZIP entry's data.
    public var storedSize: UInt64
    /// `stored` or `deflate`.
    public var compression: BodyCompression
    /// CRC-32 of the body, 8 lowercase hex digits, in version-1 manifests (version 2 leaves it to the index).
    public var crc32: String?

    /// Creates a body record.
    public init(sha256: String? = nil, size: UInt64, storedSize: UInt64, compression: BodyCompression) {
        self.sha256 = sha256
        self.size = size
        self.storedSize = storedSize
        self.compression = compression
    }
}

/// Counts and sizes over a bundle.
public struct ManifestTotals: Codable, Sendable, Equatable {
    /// Number of request keys.
    public var entries: Int
    /// Number of distinct bodies.
    public var bodies: Int
    /// Sum of the sizes of distinct bodies.
    public var bodyBytes: UInt64
    /// Sum of their stored sizes.
    public var storedBytes: UInt64

    /// Creates totals.
    public init(entries: Int, bodies: Int, bodyBytes: UInt64, storedBytes: UInt64) {
        self.entries = entries
        self.bodies = bodies
        self.bodyBytes = bodyBytes
        self.storedBytes = storedBytes
    }
}
