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
    /// `offline_bundle.outcome` (`hit`, `blocked`, `miss`, `network`, `fallback`, `network-error`, `cancelled`; a miss,
    /// a network error and a cancellation record the error and set the span's status to error),
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
        switch try begin(request, followingRedirects: maxRedirects, tracer: tracer) {
        case .bundle(let response, let url):
            return .bundle(response, url: url, fallback: false)
        case .network(let pending):
            let outcome: Result<Answer, any Error>
            do {
                outcome = .success(try await ServiceContext.withValue(pending.context) { try await network(pending.timeout) })
            } catch {
                outcome = .failure(error)
            }
            return try pending.settle(outcome, status: status)
        }
    }

    /// How a request's step begins (``begin(_:followingRedirects:tracer:)``): answered here, or sent to the network.
    public enum LoadStart: Sendable {
        /// The bundles, a runtime rule or the last-seen cache answer; `url` is the one answered. The span has ended.
        case bundle(BundleResponse, url: String)
        /// The policy sends the request to the network: the client asks it, then hands what came back to
        /// ``PendingLoad/settle(_:status:)``.
        case network(PendingLoad)
    }

    /// A request the policy sent to the network, its span still open: what the client needs to ask the network, and
    /// the step's end once it has.
    public struct PendingLoad: Sendable {
        /// The policy's timeout for the network's answer (network-first), nil for none.
        public let timeout: Duration?
        /// The load span's context: a client injects it into the request it sends (`Tracer.inject`).
        public let context: ServiceContext
        let loader: OfflineLoader
        let request: BundleRequest
        let maxRedirects: Int
        let span: any Span

        /// The step's end: the network's answer, unless it failed or answered a status that falls back and the bundles
        /// answer instead. Ends the span before it returns or throws.
        ///
        /// - Throws: the network's error when no fallback answers (`CancellationError` as it is).
        public func settle<Answer: Sendable>(_ outcome: Result<Answer, any Error>, status: (Answer) -> Int) throws -> Loaded<Answer> {
            defer { span.end() }
            return try ServiceContext.withValue(span.context) { try settled(outcome, status: status) }
        }

        private func settled<Answer: Sendable>(_ outcome: Result<Answer, any Error>, status: (Answer) -> Int) throws -> Loaded<Answer> {
            func answered(_ response: BundleResponse, _ url: String) -> Loaded<Answer> {
                OfflineLoader.trace(response, fallback: true, on: span)
                return .bundle(response, url: url, fallback: true)
            }
            switch outcome {
            case .failure(let error as CancellationError):
                OfflineLoader.failed(span, error, outcome: "cancelled")
                throw error
            case .failure(let error):
                if let (response, url) = loader.fallback(for: request, networkAnswered: false, followingRedirects: maxRedirects) {
                    return answered(response, url)
                }
                OfflineLoader.failed(span, error, outcome: "network-error")
                throw error
            case .success(let answer):
                let code = status(answer)
                if loader.fallsBack(onStatus: code),
                    let (response, url) = loader.fallback(for: request, networkAnswered: true, followingRedirects: maxRedirects)
                {
                    return answered(response, url)
                }
                OfflineLoader.trace(networkStatus: code, on: span)
                return .network(answer)
            }
        }

        /// The step's end when the request was cancelled before the network answered: the span records it (outcome
        /// `cancelled`) and ends.
        public func cancel() {
            OfflineLoader.failed(span, CancellationError(), outcome: "cancelled")
            span.end()
        }
    }

    /// The step of ``load(_:followingRedirects:tracer:network:status:)`` up to the network, for a client that cannot
    /// await (a callback API such as `URLProtocol`): the span begun in the current context, the plan for the request,
    /// and the bundles' answer, or what the client needs to ask the network and end the step.
    ///
    /// - Throws: ``BundleError`` (`.notFound`) for a bundle-only miss, said with the nearest recorded request.
    public func begin(_ request: BundleRequest, followingRedirects maxRedirects: Int = 10, tracer: (any Tracer)? = nil) throws -> LoadStart {
        let tracer = tracer ?? InstrumentationSystem.tracer
        let span = tracer.startSpan(Self.loadSpanName, context: ServiceContext.current ?? .topLevel, ofKind: .client)
        trace(request, on: span)
        // The bundles' lookups run in the span's context, as the network call does.
        let (planned, url) = ServiceContext.withValue(span.context) { self.plan(for: request, followingRedirects: maxRedirects) }
        switch planned {
        case .answer(let response):
            Self.trace(response, fallback: false, on: span)
            span.end()
            return .bundle(response, url: url)
        case .miss:
            let why = ServiceContext.withValue(span.context) { self.explainMiss(request) }.map { ": \($0)" } ?? ""
            let error = BundleError(.notFound, "the bundle has no answer for \(request.method) \(request.url) (policy: bundle only)\(why)")
            Self.failed(span, error, outcome: "miss")
            span.end()
            throw error
        case .network(let timeout):
            return .network(PendingLoad(timeout: timeout, context: span.context, loader: self, request: request, maxRedirects: maxRedirects, span: span))
        }
    }

    /// A load span's end in error: its outcome, the error recorded, and the error status (what tracing backends count
    /// failures by).
    static func failed(_ span: any Span, _ error: any Error, outcome: String) {
        span.attributes["offline_bundle.outcome"] = outcome
        span.recordError(error)
        span.setStatus(SpanStatus(code: .error))
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
