import Foundation
import HTTPTypes
import OfflineBundle
import OpenAPIRuntime

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
/// fails the call. With a last-seen cache (`LoaderOptions.lastSeen`), a 200 the network answers may be kept.
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

    /// A transport that answers from the loader `handle` holds and sends the rest to `upstream`.
    public init(handle: LoaderHandle, upstream: (any ClientTransport)? = nil) {
        self.handle = handle
        self.upstream = upstream
    }

    /// A transport that answers from `loader` and sends the rest to `upstream`.
    public init(loader: OfflineLoader, upstream: (any ClientTransport)? = nil) {
        self.init(handle: LoaderHandle(loader), upstream: upstream)
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
        let (plan, answered) = loader.plan(for: bundleRequest, followingRedirects: 10)
        switch plan {
        case .miss:
            let why = loader.explainMiss(bundleRequest).map { ": \($0)" } ?? ""
            throw BundleError(.notFound, "the bundle has no answer for \(operationID), \(request.method.rawValue) \(url) (policy: bundle only)\(why)")
        case .answer(let answer):
            return try await Self.respond(answer, url: answered, loader: loader)
        case .network(let timeout):
            guard let upstream else {
                throw BundleError(.notFound, "the policy sends \(operationID), \(request.method.rawValue) \(url), to the network, and this transport has none")
            }
            let response: HTTPResponse
            var responseBody: HTTPBody?
            do {
                (response, responseBody) = try await Self.within(timeout) { [body] in
                    try await upstream.send(request, body: body, baseURL: baseURL, operationID: operationID)
                }
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                if let (fallback, url) = loader.fallback(for: bundleRequest, networkAnswered: false, followingRedirects: 10) {
                    return try await Self.respond(fallback, url: url, loader: loader)
                }
                throw error
            }
            let status = response.status.code
            if loader.fallsBack(onStatus: status), let (fallback, url) = loader.fallback(for: bundleRequest, networkAnswered: true, followingRedirects: 10) {
                return try await Self.respond(fallback, url: url, loader: loader)
            }
            // Kept for next time where the last-seen cache may: a body of known length within its entry limit is read
            // whole, then handed on (one of unknown length streams through, not kept).
            if status == 200, loader.mayRemember(bundleRequest), let streamed = responseBody, let lastSeen = loader.options.lastSeen,
                case .known(let length) = streamed.length, length <= lastSeen.maxEntryBytes
            {
                let bytes = try await Data(collecting: streamed, upTo: Int(length))
                loader.remember(bundleRequest, status: 200, headers: response.headerFields, body: bytes)
                responseBody = HTTPBody(bytes)
            }
            return (response, responseBody)
        }
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
        let bytes: Data
        do {
            bytes = try await withCheckedThrowingContinuation { done in
                DispatchQueue.global().async { done.resume(with: Result { try answer.bodyData() }) }
            }
        } catch {
            loader.recordError(error, url: url)
            throw error
        }
        let response = HTTPResponse(status: .init(code: answer.status), headerFields: answer.headers)
        return (response, answer.status == 204 || answer.status == 304 ? nil : HTTPBody(bytes))
    }

    /// What `work` returns, or a timeout error once `timeout` has passed (the work is then cancelled).
    static func within<T: Sendable>(_ timeout: Duration?, _ work: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let timeout else { return try await work() }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await work() }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw URLError(.timedOut)
            }
            return value
        }
    }
}
