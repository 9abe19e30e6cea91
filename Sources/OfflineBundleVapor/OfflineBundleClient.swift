import AsyncHTTPClient
import Foundation
import HTTPFieldsNIO
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflineBundle
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
        // One loader for the whole request: a reload meanwhile does not change what answers it.
        let loader = handle.loader
        let url = request.url.string
        let fields = HTTPFields(request.headers) { $0.lowercased() == "accept-encoding" }
        var bundleRequest = BundleRequest(method: request.method.rawValue, url: url, headers: fields)
        // The body is in memory already; the bundles look at it only where they recorded answers chosen by one.
        if let body = request.body, loader.matchesBody(method: request.method.rawValue, url: url) {
            bundleRequest.body = Data(body.readableBytesView)
        }
        var building = HTTPClientRequest(url: url)
        building.method = request.method
        building.headers = request.headers
        building.body = request.body.map { .bytes($0) }
        let outgoing = building
        let (http, logger, tracer, maxResponseBodySize, requested) = (self.http, self.logger, self.tracer, self.maxResponseBodySize, request.timeout)
        // The loader's step: the policy, the fallbacks, a span; the network call applies the policy's timeout itself.
        let loaded = try await loader.load(bundleRequest, followingRedirects: 10, tracer: tracer) { limit -> NetworkOutcome in
            let timeout = limit.map { min(requested ?? .nanoseconds(Int64.max), TimeAmount(saturating: $0)) } ?? requested
            var traced = outgoing
            var fields = HTTPFields()
            OfflineLoader.injectTraceContext(into: &fields, tracer: tracer)
            for field in fields { traced.headers.replaceOrAdd(name: field.name.canonicalName, value: field.value) }
            let sent = traced
            do {
                // The timeout covers the whole answer, body included: AsyncHTTPClient's deadline ends with the head.
                return try await Self.within(timeout) { [timeout] () -> NetworkOutcome in
                    let deadline = timeout.map { NIODeadline.now() + $0 } ?? .distantFuture
                    let response = try await http.execute(sent, deadline: deadline, logger: logger)
                    return .answered(response, try await response.body.collect(upTo: maxResponseBodySize))
                }
            } catch let error as NIOTooManyBytesError {
                // The network answered, past what is held: not a failure the bundle stands in for.
                return .tooLarge(error)
            }
        } status: { (outcome: NetworkOutcome) -> Int in
            if case .answered(let response, _) = outcome { return Int(response.status.code) }
            return 200
        }
        switch loaded {
        case .bundle(let answer, let url, _):
            return try await respond(answer, url: url, loader: loader)
        case .network(.tooLarge(let error)):
            throw error
        case .network(.answered(let response, let body)):
            // A response reached by following redirects answers another URL: it is not kept for this one.
            if response.status.code == 200, response.history.count <= 1, loader.mayRemember(bundleRequest) {
                loader.remember(bundleRequest, status: 200, headers: HTTPFields(response.headers), body: Data(body.readableBytesView))
            }
            return ClientResponse(status: response.status, headers: response.headers, body: body, byteBufferAllocator: byteBufferAllocator)
        }
    }

    /// What the network gave: a response and its body, or a body past ``maxResponseBodySize`` (thrown, never answered
    /// by the bundle instead).
    enum NetworkOutcome: Sendable {
        case answered(HTTPClientResponse, ByteBuffer)
        case tooLarge(NIOTooManyBytesError)
    }

    /// What `work` returns, or a timeout error once `timeout` has passed (the work is then cancelled).
    private static func within<T: Sendable>(_ timeout: TimeAmount?, _ work: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let timeout else { return try await work() }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await work() }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(max(0, timeout.nanoseconds)))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw HTTPClientError.deadlineExceeded }
            return value
        }
    }

    /// `answer` as Vapor's response, its body read whole (and checked) on the thread pool unless it is in memory.
    private func respond(_ answer: BundleResponse, url: String, loader: OfflineLoader) async throws -> ClientResponse {
        let pool = threadPool
        let body = try await loader.clientBody(
            of: answer, url: url, hop: BlockingHop { try await pool.runIfActive($0) }, chunkSize: answer.wholeChunkSize
        ).collected()
        var buffer = byteBufferAllocator.buffer(capacity: body.count)
        buffer.writeBytes(body)
        let hasBody = !(answer.status == 204 || answer.status == 304) || !body.isEmpty
        return ClientResponse(
            status: HTTPResponseStatus(statusCode: answer.status), headers: HTTPHeaders(answer.headers), body: hasBody ? buffer : nil,
            byteBufferAllocator: byteBufferAllocator)
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
