import AsyncHTTPClient
import Foundation
import HTTPFieldsNIO
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflineBundle
import Tracing

/// An AsyncHTTPClient wrapper that answers requests from a loader's rules and bundles, by policy.
///
/// - `bundleOnly`: only the loader answers; a miss throws
///   `BundleError` with code `.notFound`, said with the nearest recorded request, and nothing reaches the network.
/// - `bundleFirst`: the loader answers what it has; the rest goes to the network.
/// - `networkFirst(timeout:)`: the network answers; when it fails,
///   answers 5xx (or a status in ``LoaderOptions/fallbackStatuses``), or takes longer than the timeout, the loader
///   answers instead (and the network's error is thrown, or its response returned, when the loader has nothing).
///
/// Runtime rules and the bundles' block patterns answer under every policy, and never reach the network. Responses
/// from a bundle carry the recorded status and headers, `Age`, and honour conditional and Range requests, like the
/// origin would. With a last-seen cache (``LoaderOptions/lastSeen``), a network response that may be kept is kept
/// once its body has been read to the end.
public struct OfflineHTTPClient: Sendable {
    public let loader: OfflineLoader
    public let client: HTTPClient
    /// Where each request's span goes (`OfflineLoader.load`'s); nil: `InstrumentationSystem.tracer`.
    public let tracer: (any Tracer)?

    /// Wraps `client`; the loader's policy (and overrides) decide per URL. Each request is a span of `tracer` (the
    /// bootstrapped one unless given), and a request sent to the network carries its trace in its headers.
    public init(loader: OfflineLoader, client: HTTPClient = .shared, tracer: (any Tracer)? = nil) {
        self.loader = loader
        self.client = client
        self.tracer = tracer
    }

    /// Executes `request` from the loader or the network, as the policy for its URL says.
    public func execute(_ request: HTTPClientRequest, timeout: TimeAmount) async throws -> HTTPClientResponse {
        var request = request
        var bundleRequest = Self.bundleRequest(request)
        // A body is read only where a bundle recorded an answer to one at this URL and method; it then goes to the
        // network (when it does) as the bytes read.
        if let collected = try await collectedBody(of: request) {
            bundleRequest.body = Data(collected.readableBytesView)
            request.body = .bytes(collected)
        }
        // The loader's step: the policy, its timeout (the network's call is cancelled past it), the fallbacks, a span.
        let (client, tracer, sent) = (self.client, self.tracer, request)
        let loaded = try await loader.load(bundleRequest, followingRedirects: 10, tracer: tracer) { limit in
            var request = sent
            var fields = HTTPFields()
            OfflineLoader.injectTraceContext(into: &fields, tracer: tracer)
            for field in fields { request.headers.replaceOrAdd(name: field.name.canonicalName, value: field.value) }
            var networkTimeout = timeout
            if let limit {
                // Saturating: a Duration of centuries (meant as "no limit") must not overflow TimeAmount's nanoseconds.
                let (seconds, attoseconds) = limit.components
                let nanoseconds = seconds >= Int64.max / 1_000_000_000 ? Int64.max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000
                networkTimeout = min(timeout, .nanoseconds(max(0, nanoseconds)))
            }
            return try await client.execute(request, timeout: networkTimeout)
        } status: {
            Int($0.status.code)
        }
        let response: HTTPClientResponse
        switch loaded {
        case .bundle(let answer, let url, _):
            return try await respond(answer, url: url)
        case .network(let answer):
            response = answer
        }
        // A response the client reached by following redirects answers another URL: it is not kept for this one.
        guard response.status.code == 200, response.history.count <= 1, loader.mayRemember(bundleRequest), let lastSeen = loader.options.lastSeen else {
            return response
        }
        let headers = HTTPFields(response.headers)
        var remembering = response
        remembering.body = .stream(
            RememberingBody(
                body: response.body, limit: Int(min(lastSeen.maxEntryBytes, UInt64(Int.max))), loader: loader, request: bundleRequest,
                headers: headers))
        return remembering
    }

