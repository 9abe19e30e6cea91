import Foundation
import HTTPTypes
import Tracing

/// The loader's step for an HTTP client, whatever the client: the plan for the request, the network asked within the
/// policy's timeout, the bundles' answer when the network fails or answers a status that falls back, a bundle-only
/// miss said with the nearest recorded request; each traced. A client supplies only its network call.
extension OfflineLoader {
    /// What answered a request ``load(_:followingRedirects:tracer:network:status:)`` took.
    public enum Loaded<Answer: Sendable>: Sendable {
        /// The bundles, a runtime rule or the last-seen cache: `url` is the one answered (after recorded redirects);
        /// `fallback` when the network was asked first and failed, or answered a status that falls back.
        case bundle(BundleResponse, url: String, fallback: Bool)
        /// The network's answer, as the client's call gave it.
        case network(Answer)
    }

    /// The name of the span ``load(_:followingRedirects:tracer:network:status:)`` makes for each request.
    public static let loadSpanName = "offline-bundle.load"

    /// Answers `request` by the loader's policy, asking the network through `network` only where the policy says so.
    ///
    /// - `bundleOnly`: the bundles (and rules, and the last-seen cache) answer; a miss throws ``BundleError`` with code
    ///   `.notFound` and the nearest recorded request (``explainMiss(_:)``).
    /// - `bundleFirst`: they answer what they have; `network` answers the rest.
    /// - `networkFirst(timeout:)`: `network` answers within the timeout it is given (a client applies it as its own
    ///   deadline, or through ``within(_:_:)``); when it throws, or answers a status ``fallsBack(onStatus:)`` names,
    ///   the bundles answer instead where they can.
    ///
    /// Each call is one span, `offline-bundle.load` (a client span, through `tracer`; `InstrumentationSystem.tracer`
    /// unless given), with the attributes `http.request.method`, `offline_bundle.url` (without its query, which may
    /// hold a token), `offline_bundle.policy` (`bundle-only`, `bundle-first`, `network-first`),
    /// `offline_bundle.outcome` (`hit`, `blocked`, `miss`, `network`, `fallback`, `network-error`),
    /// `offline_bundle.source` (the bundle's label, `rules`, `last-seen` or `network`) and
    /// `http.response.status_code`. `network` runs in the span's context: a client that injects it into its request
    /// (``injectTraceContext(into:tracer:)``) carries the trace to the origin (W3C `traceparent` with swift-otel).
    ///
    /// - Parameters:
    ///   - maxRedirects: recorded redirects followed inside the bundles (a client that follows redirects itself).
    ///   - status: the status of the network's answer.
    /// - Throws: ``BundleError`` (`.notFound`) for a bundle-only miss; what `network` throws when no fallback
    ///   answers.
    public func load<Answer: Sendable>(
        _ request: BundleRequest, followingRedirects maxRedirects: Int = 10, tracer: (any Tracer)? = nil,
        network: @escaping @Sendable (_ timeout: Duration?) async throws -> Answer, status: @escaping @Sendable (Answer) -> Int
    ) async throws -> Loaded<Answer> {
        let tracer = tracer ?? InstrumentationSystem.tracer
        return try await tracer.withSpan(Self.loadSpanName, ofKind: .client) { span in
            trace(request, on: span)
            func answered(_ response: BundleResponse, _ url: String, fallback: Bool) -> Loaded<Answer> {
                Self.trace(response, fallback: fallback, on: span)
                return .bundle(response, url: url, fallback: fallback)
            }
            let (plan, url) = plan(for: request, followingRedirects: maxRedirects)
            switch plan {
            case .answer(let response):
                return answered(response, url, fallback: false)
            case .miss:
                span.attributes["offline_bundle.outcome"] = "miss"
                let why = explainMiss(request).map { ": \($0)" } ?? ""
                // Thrown out of the span, which records it.
                throw BundleError(.notFound, "the bundle has no answer for \(request.method) \(request.url) (policy: bundle only)\(why)")
            case .network(let timeout):
                let answer: Answer
                do {
                    answer = try await network(timeout)
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    if let (response, url) = fallback(for: request, networkAnswered: false, followingRedirects: maxRedirects) {
                        return answered(response, url, fallback: true)
                    }
                    span.attributes["offline_bundle.outcome"] = "network-error"
                    throw error
                }
                let code = status(answer)
                if fallsBack(onStatus: code), let (response, url) = fallback(for: request, networkAnswered: true, followingRedirects: maxRedirects) {
                    return answered(response, url, fallback: true)
                }
                Self.trace(networkStatus: code, on: span)
                return .network(answer)
            }
        }
    }

    /// The load span's attributes for `request`: its method, its URL without the query, the policy for it.
    package func trace(_ request: BundleRequest, on span: any Span) {
        guard span.isRecording else { return }
        span.attributes["http.request.method"] = request.method
        span.attributes["offline_bundle.url"] = Self.withoutQuery(request.url)
        span.attributes["offline_bundle.policy"] = Self.name(of: policy(for: request.url))
    }

    /// The load span's attributes for an answer from the bundles, a rule or the last-seen cache.
    package static func trace(_ response: BundleResponse, fallback: Bool, on span: any Span) {
        guard span.isRecording else { return }
        let blocked = response.source == .rule && response.status == 204
        span.attributes["offline_bundle.outcome"] = fallback ? "fallback" : blocked ? "blocked" : "hit"
        span.attributes["offline_bundle.source"] = response.source.description
        span.attributes["http.response.status_code"] = response.status
    }

    /// The load span's attributes for the network's answer, of status `code`.
    package static func trace(networkStatus code: Int, on span: any Span) {
        guard span.isRecording else { return }
        span.attributes["offline_bundle.outcome"] = "network"
        span.attributes["offline_bundle.source"] = "network"
        span.attributes["http.response.status_code"] = code
    }

    /// Writes the current trace context (the span ``load(_:followingRedirects:tracer:network:status:)`` runs the
    /// network call in) into `fields`, as `tracer`'s propagation says: W3C `traceparent` and `tracestate` with
    /// swift-otel.
    public static func injectTraceContext(into fields: inout HTTPFields, tracer: (any Tracer)? = nil) {
        guard let context = ServiceContext.current else { return }
        (tracer ?? InstrumentationSystem.tracer).inject(context, into: &fields, using: HTTPFieldsInjector())
    }

    struct HTTPFieldsInjector: Injector {
        func inject(_ value: String, forKey key: String, into fields: inout HTTPFields) {
            guard let name = HTTPField.Name(key) else { return }
            fields[name] = value
        }
    }

    /// What `work` returns, or `URLError(.timedOut)` once `timeout` has passed (the work is then cancelled): the
    /// timeout of ``load(_:followingRedirects:tracer:network:status:)`` for a network call that takes none.
    public static func within<T: Sendable>(_ timeout: Duration?, _ work: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let timeout else { return try await work() }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await work() }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw URLError(.timedOut) }
            return value
        }
    }

    static func name(of policy: OfflinePolicy) -> String {
        switch policy {
        case .bundleOnly: "bundle-only"
        case .bundleFirst: "bundle-first"
        case .networkFirst: "network-first"
        }
    }

    static func withoutQuery(_ url: String) -> String {
        String(url[..<(url.utf8.firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? url.endIndex)])
    }
}
