/// The human-readable manifest, `manifest.json` (schema version 1).
///
/// Tools and people read it; the loader answers requests from `index.bin`
/// and never needs to decode it. docs/FORMAT.md describes every field.
public struct Manifest: Codable, Sendable, Equatable {
    /// Always `packager-bundle`.
    public var format: String
    /// The schema version, 1.
    public var formatVersion: Int
    /// The tool that wrote the bundle, with its version (nothing host-specific).
    public var generator: String
    /// When the content was captured (RFC 3339), when the writer was given a time; absent otherwise so that bundles stay reproducible.
    public var createdAt: String?
    /// Query parameter name patterns dropped from request keys (`*` matches any run).
    public var dropQueryParameters: [String]
    /// One record per request key, sorted by key.
    public var entries: [ManifestEntry]
    /// Counts and sizes over the whole bundle.
    public var totals: ManifestTotals

    /// Creates a manifest.
    public init(generator: String, createdAt: String? = nil, dropQueryParameters: [String], entries: [ManifestEntry], totals: ManifestTotals) {
        self.format = "packager-bundle"
        self.formatVersion = Int(BundleFormat.version)
        self.generator = generator
        self.createdAt = createdAt
        self.dropQueryParameters = dropQueryParameters
        self.entries = entries
        self.totals = totals
    }
}

/// One request key and the response recorded for it.
public struct ManifestEntry: Codable, Sendable, Equatable {
    /// The canonical request key (an absolute URL).
    public var key: String
    /// The request method the response answers; `GET` in version 1 (HEAD is answered from it).
    public var method: String
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
    /// For redirects: the absolute target URL.
    public var redirectTo: String?
    /// For substituted entries: the local file, relative to the declaration, that answered.
    public var source: String?
    /// `identity` when the body is stored decoded; otherwise the Content-Encoding of the stored bytes.
    public var contentEncoding: String?

    /// Creates an entry.
    public init(
        key: String, method: String = "GET", kind: EntryKind, status: Int, headers: [[String]], mediaType: String? = nil,
        charset: String? = nil, body: ManifestBody? = nil, etag: String? = nil, lastModified: String? = nil,
        cacheControl: String? = nil, expires: String? = nil, fetchedAt: String? = nil, redirectTo: String? = nil,
        source: String? = nil, contentEncoding: String? = nil
    ) {
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

/// Where a body is stored and how to check it.
public struct ManifestBody: Codable, Sendable, Equatable {
    /// SHA-256 of the body bytes, lowercase hex.
    public var sha256: String
    /// The ZIP entry name, `bodies/<sha256>`.
    public var entry: String
    /// The body's size in bytes.
    public var size: UInt64
    /// The size of the ZIP entry's data.
    public var storedSize: UInt64
    /// `stored` or `deflate`.
    public var compression: BodyCompression
    /// CRC-32 of the body, 8 lowercase hex digits.
    public var crc32: String

    /// Creates a body record.
    public init(sha256: String, size: UInt64, storedSize: UInt64, compression: BodyCompression, crc32: UInt32) {
        self.sha256 = sha256
        self.entry = BundleFormat.bodyPrefix + sha256
        self.size = size
        self.storedSize = storedSize
        self.compression = compression
        self.crc32 = hexString([UInt8(crc32 >> 24), UInt8((crc32 >> 16) & 0xFF), UInt8((crc32 >> 8) & 0xFF), UInt8(crc32 & 0xFF)])
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
