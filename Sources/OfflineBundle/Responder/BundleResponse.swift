import Foundation
import HTTPTypes

/// A request to answer from a bundle: method, absolute URL, headers and body.
public struct BundleRequest: Sendable {
    /// `GET` and `HEAD` are answered from a URL's plain entry; another method only by an entry recorded for it, in a
    /// bundle with request variants (``MountedBundle/hasRequestVariants``).
    public var method: String
    /// The absolute URL; canonicalized before lookup.
    public var url: String
    /// The request's header fields (names compare case-insensitively, as HTTP says).
    public var headers: HTTPFields
    /// The request's body, when it has one: an entry recorded for a body answers only the same bytes (its SHA-256).
    public var body: Data?

    public init(method: String = "GET", url: String, headers: HTTPFields = [:], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// The most request body bytes the integrations collect to match an entry recorded for a body (1 MiB); a longer
    /// body is a miss.
    public static let maxBodySize = 1 << 20

    /// The value of a header, by name in any case (several fields of that name are joined with commas).
    public func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }
}

/// Content a runtime rule or the last-seen cache answers with: bytes in memory, or a local file opened when the
/// request was looked up (a file replaced afterwards does not change the answer; one cut short fails the read).
public struct ResponseContent: Sendable {
    enum Storage: Sendable {
        case bytes(Data)
        /// `size` bytes of a file from `offset`.
        case file(BundleFile, offset: UInt64, size: UInt64)
    }

    let storage: Storage

    /// Bytes in memory.
    public init(bytes: Data) { storage = .bytes(bytes) }

    /// The regular file at `path`, opened now.
    ///
    /// - Throws: ``BundleError`` when it cannot be opened or is not a regular file.
    public init(file path: String) throws {
        let file = try BundleFile(path: path)
        storage = .file(file, offset: 0, size: file.size)
    }

    /// Part of an opened file.
    init(file: BundleFile, offset: UInt64, size: UInt64) { storage = .file(file, offset: offset, size: size) }

    /// The size in bytes.
    public var size: UInt64 {
        switch storage {
        case .bytes(let data): return UInt64(data.count)
        case .file(_, _, let size): return size
        }
    }

    /// When a file was last modified; nil for bytes.
    var modified: Date? {
        if case .file(let file, _, _) = storage { return file.modified }
        return nil
    }

    /// The response this content with `status` and `headers` gives `request`, by ``BundleResponder``'s rules
    /// (conditional requests, Range, HEAD); it is never gzip-encoded.
    func respond(to request: BundleRequest, status: Int, headers: [(name: String, value: String)], head: Bool, source: BundleResponse.Source)
        -> BundleResponse
    {
        BundleResponder.respond(to: request, status: status, headers: headers, size: size, storedSize: nil, head: head) { status, fields, part in
            let body: BundleResponse.Body
            switch part {
            case .none: body = .empty
            case .whole, .gzip: body = .content(self, 0..<size)
            case .range(let range): body = .content(self, range)
            }
            return BundleResponse(status: status, headers: fields, body: body, source: source)
        }
    }

    func reader(_ range: Range<UInt64>, chunkSize: Int) -> BodyReader {
        switch storage {
        case .bytes(let data): return BodyReader(data: data, range: Int(range.lowerBound)..<Int(range.upperBound), chunkSize: chunkSize)
        case .file(let file, let offset, _):
            return BodyReader(file: file, range: (offset + range.lowerBound)..<(offset + range.upperBound), chunkSize: chunkSize)
        }
    }
}

/// A response the loader answered without the network: from a bundle, a rule, or the last-seen cache.
///
/// The body is read only when asked for (``bodyData()`` or ``bodyReader(chunkSize:)``). A bundle body is checked
/// against the bundle's CRC-32 (and SHA-256 when the bundle was mounted with a required key), so wrong bytes are
/// never served.
public struct BundleResponse: Sendable {
    /// What answered.
    public enum Source: Sendable, Equatable, CustomStringConvertible {
        /// A mounted bundle, by its ``MountedBundle/label``.
        case bundle(String)
        /// A rule added at runtime (a block or a substitution), or a bundle's substitution prefix that no bundle
        /// holds the URL for (a 404). A bundle's own block patterns answer as `.bundle(label)`.
        case rule
        /// The last-seen cache (what the network last answered).
        case lastSeen

