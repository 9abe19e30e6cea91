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

    /// The body as chunks of at most `size` bytes, for writing to a client in pieces.
    ///
    /// The body is read and checked whole before the first chunk is yielded, so a
    /// client never receives bytes that fail the bundle's checks; memory use is
    /// that of the whole body, not of one chunk.
    public func bodyChunks(size: Int = 64 * 1024) -> AsyncThrowingStream<Data, any Error> {
        let response = self
        return AsyncThrowingStream { continuation in
            do {
                let data = try response.bodyData()
                var offset = data.startIndex
                while offset < data.endIndex {
                    let end = min(offset + size, data.endIndex)
                    continuation.yield(data[offset..<end])
                    offset = end
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
    }
}
