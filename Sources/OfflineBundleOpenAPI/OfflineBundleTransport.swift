import Foundation
import HTTPTypes
import OfflineBundle
import OpenAPIRuntime
import Tracing

/// A swift-openapi-runtime `ClientTransport` that answers a generated OpenAPI client's calls from a loader's bundles,
/// by the loader's policy, and hands what the policy sends to the network to an inner transport (the AsyncHTTPClient or
/// URLSession transport):
///
/// - `bundleOnly`: only the loader answers; a miss fails with `BundleError` (code `.notFound`), said with the nearest
///   recorded request, and nothing reaches the network.
/// - `bundleFirst`: the loader answers what it has; the rest goes to the inner transport.
/// - `networkFirst(timeout:)`: the inner transport answers; when it fails, answers 5xx (or a status in
///   `LoaderOptions.fallbackStatuses`), or sends no head within the timeout, the loader answers instead.
///
/// A request's URL is the server URL followed by the operation's path, as the generated client means it. Its body is
/// read (at most `BundleRequest.maxBodySize` bytes) only where the bundles recorded answers chosen by one, and then
/// matched as the bundle's `match` rules say (canonical JSON or GraphQL, say). Answers from a bundle carry the recorded
/// status and headers, follow recorded redirects (10 hops), and come back as identity (`Accept-Encoding` is left out);
/// their body is read whole and checked, off Swift's cooperative pool, before the response is returned: a damaged one
/// fails the call. With a last-seen cache (`LoaderOptions.lastSeen`), a 200 the network answers is kept (where the cache
/// may keep it) once the generated client has read its body to the end. Each call is a span (`OfflineLoader.load`:
/// where the answer came from, and why), and the trace context goes on to the inner transport's request headers.
///
/// ```swift
/// let loader = try OfflineLoader(path: "api.bundle.zip", policy: .bundleFirst)
/// let client = Client(serverURL: try Servers.Server1.url(), transport: OfflineBundleTransport(loader: loader, upstream: AsyncHTTPClientTransport()))
/// ```
public struct OfflineBundleTransport: ClientTransport {
    /// Where the loader comes from; a `BundleReloader` may replace it.
    public let handle: LoaderHandle
    /// What the policy sends to the network; nil when nothing may go there (a call the loader does not answer fails).
    public let upstream: (any ClientTransport)?
    /// Where each call's span goes (`OfflineLoader.load`'s `offline-bundle.load`); nil: `InstrumentationSystem.tracer`.
    public let tracer: (any Tracer)?

    /// A transport that answers from the loader `handle` holds and sends the rest to `upstream`, tracing each call
    /// through `tracer` (the bootstrapped one unless given) and carrying the trace to `upstream`'s requests.
    public init(handle: LoaderHandle, upstream: (any ClientTransport)? = nil, tracer: (any Tracer)? = nil) {
        self.handle = handle
        self.upstream = upstream
        self.tracer = tracer
    }

    /// A transport that answers from `loader` and sends the rest to `upstream`.
    public init(loader: OfflineLoader, upstream: (any ClientTransport)? = nil, tracer: (any Tracer)? = nil) {
        self.init(handle: LoaderHandle(loader), upstream: upstream, tracer: tracer)
    }

    public func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
        // One loader for the whole call: a reload meanwhile does not change what answers it.
        let loader = handle.loader
        let url = Self.url(of: request, baseURL: baseURL)
        var fields = request.headerFields
        fields[.acceptEncoding] = nil
        var bundleRequest = BundleRequest(method: request.method.rawValue, url: url, headers: fields)
        var body = body
        if let sent = body, loader.matchesBody(method: request.method.rawValue, url: url) {
            // Read once for matching; the inner transport gets the same bytes.
            let bytes = try await Data(collecting: sent, upTo: BundleRequest.maxBodySize)
            bundleRequest.body = bytes
            body = HTTPBody(bytes)
        }
        let upstream = self.upstream
        let tracer = self.tracer
        let outgoing = body
        let loaded: OfflineLoader.Loaded<Response>
        do {
            loaded = try await loader.load(bundleRequest, followingRedirects: 10, tracer: tracer) { timeout in
                guard let upstream else {
                    throw BundleError(
                        .notFound, "the policy sends \(operationID), \(request.method.rawValue) \(url), to the network, and this transport has none")
                }
                // The trace goes on to the origin with the request.
                var traced = request
                OfflineLoader.injectTraceContext(into: &traced.headerFields, tracer: tracer)
                let sent = traced
                let (response, body) = try await OfflineLoader.within(timeout) {
                    try await upstream.send(sent, body: outgoing, baseURL: baseURL, operationID: operationID)
                }
                return Response(head: response, body: body)
            } status: {
                $0.head.status.code
            }
        } catch let error as BundleError where error.code == .notFound && loader.policy(for: url) == .bundleOnly {
            // The loader's miss, said for the operation the generated client called.
            throw BundleError(.notFound, "\(operationID): " + error.message)
        }
        switch loaded {
        case .bundle(let answer, let answered, _):
            return try await Self.respond(answer, url: answered, loader: loader)
        case .network(let answer):
            // Kept for next time where the last-seen cache may, as its body passes (``OfflineBundle/RecordedBody``).
            let head = answer.head
            guard let body = answer.body,
                let recording = LastSeenRecording(loader: loader, request: bundleRequest, status: head.status.code, headers: head.headerFields)
            else { return (head, answer.body) }
            return (head, HTTPBody(RecordedBody(body, recording: recording), length: body.length, iterationBehavior: body.iterationBehavior))
        }
    }

    /// The inner transport's answer, carried through the loader's step.
    struct Response: Sendable {
        var head: HTTPResponse
        var body: HTTPBody?
    }

    /// The server URL followed by the operation's path and query, as the generated client means them.
    static func url(of request: HTTPRequest, baseURL: URL) -> String {
        var base = baseURL.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        let path = request.path ?? "/"
        return base + (path.hasPrefix("/") ? path : "/" + path)
    }

    /// `answer` as the runtime's response, its body read whole (and checked) off the cooperative pool.
    static func respond(_ answer: BundleResponse, url: String, loader: OfflineLoader) async throws -> (HTTPResponse, HTTPBody?) {
        let bytes = try await loader.clientBody(of: answer, url: url, hop: .dispatch, chunkSize: answer.wholeChunkSize).collected()
        let response = HTTPResponse(status: .init(code: answer.status), headerFields: answer.headers)
        return (response, answer.status == 204 || answer.status == 304 ? nil : HTTPBody(bytes))
    }
}