        /// The name logs, metrics and access logs give it: the bundle's label, `rules`, or `last-seen`.
        public var description: String {
            switch self {
            case .bundle(let label): return label
            case .rule: return "rules"
            case .lastSeen: return "last-seen"
            }
        }
    }

    /// What the body is made of.
    public enum Body: Sendable {
        /// No body (HEAD, 204, 304, redirects without one).
        case empty
        /// The whole body of an entry, inflated.
        case entry(BundleEntry)
        /// Part of an entry's body (a Range request).
        case range(BundleEntry, Range<UInt64>)
        /// The stored deflate stream of an entry, framed as gzip.
        case gzip(BundleEntry)
        /// A range of a rule's or the last-seen cache's content (all of it for a 200).
        case content(ResponseContent, Range<UInt64>)
    }

    /// The HTTP status.
    public var status: Int
    /// The response's header fields; Content-Length is included where HTTP allows it.
    public var headers: HTTPFields
    /// What the body is made of; read it with ``bodyData()``.
    public var body: Body
    /// The bundle entry that answered; nil when a rule or the last-seen cache did.
    public var entry: BundleEntry?
    /// What answered: a bundle, a rule, or the last-seen cache.
    public var source: Source
    /// Whether the answer was chosen among request variants (docs/FORMAT.md §8.4 H19): by the request's method, body,
    /// `Accept`, `Accept-Language` or credentials, at the URL asked or at the query-less URL that answered it. Another
    /// request for the same URL may then get another answer, so a cache of whole answers keyed by less than the
    /// whole request must not keep it.
    public var variesByRequest = false

    init(status: Int, headers: HTTPFields, body: Body, entry: BundleEntry? = nil, source: Source) {
        self.status = status
        self.headers = headers
        self.body = body
        self.entry = entry
        self.source = source
    }

