import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflineBundle

/// An AsyncHTTPClient wrapper that answers requests from a bundle by policy.
///
/// - `bundleOnly`: only the bundle answers; a miss throws
///   `BundleError` with code `.notFound`, and nothing reaches the network.
/// - `bundleFirst`: the bundle answers what it has; the rest goes to the network.
/// - `networkFirst(timeout:)`: the network answers; when it fails,
///   answers 5xx, or takes longer than the timeout, the bundle answers instead
///   (and the network error is thrown when the bundle has nothing either).
///
/// Responses from the bundle carry the recorded status and headers and honour
/// conditional and Range requests, like the origin would.
public struct OfflineHTTPClient: Sendable {
    public let loader: OfflineLoader
    public let client: HTTPClient

    /// Wraps `client`; the loader's policy (and overrides) decide per URL.
    public init(loader: OfflineLoader, client: HTTPClient = .shared) {
        self.loader = loader
        self.client = client
    }

    /// Executes `request` from the bundle or the network, as the policy for its URL says.
    public func execute(_ request: HTTPClientRequest, timeout: TimeAmount) async throws -> HTTPClientResponse {
        switch loader.policy(for: request.url) {
        case .bundleOnly:
            guard let response = try fromBundle(request) else {
                throw BundleError(.notFound, "the bundle has no entry for \(request.method.rawValue) \(request.url) (policy: bundle only)")
            }
            return response
        case .bundleFirst:
            if let response = try fromBundle(request) { return response }
            return try await client.execute(request, timeout: timeout)
        case .networkFirst(let limit):
            // Saturating: a Duration of centuries (meant as "no limit") must not overflow TimeAmount's nanoseconds.
            let (seconds, attoseconds) = limit.components
            let nanoseconds = seconds >= Int64.max / 1_000_000_000 ? Int64.max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000
            let networkTimeout = min(timeout, .nanoseconds(max(0, nanoseconds)))
            do {
                let response = try await client.execute(request, timeout: networkTimeout)
                if response.status.code >= 500, let fallback = try fromBundle(request) { return fallback }
                return response
            } catch {
                if let fallback = try fromBundle(request) { return fallback }
                throw error
            }
        }
    }

    /// The bundle's answer to `request`, or nil on a miss.
    ///
    /// Recorded redirects are followed inside the bundle (up to 10 hops), as AsyncHTTPClient follows network ones;
    /// a redirect whose target the bundle lacks is returned as recorded. Accept-Encoding is left out, so bodies
    /// come back as identity (AsyncHTTPClient's decompression never sees these responses).
    public func fromBundle(_ request: HTTPClientRequest) throws -> HTTPClientResponse? {
        // AsyncHTTPClient speaks NIO's HTTPHeaders; the bundle speaks HTTPFields.
        var headers = HTTPFields()
        for (name, value) in request.headers where name.lowercased() != "accept-encoding" {
            if let fieldName = HTTPField.Name(name) { headers.append(HTTPField(name: fieldName, value: value)) }
        }
        let bundleRequest = BundleRequest(method: request.method.rawValue, url: request.url, headers: headers)
        guard let (answer, url) = loader.response(for: bundleRequest, followingRedirects: 10) else { return nil }
        // The first chunk (for most pages, the whole body) is read and checked here; a larger body streams the rest,
        // read on NIO's thread pool, its last chunk held back until its check passes (see BodyReader).
        let reader: BodyReader?
        let first: Data
        let second: Data?
        do {
            reader = try answer.bodyReader()
            first = try reader?.next() ?? Data()
            second = try reader?.next()
        } catch {
            loader.recordError(error, url: url)
            throw error
        }
        var fields = HTTPHeaders()
        for field in answer.headers { fields.add(name: field.name.canonicalName, value: field.value) }
        let status = HTTPResponseStatus(statusCode: answer.status)
        guard let reader, let second else { return HTTPClientResponse(status: status, headers: fields, body: .bytes(ByteBuffer(bytes: first))) }
        let rest = BundleBodyChunks(reader: reader, first: [first, second], loader: loader, url: url)
        return HTTPClientResponse(status: status, headers: fields, body: .stream(rest))
    }
}

/// The chunks of a body too large for one read: the two already read, then the rest from the bundle, each read on
/// NIO's thread pool. A chunk that fails its check ends the sequence with the error, recorded by the loader.
struct BundleBodyChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let reader: BodyReader
    let first: [Data]
    let loader: OfflineLoader
    let url: String

    struct AsyncIterator: AsyncIteratorProtocol {
        let chunks: BundleBodyChunks
        var index = 0

        mutating func next() async throws -> ByteBuffer? {
            if index < chunks.first.count {
                index += 1
                return ByteBuffer(bytes: chunks.first[index - 1])
            }
            let reader = chunks.reader
            do {
                return try await NIOThreadPool.singleton.runIfActive { try reader.next() }.map { ByteBuffer(bytes: $0) }
            } catch {
                chunks.loader.recordError(error, url: chunks.url)
                throw error
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(chunks: self) }
}