    /// The loader's answer to `request` without the network (its rules, last-seen cache and bundles), or nil on a miss.
    ///
    /// Recorded redirects are followed inside the bundle (up to 10 hops), as AsyncHTTPClient follows network ones;
    /// a redirect whose target the bundle lacks is returned as recorded. Accept-Encoding is left out, so bodies
    /// come back as identity (AsyncHTTPClient's decompression never sees these responses).
    public func fromBundle(_ request: HTTPClientRequest) async throws -> HTTPClientResponse? {
        var bundleRequest = Self.bundleRequest(request)
        if let collected = try await collectedBody(of: request) { bundleRequest.body = Data(collected.readableBytesView) }
        guard let (answer, url) = loader.response(for: bundleRequest, followingRedirects: 10) else { return nil }
        return try await respond(answer, url: url)
    }

    /// The request's body, read whole, where a bundle recorded an answer to a body at its URL and method; nil elsewhere
    /// (the body is then not touched).
    private func collectedBody(of request: HTTPClientRequest) async throws -> ByteBuffer? {
        guard let body = request.body, loader.matchesBody(method: request.method.rawValue, url: request.url) else { return nil }
        var collected = ByteBuffer()
        for try await chunk in body { collected.writeImmutableBuffer(chunk) }
        return collected
    }

    /// AsyncHTTPClient speaks NIO's HTTPHeaders; the loader speaks HTTPFields. Accept-Encoding is left out.
    static func bundleRequest(_ request: HTTPClientRequest) -> BundleRequest {
        BundleRequest(method: request.method.rawValue, url: request.url, headers: HTTPFields(request.headers) { $0.lowercased() == "accept-encoding" })
    }

    /// `answer` as AsyncHTTPClient's response.
    private func respond(_ answer: BundleResponse, url: String) async throws -> HTTPClientResponse {
        // The first chunk (for most pages, the whole body) is read and checked here; a larger body streams the rest,
        // its last chunk held back until its check passes (see BodyReader). File reads block, so they happen on NIO's
        // thread pool, never on Swift's cooperative pool; a body in memory is read where it stands.
        let opened: OpenedBody?
        do {
            if answer.bodyPlace == .memory, let inMemory = try answer.openBodyIfInMemory() {
                opened = inMemory
            } else {
                opened = try await NIOThreadPool.singleton.runIfActive { try answer.openBody() }
            }
        } catch {
            loader.recordError(error, url: url)
            throw error
        }
        let fields = HTTPHeaders(answer.headers)
        let status = HTTPResponseStatus(statusCode: answer.status)
        guard let opened, opened.second != nil else {
            return HTTPClientResponse(status: status, headers: fields, body: .bytes(ByteBuffer(bytes: opened?.first ?? Data())))
        }
        let rest = BundleBodyChunks(reader: opened.reader, first: opened.chunks, loader: loader, url: url)
        return HTTPClientResponse(status: status, headers: fields, body: .stream(rest))
    }
}

/// A network response's body passed through as it is read, and kept in the loader's last-seen cache once read to
/// the end (unless it grew past `limit`, when it is passed through and not kept).
struct RememberingBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let body: HTTPClientResponse.Body
    let limit: Int
    let loader: OfflineLoader
    let request: BundleRequest
    let headers: HTTPFields

    struct AsyncIterator: AsyncIteratorProtocol {
        var upstream: HTTPClientResponse.Body.AsyncIterator
        let owner: RememberingBody
        var collected: Data? = Data()

        mutating func next() async throws -> ByteBuffer? {
            guard let chunk = try await upstream.next() else {
                if let collected {
                    owner.loader.remember(owner.request, status: 200, headers: owner.headers, body: collected)
                    self.collected = nil
                }
                return nil
            }
            if collected != nil {
                if collected!.count + chunk.readableBytes > owner.limit {
                    collected = nil
                } else {
                    collected!.append(contentsOf: chunk.readableBytesView)
                }
            }
            return chunk
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(upstream: body.makeAsyncIterator(), owner: self) }
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