    /// The value of a header, by name in any case (several fields of that name are joined with commas).
    public func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }

    /// The whole body.
    ///
    /// - Throws: ``BundleError`` when the stored bytes fail their checks.
    public func bodyData() throws -> Data {
        // The same reader a server streams with: one place decides the checks.
        // No buffer larger than the body (a small one is one chunk of its own size), and none over 1 MiB.
        try bodyReader(chunkSize: wholeChunkSize)?.readAll() ?? Data()
    }

    /// A reader of the body in chunks of about `chunkSize` bytes, straight from the bundle file (see ``BodyReader``):
    /// a server streams it, holding no more than a chunk, and a body not yet checked in this mount and larger than
    /// the check-before-send size is checked as it goes, its last chunk held back until the check passes. Returns nil
    /// when the response has no body.
    ///
    /// A body not yet checked in this mount is read whole once, without keeping it, to check it before the reader is
    /// returned: a Range of it, and a whole body of more than a chunk and at most
    /// ``MountedBundle/Options/checkBeforeSend`` bytes (so a damaged one throws here, before any byte is sent). Once
    /// checked, a Range of a stored body reads only that range.
    public func bodyReader(chunkSize: Int = 64 << 10) throws -> BodyReader? {
        switch body {
        case .empty: return nil
        case .content(let content, let range): return content.reader(range, chunkSize: chunkSize)
        case .entry(let entry):
            guard let body = entry.body else { return nil }
            return try Self.checkedFirst(entry.bundle, body: body.index, shape: .identity, sending: body.size, chunkSize: chunkSize)
        case .gzip(let entry):
            guard let body = entry.body else { return nil }
            let deflated = body.compression == .deflate
            let record = entry.bundle.bodyRecord(at: body.index)
            return try Self.checkedFirst(
                entry.bundle, body: body.index, shape: deflated ? .gzip : .identity, sending: deflated ? record.storedSize : body.size, chunkSize: chunkSize)
        case .range(let entry, let range):
            guard let body = entry.body else { return nil }
            let bundle = entry.bundle
            try bundle.refuseIfScrubbedDamaged(body.index)
            var checked = false
            if !bundle.isVerified(body.index) {
                try BodyReader(bundle: bundle, bodyIndex: body.index, shape: .identity, chunkSize: chunkSize).drain()
                checked = true
            }
            return BodyReader(bundle: bundle, bodyIndex: body.index, shape: .range(range), chunkSize: chunkSize, justChecked: checked)
        }
    }

    /// A reader of a whole body, as it will be sent (`sending` bytes in `shape`). A body not yet checked in this mount
    /// and longer than a chunk is read through its checks once, without keeping it, before the reader is made, when
    /// it is at most the mount's ``MountedBundle/Options/checkBeforeSend`` bytes: a damaged one then fails here,
    /// before any byte of it goes out, and never goes out under a 200 (docs/FORMAT.md §8.2). A larger one is checked
    /// as it streams, its last chunk held back.
    private static func checkedFirst(
        _ bundle: MountedBundle, body: Int, shape: BodyReader.Shape, sending: UInt64, chunkSize: Int
    ) throws -> BodyReader {
        try bundle.refuseIfScrubbedDamaged(body)
        if !bundle.isVerified(body) && sending > UInt64(max(4096, chunkSize)) && sending <= bundle.checkBeforeSend {
            try BodyReader(bundle: bundle, bodyIndex: body, shape: shape, chunkSize: max(chunkSize, 256 << 10)).drain()
        }
        return BodyReader(bundle: bundle, bodyIndex: body, shape: shape, chunkSize: chunkSize)
    }

    /// Where a response's bytes lie in a bundle file, so a server can send them with `sendfile`: the framing to send
    /// before, a span of the file, the framing to send after.
    public struct FileSpan: Sendable {
        /// Bytes before the span (a gzip header), possibly none.
        public var prefix: [UInt8]
        /// A descriptor of the bundle file, new for this response: the caller closes it.
        public var descriptor: Int32
        public var offset: UInt64
        public var count: UInt64
        /// Bytes after the span (a gzip trailer), possibly none.
        public var suffix: [UInt8]
        /// The bundle whose file this is: spans of one mounted bundle and one ``store`` can share one descriptor.
        public var bundle: MountedBundle
        /// Which of the bundle's files the span lies in: 0, its own, for a bundle that is not a delta; a delta's bodies
        /// lie in its own file or its bases'.
        public var store: Int
    }

    /// The response's body as a span of the bundle file, when its bytes go out as they are stored and the body has
    /// already passed its checks in this mount: a stored body or a range of it, or a deflate stream framed as gzip.
    /// Nil otherwise (inflated answers, bodies not yet checked, rule content, every body of a mount that checks by
    /// SHA-256, and every body once the file changed after mounting): read those with ``bodyReader(chunkSize:)``,
    /// which checks them as it goes.
    ///
    /// A span is only as good as the file: a caller that keeps one to send again asks
    /// `MountedBundle`'s file state before each use (``OfflineBundleChannelServer`` does).
    public func fileSpan() -> FileSpan? {
        let entry: BundleEntry
        var range: Range<UInt64>?
        var gzip = false
        switch body {
        case .entry(let whole): entry = whole
        case .range(let part, let bytes):
            entry = part
            range = bytes
        case .gzip(let deflated):
            entry = deflated
            gzip = true
        case .empty, .content: return nil
        }
        guard let body = entry.body, entry.bundle.isVerified(body.index) else { return nil }
        let record = entry.bundle.bodyRecord(at: body.index)
        let file = entry.bundle.bodyFile(body.index)
        // A remote bundle's body is sent from its cache file once held there (bytes its cache could not keep are not).
        guard !file.inMemory, file.holds(record.dataOffset..<(record.dataOffset + record.storedSize)) else { return nil }
        let store = entry.bundle.bodyStore(body.index)
        if gzip {
            guard record.compression == .deflate else { return nil }
            return FileSpan(
                prefix: Array(DeflatedBody.gzipHeader), descriptor: file.duplicateDescriptor(), offset: record.dataOffset,
                count: record.storedSize, suffix: Array(DeflatedBody.gzipTrailer(crc32: record.crc32, size: record.size)), bundle: entry.bundle,
                store: store)
        }
        guard record.compression == .stored else { return nil }
        let bytes = range ?? 0..<record.size
        guard bytes.upperBound <= record.storedSize else { return nil }
        return FileSpan(
            prefix: [], descriptor: file.duplicateDescriptor(), offset: record.dataOffset + bytes.lowerBound, count: UInt64(bytes.count),
            suffix: [], bundle: entry.bundle, store: store)
    }

    /// A reader of the body when it will read no file (an identity answer or range of a body held in the mount's
    /// cache of inflated bodies), so a server can read it where it stands; nil otherwise, or when there is no body.
    public func bodyReaderIfInMemory(chunkSize: Int = 64 << 10) -> BodyReader? {
        // Only checked bodies are cached, so a reader made here never drains or reads the file.
        let reader: BodyReader
        switch body {
        case .entry(let entry):
            guard let body = entry.body, entry.bundle.inflatedCache?.contains(body.index) == true else { return nil }
            reader = BodyReader(bundle: entry.bundle, bodyIndex: body.index, shape: .identity, chunkSize: chunkSize)
        case .range(let entry, let range):
            guard let body = entry.body, entry.bundle.inflatedCache?.contains(body.index) == true else { return nil }
            reader = BodyReader(bundle: entry.bundle, bodyIndex: body.index, shape: .range(range), chunkSize: chunkSize)
        case .content(let content, let range):
            guard case .bytes = content.storage else { return nil }
            reader = content.reader(range, chunkSize: chunkSize)
        case .empty, .gzip:
            return nil
        }
        return reader.inMemory ? reader : nil
    }

    /// How the body is best read: where the caller stands, or off it.
    public var bodyPlace: BodyPlace {
        switch body {
        case .empty: return .none
        case .gzip(let entry):
            guard let body = entry.body else { return .large }
            return body.storedSize <= Self.smallBody && entry.bundle.bodyIsLocal(body.index) ? .small : .large
        case .entry(let entry), .range(let entry, _):
            guard let body = entry.body else { return .none }
            // A remote bundle's body not fetched yet is read off the caller, whatever its size: reading it waits on a request.
            if body.size <= Self.smallBody && body.storedSize <= Self.smallBody && entry.bundle.bodyIsLocal(body.index) { return .small }
            return entry.bundle.inflatedCache?.contains(body.index) == true ? .memory : .large
        case .content(let content, _):
            if case .bytes = content.storage { return .memory }
            return .large
        }
    }

    /// Where a body is read from, so a caller knows whether reading it may block.
    public enum BodyPlace: Sendable {
        /// No body.
        case none
        /// In memory (a rule's bytes, the mount's cache of inflated bodies): reading it reads no file.
        case memory
        /// A body of at most ``BundleResponse/smallBody`` bytes (stored and inflated): one read, from the page cache
        /// as a rule, as nginx reads on its event loop.
        case small
        /// A larger body, read in chunks: off an event loop and off Swift's cooperative pool (``BodyReader`` blocks).
        case large
    }

    /// Bodies up to this size (stored and inflated) are ``BodyPlace/small``.
    public static let smallBody: UInt64 = 64 << 10

    /// The body's reader and its first two chunks, read before a head goes out, as every integration answers: for
    /// most pages the first chunk is the whole body, read and checked whole, so a damaged one is an error answer and
    /// never a good head followed by a cut; a longer body is checked whole first when it is at most the mount's
    /// check-before-send size, and streams the rest from ``OpenedBody/reader`` (a larger one with its last chunk held back
    /// until its check passes). Nil when the response has no body. Blocks on file reads unless the body is
    /// in memory (see ``BodyReader``).
    ///
    /// - Throws: ``BundleError`` when the stored bytes read so far fail their checks.
    public func openBody(chunkSize: Int = 64 << 10) throws -> OpenedBody? {
        guard let reader = try bodyReaderIfInMemory(chunkSize: chunkSize) ?? bodyReader(chunkSize: chunkSize) else { return nil }
        return try OpenedBody(reading: reader)
    }

    /// The body opened as ``openBody(chunkSize:)`` opens it, when it is in memory now (reading it reads no file); nil
    /// otherwise (``bodyPlace`` said `.memory`, and the mount's cache let the body go since: read it off the caller).
    public func openBodyIfInMemory(chunkSize: Int = 64 << 10) throws -> OpenedBody? {
        try bodyReaderIfInMemory(chunkSize: chunkSize).map { try OpenedBody(reading: $0) }
    }

}

/// A body opened for sending (``BundleResponse/openBody(chunkSize:)``): its first chunks, and the reader of the rest.
public struct OpenedBody: Sendable {
    /// Reads the chunks after ``second``.
    public let reader: BodyReader
    /// The first chunk (empty for an empty body).
    public let first: Data
    /// The second chunk; nil when ``first`` is the whole body.
    public let second: Data?

    /// The chunks read so far, in order.
    public var chunks: [Data] { second.map { [first, $0] } ?? [first] }

    /// Reads the first two chunks of `reader`.
    init(reading reader: BodyReader) throws {
        self.reader = reader
        first = try reader.next() ?? Data()
        second = try reader.next()
    }
}
