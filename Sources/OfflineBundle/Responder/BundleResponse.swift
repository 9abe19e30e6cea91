import Foundation
import HTTPTypes

/// A request to answer from a bundle: method, absolute URL and headers.
public struct BundleRequest: Sendable {
    /// `GET` or `HEAD` are answered; any other method is a miss.
    public var method: String
    /// The absolute URL; canonicalized before lookup.
    public var url: String
    /// The request's header fields (names compare case-insensitively, as HTTP says).
    public var headers: HTTPFields

    public init(method: String = "GET", url: String, headers: HTTPFields = [:]) {
        self.method = method
        self.url = url
        self.headers = headers
    }

    /// The value of a header, by name in any case (several fields of that name are joined with commas).
    public func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }
}

/// A response answered from a bundle.
///
/// The body is read only when asked for (``bodyData()`` or ``bodyChunks(size:)``),
/// and every read is checked against the bundle's CRC-32 (and SHA-256 when
/// the bundle was mounted with a required key), so wrong bytes are never served.
public struct BundleResponse: Sendable {
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
    }

    /// The HTTP status.
    public var status: Int
    /// The response's header fields; Content-Length is included where HTTP allows it.
    public var headers: HTTPFields
    /// What the body is made of; read it with ``bodyData()``.
    public var body: Body
    /// The entry that answered.
    public var entry: BundleEntry
    let bundle: MountedBundle

    /// The value of a header, by name in any case (several fields of that name are joined with commas).
    public func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }

    /// The whole body.
    ///
    /// - Throws: ``BundleError`` when the stored bytes fail their checks.
    public func bodyData() throws -> Data {
        switch body {
        case .empty: return Data()
        case .entry(let entry): return try bundle.body(of: entry)
        case .range(let entry, let range): return Data(try bundle.body(of: entry)[Int(range.lowerBound)..<Int(range.upperBound)])
        case .gzip(let entry):
            guard let deflated = try bundle.deflatedBody(of: entry) else { return try bundle.body(of: entry) }
            return deflated.gzip
        }
    }

    /// A reader of the body in chunks of about `chunkSize` bytes, straight from the bundle file (see ``BodyReader``):
    /// a server streams it, holding no more than a chunk, and a body not yet checked in this mount is checked as it
    /// goes, its last chunk held back until the check passes. Returns nil when the response has no body.
    ///
    /// A Range of a body not yet checked reads the whole body once, without keeping it, to check it first; once
    /// checked, a Range of a stored body reads only that range.
    public func bodyReader(chunkSize: Int = 64 << 10) throws -> BodyReader? {
        switch body {
        case .empty: return nil
        case .entry(let entry):
            guard let body = entry.body else { return nil }
            return BodyReader(bundle: bundle, bodyIndex: body.index, shape: .identity, chunkSize: chunkSize)
        case .gzip(let entry):
            guard let body = entry.body else { return nil }
            return BodyReader(bundle: bundle, bodyIndex: body.index, shape: body.compression == .deflate ? .gzip : .identity, chunkSize: chunkSize)
        case .range(let entry, let range):
            guard let body = entry.body else { return nil }
            if !bundle.isVerified(body.index) {
                try BodyReader(bundle: bundle, bodyIndex: body.index, shape: .identity, chunkSize: chunkSize).drain()
            }
            return BodyReader(bundle: bundle, bodyIndex: body.index, shape: .range(range), chunkSize: chunkSize)
        }
    }

    /// A reader of the body when it will read no file (an identity answer or range of a body held in the mount's
    /// cache of inflated bodies), so a server can read it where it stands; nil otherwise, or when there is no body.
    public func bodyReaderIfInMemory(chunkSize: Int = 64 << 10) -> BodyReader? {
        // Only checked bodies are cached, so a reader made here never drains or reads the file.
        let reader: BodyReader
        switch body {
        case .entry(let entry):
            guard let body = entry.body, bundle.inflatedCache?.contains(body.index) == true else { return nil }
            reader = BodyReader(bundle: bundle, bodyIndex: body.index, shape: .identity, chunkSize: chunkSize)
        case .range(let entry, let range):
            guard let body = entry.body, bundle.inflatedCache?.contains(body.index) == true else { return nil }
            reader = BodyReader(bundle: bundle, bodyIndex: body.index, shape: .range(range), chunkSize: chunkSize)
        case .empty, .gzip:
            return nil
        }
        return reader.inMemory ? reader : nil
    }

    /// The body as chunks of about `size` bytes, for writing to a client in pieces (a ``BodyReader`` read on the
    /// task that iterates: servers that must keep file reads off the cooperative pool use ``bodyReader(chunkSize:)``).
    public func bodyChunks(size: Int = 64 * 1024) -> AsyncThrowingStream<Data, any Error> {
        let response = self
        return AsyncThrowingStream { continuation in
            do {
                if let reader = try response.bodyReader(chunkSize: size) {
                    while let chunk = try reader.next() { continuation.yield(chunk) }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
    }
}
