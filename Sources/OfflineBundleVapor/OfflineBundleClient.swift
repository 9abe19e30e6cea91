import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflineBundle
import OfflineBundleHTTPClient
import Tracing
import Vapor

/// A Vapor `Client` that answers `req.client` and `app.client` from a loader's rules and bundles, by the loader's
/// policy, as `OfflineHTTPClient` does for AsyncHTTPClient:
///
/// - `bundleOnly`: only the loader answers; a miss fails with `BundleError` (code `.notFound`), and nothing reaches
///   the network.
/// - `bundleFirst`: the loader answers what it has; the rest goes to the network.
/// - `networkFirst(timeout:)`: the network answers; when it fails, answers 5xx (or a status in
///   ``OfflineBundle/LoaderOptions/fallbackStatuses``), or takes longer than the timeout, the loader answers instead.
///
/// Runtime rules and the bundles' block patterns answer under every policy and never reach the network. Answers from
/// a bundle carry the recorded status and headers and `Age`, honour conditional and Range requests, follow recorded
/// redirects (10 hops, as AsyncHTTPClient follows the network's), and come back as identity (Accept-Encoding is left
/// out). A body is read whole, as Vapor's client reads one, and checked first: a damaged one fails the request. With
/// a last-seen cache (``OfflineBundle/LoaderOptions/lastSeen``), what the network answers may be kept. Each request
/// is a span (`OfflineLoader.load`'s), and one sent to the network carries its trace in its headers.
///
/// The network is the application's shared AsyncHTTPClient (`app.http.client.shared`), with its configuration. A network
/// answer is read whole, as Vapor's client reads one, up to ``maxResponseBodySize`` (64 MiB unless given): a longer one
/// fails the request (AsyncHTTPClient's `HTTPClientResponse.Body` error), never held whole.
///
/// ```swift
/// app.clients.use(.offlineBundle(try OfflineLoader(path: "api.bundle.zip", policy: .bundleOnly)))
/// let response = try await req.client.get("https://api.example.com/v1/items")  // from the bundle
/// ```
public struct OfflineBundleClient: Client {
    /// Where the loader comes from; a ``OfflineBundle/BundleReloader`` may replace it.
    public let handle: LoaderHandle
    /// The network, for what the policy sends there.
    public let http: HTTPClient
    public let eventLoop: any EventLoop
    public let byteBufferAllocator: ByteBufferAllocator
    let logger: Logger?
    /// Where bundle bodies are read (file reads block).
    let threadPool: NIOThreadPool
    /// The most bytes of a network answer's body read into memory.
    public let maxResponseBodySize: Int
    /// Where each request's span goes (`OfflineLoader.load`'s); nil: `InstrumentationSystem.tracer`.
    public let tracer: (any Tracer)?

    /// 64 MiB: a response body held whole, as `ClientResponse` holds it.
    public static let defaultMaxResponseBodySize = 64 << 20

    /// A client on `eventLoop` that answers from the loader `handle` holds and sends the rest to `http`.
    public init(
        handle: LoaderHandle, http: HTTPClient, eventLoop: any EventLoop, threadPool: NIOThreadPool = .singleton, logger: Logger? = nil,
        byteBufferAllocator: ByteBufferAllocator = ByteBufferAllocator(), maxResponseBodySize: Int = OfflineBundleClient.defaultMaxResponseBodySize,
        tracer: (any Tracer)? = nil
    ) {
        self.handle = handle
        self.tracer = tracer
        self.maxResponseBodySize = maxResponseBodySize
        self.http = http
        self.eventLoop = eventLoop
        self.threadPool = threadPool
        self.logger = logger
        self.byteBufferAllocator = byteBufferAllocator
    }

    /// The loader answering now.
    public var loader: OfflineLoader { handle.loader }

    public func send(_ request: ClientRequest) -> EventLoopFuture<ClientResponse> {
        let promise = eventLoop.makePromise(of: ClientResponse.self)
        promise.completeWithTask { try await execute(request) }
        return promise.futureResult
    }

    public func delegating(to eventLoop: any EventLoop) -> any Client {
        OfflineBundleClient(
            handle: handle, http: http, eventLoop: eventLoop, threadPool: threadPool, logger: logger, byteBufferAllocator: byteBufferAllocator,
            maxResponseBodySize: maxResponseBodySize, tracer: tracer)
    }

    public func logging(to logger: Logger) -> any Client {
        OfflineBundleClient(
            handle: handle, http: http, eventLoop: eventLoop, threadPool: threadPool, logger: logger, byteBufferAllocator: byteBufferAllocator,
            maxResponseBodySize: maxResponseBodySize, tracer: tracer)
    }

    public func allocating(to byteBufferAllocator: ByteBufferAllocator) -> any Client {
        OfflineBundleClient(
            handle: handle, http: http, eventLoop: eventLoop, threadPool: threadPool, logger: logger, byteBufferAllocator: byteBufferAllocator,
            maxResponseBodySize: maxResponseBodySize, tracer: tracer)
    }

    /// The answer to `request`: from the loader, or from the network, as the policy for its URL says.
    public func execute(_ request: ClientRequest) async throws -> ClientResponse {
        // One loader for the whole request (the wrapper takes the handle's once): a reload meanwhile does not change it.
        var outgoing = HTTPClientRequest(url: request.url.string)
        outgoing.method = request.method
        outgoing.headers = request.headers
        outgoing.body = request.body.map { .bytes($0) }
        // AsyncHTTPClient's wrapper, with the whole body read within the policy's timeout, bounded, and bundle reads on
        // the application's thread pool.
        let pool = threadPool
        let answer = try await OfflineHTTPClient(handle: handle, client: http, tracer: tracer).executeWhole(
            outgoing, timeout: request.timeout, maxBodySize: maxResponseBodySize, hop: BlockingHop { try await pool.runIfActive($0) }, logger: logger)
        return ClientResponse(status: answer.status, headers: answer.headers, body: answer.body, byteBufferAllocator: byteBufferAllocator)
    }
}

extension Application.Clients.Provider {
    /// `req.client` and `app.client` answer from the loader `handle` holds, by its policy; what the policy sends to the
    /// network goes through the application's shared AsyncHTTPClient.
    public static func offlineBundle(_ handle: LoaderHandle) -> Self {
        .init { application in
            application.clients.use { application in
                OfflineBundleClient(
                    handle: handle, http: application.http.client.shared, eventLoop: application.eventLoopGroup.any(),
                    threadPool: application.threadPool, logger: application.logger)
            }
        }
    }

    /// `req.client` and `app.client` answer from `loader`, by its policy.
    public static func offlineBundle(_ loader: OfflineLoader) -> Self { offlineBundle(LoaderHandle(loader)) }
}
