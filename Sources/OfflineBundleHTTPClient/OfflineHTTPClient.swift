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
    /// Where the loader comes from; a ``OfflineBundle/BundleReloader`` may replace it (each request is answered by the
    /// loader it holds when the request starts).
    public let handle: LoaderHandle
    public let client: HTTPClient
    /// Where each request's span goes (`OfflineLoader.load`'s); nil: `InstrumentationSystem.tracer`.
    public let tracer: (any Tracer)?

    /// Wraps `client`, answering from the loader `handle` holds: a reloader's (`reloader.handle`) follows each release.
    /// The loader's policy (and overrides) decide per URL. Each request is a span of `tracer` (the bootstrapped one
    /// unless given), and a request sent to the network carries its trace in its headers.
    public init(handle: LoaderHandle, client: HTTPClient = .shared, tracer: (any Tracer)? = nil) {
        self.handle = handle
        self.client = client
        self.tracer = tracer
    }

    /// Wraps `client`, answering from `loader`.
    public init(loader: OfflineLoader, client: HTTPClient = .shared, tracer: (any Tracer)? = nil) {
        self.init(handle: LoaderHandle(loader), client: client, tracer: tracer)
    }

    /// The loader answering now.
    public var loader: OfflineLoader { handle.loader }

    /// Executes `request` from the loader or the network, as the policy for its URL says.
    public func execute(_ request: HTTPClientRequest, timeout: TimeAmount) async throws -> HTTPClientResponse {
        // One loader for the whole request: a reload meanwhile does not change what answers it.
        let loader = handle.loader
        let (sent, bundleRequest) = try await prepared(request, loader: loader)
        // The loader's step: the policy, its timeout (the network's call is cancelled past it), the fallbacks, a span.
        let (client, tracer) = (self.client, self.tracer)
        let loaded = try await loader.load(bundleRequest, followingRedirects: 10, tracer: tracer) { limit in
            try await client.execute(Self.traced(sent, tracer: tracer), timeout: limit.map { min(timeout, TimeAmount(saturating: $0)) } ?? timeout)
        } status: {
            Int($0.status.code)
        }
        switch loaded {
        case .bundle(let answer, let url, _): return try await respond(answer, url: url, loader: loader)
        case .network(let response): return Self.remembering(response, of: bundleRequest, loader: loader)
        }
    }

    /// The network's `response`, its body kept in the last-seen cache once read to the end. A response the client
    /// reached by following redirects answers another URL: it is not kept for this one.
    static func remembering(_ response: HTTPClientResponse, of request: BundleRequest, loader: OfflineLoader) -> HTTPClientResponse {
        guard response.history.count <= 1,
            let recording = LastSeenRecording(loader: loader, request: request, status: Int(response.status.code), headers: HTTPFields(response.headers))
        else { return response }
        var remembering = response
        remembering.body = .stream(RecordedBody(response.body, recording: recording) { $1.add($0.readableBytesView) })
        return remembering
    }

    /// The loader's answer to `request` without the network (its rules, last-seen cache and bundles), or nil on a miss.
    ///
    /// Recorded redirects are followed inside the bundle (up to 10 hops), as AsyncHTTPClient follows network ones;
    /// a redirect whose target the bundle lacks is returned as recorded. Accept-Encoding is left out, so bodies
    /// come back as identity (AsyncHTTPClient's decompression never sees these responses).
    public func fromBundle(_ request: HTTPClientRequest) async throws -> HTTPClientResponse? {
        let loader = handle.loader
        let bundleRequest = try await prepared(request, loader: loader).bundleRequest
        guard let (answer, url) = loader.response(for: bundleRequest, followingRedirects: 10) else { return nil }
        return try await respond(answer, url: url, loader: loader)
    }

    /// `request` as the loader sees it, and as it goes to the network. Its body is read whole only where a bundle
    /// recorded an answer to a body at its URL and method; it then goes to the network as the bytes read (a stream is
    /// read once). Elsewhere the body is not touched.
    func prepared(_ request: HTTPClientRequest, loader: OfflineLoader) async throws -> (request: HTTPClientRequest, bundleRequest: BundleRequest) {
        var request = request
        var bundleRequest = Self.bundleRequest(request)
        guard let body = request.body, loader.matchesBody(method: request.method.rawValue, url: request.url) else { return (request, bundleRequest) }
        var collected = ByteBuffer()
        for try await chunk in body { collected.writeImmutableBuffer(chunk) }
        bundleRequest.body = Data(collected.readableBytesView)
        request.body = .bytes(collected)
        return (request, bundleRequest)
    }

    /// `request` carrying the current trace context (the load span's) in its headers.
    static func traced(_ request: HTTPClientRequest, tracer: (any Tracer)?) -> HTTPClientRequest {
        var request = request
        var fields = HTTPFields()
        OfflineLoader.injectTraceContext(into: &fields, tracer: tracer)
        for field in fields { request.headers.replaceOrAdd(name: field.name.canonicalName, value: field.value) }
        return request
    }

    /// AsyncHTTPClient speaks NIO's HTTPHeaders; the loader speaks HTTPFields. Accept-Encoding is left out.
    static func bundleRequest(_ request: HTTPClientRequest) -> BundleRequest {
        BundleRequest(method: request.method.rawValue, url: request.url, headers: HTTPFields(request.headers) { $0.lowercased() == "accept-encoding" })
    }

    /// `answer` as AsyncHTTPClient's response: the first chunk (for most pages, the whole body) read and checked here,
    /// a larger body streamed (its last chunk held back until its check passes), file reads on NIO's thread pool.
    private func respond(_ answer: BundleResponse, url: String, loader: OfflineLoader) async throws -> HTTPClientResponse {
        let body = try await loader.clientBody(of: answer, url: url, hop: BlockingHop { try await NIOThreadPool.singleton.runIfActive($0) })
        let (status, fields) = (HTTPResponseStatus(statusCode: answer.status), HTTPHeaders(answer.headers))
        switch body {
        case .empty: return HTTPClientResponse(status: status, headers: fields, body: .bytes(ByteBuffer()))
        case .bytes(let data): return HTTPClientResponse(status: status, headers: fields, body: .bytes(ByteBuffer(bytes: data)))
        case .stream(let chunks): return HTTPClientResponse(status: status, headers: fields, body: .stream(chunks.map { ByteBuffer(bytes: $0) }))
        }
    }
}
