import Foundation
import HTTPTypes
import OfflineBundle
import Synchronization
import Tracing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(CDispatchQueue)
    internal import CDispatchQueue
#endif

/// A `URLProtocol` that answers URLSession requests from an ``OfflineBundle/OfflineLoader``, by its policy.
///
/// A `URLProtocol` class is registered by type, so the loader it asks is one
/// for the whole process: install it once at launch with
/// ``installProcessWide(_:fallbackSession:tracer:)`` (or
/// `configuration.useProcessWideOfflineBundle(loader)`), and every
/// configuration that lists the protocol answers from it. Installing a second,
/// different loader is refused until ``uninstallProcessWide()``.
///
/// It takes http and https requests. What the bundle cannot answer (by
/// policy) goes to the network through the fallback session (the caller's,
/// with its proxies, cookies and TLS settings, when one was given), and in
/// bundle-only mode a miss fails with `URLError(.resourceUnavailable)`.
///
/// Every call to the URLSession client is made on the queue URLSession called
/// `startLoading()` on. swift-corelibs-foundation requires this: its client
/// methods read the session's task registry without a lock, so a call from any
/// other thread races with the session's other tasks (that race crashed the
/// process under concurrent requests). Hence:
/// - bundle answers are given synchronously inside `startLoading()`;
/// - under `.bundleFirst`, a URL that neither the rules nor the bundles
///   answer, when there is no last-seen cache to keep its answer in, is not
///   taken by this protocol at all (`canInit` says no), and URLSession's own
///   HTTP stack fetches it;
/// - a request the loader's plan sends to the network (network-first, or a
///   bundle-first entry past its maximum age) gets the network's answer, or
///   the loader's fallback when the network fails, answers 5xx (or a status
///   in `fallbackStatuses`) or takes longer than the policy's timeout, handed
///   over on the queue `startLoading()` ran on, kept for that purpose. Nothing waits: on Linux every URLSession shares one serial
///   queue, so waiting there would stop them all.
public final class OfflineURLProtocol: URLProtocol {
    private struct Installed {
        var loader: OfflineLoader
        var network: URLSession
        var tracer: (any Tracer)?
    }

    /// Process-wide: URLSession creates protocol instances itself, so the loader cannot be handed to them.
    private static let installed = Mutex<Installed?>(nil)
    /// Guards `networkTask` and `stopped`, which `stopLoading()` touches from the thread that cancels.
    private let stateLock = NSLock()
    private var networkTask: URLSessionDataTask?
    private var stopped = false

    /// Makes `loader` the one this protocol asks, for the whole process.
    ///
    /// - Parameters:
    ///   - fallbackSession: the session network requests go through (network-first answers); by default an
    ///     ephemeral session of its own. It must not list this protocol.
    ///   - tracer: where each request this protocol takes is traced (`OfflineLoader.loadSpanName`, the attributes
    ///     `OfflineLoader.load` gives); nil: `InstrumentationSystem.tracer`. A request sent to the network carries the
    ///     trace in its headers.
    /// - Throws: `BundleError` with code `.invalidArgument` when another loader is installed (installing the same one
    ///   again is allowed, and replaces the fallback session and tracer), or when the fallback session lists this
    ///   protocol.
    public static func installProcessWide(_ loader: OfflineLoader, fallbackSession: URLSession? = nil, tracer: (any Tracer)? = nil) throws {
        if let fallbackSession, (fallbackSession.configuration.protocolClasses ?? []).contains(where: { $0 == OfflineURLProtocol.self }) {
            throw BundleError(
                .invalidArgument, "the fallback session lists OfflineURLProtocol, so network requests would come back to the bundle; give it a plain session")
        }
        try installed.withLock { installed in
            if let current = installed, current.loader !== loader {
                throw BundleError(
                    .invalidArgument,
                    "another OfflineLoader is installed for this process; call OfflineURLProtocol.uninstallProcessWide() first")
            }
            installed = Installed(
                loader: loader, network: fallbackSession ?? installed?.network ?? URLSession(configuration: .ephemeral), tracer: tracer ?? installed?.tracer)
        }
    }

    /// Removes the installed loader; requests this protocol would have taken then go to the network.
    public static func uninstallProcessWide() { installed.withLock { $0 = nil } }

    /// The installed loader, if any.
    public static var processWideLoader: OfflineLoader? { installed.withLock { $0?.loader } }

    private static var current: Installed? { installed.withLock { $0 } }
    static var loader: OfflineLoader? { current?.loader }

    public override class func canInit(with request: URLRequest) -> Bool {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", let loader else { return false }
        // A bundle-first URL that nothing here answers goes to URLSession's own HTTP stack, with the app's session,
        // delegates and cookies: nothing for this protocol to add (a block rule answers it here, whatever the method).
        if loader.policy(for: url.absoluteString) == .bundleFirst {
            // A streamed body is not read here (the stream is read once): the protocol takes the request, and sends it
            // to the network itself, with the body it read, when the bundle has no answer.
            if request.httpBody == nil, request.httpBodyStream != nil, loader.matchesBody(method: request.httpMethod ?? "GET", url: url.absoluteString) {
                return true
            }
            return loader.hasEntry(for: bundleRequest(request, url: url))
        }
        return true
    }

    public override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    public override func startLoading() {
        guard let client, let installed = Self.current, let url = request.url else {
            client?.urlProtocol(self, didFailWithError: URLError(.unsupportedURL))
            return
        }
        let loader = installed.loader
        let streamed = Self.streamedBody(of: request, url: url, loader: loader)
        let bundleRequest = Self.bundleRequest(request, url: url, collectedBody: streamed)
        // One span per request, as OfflineLoader.load makes: begun here, ended just before the answer is handed over.
        let tracer = installed.tracer ?? InstrumentationSystem.tracer
        let span = tracer.startSpan(OfflineLoader.loadSpanName, context: ServiceContext.current ?? .topLevel, ofKind: .client)
        loader.trace(bundleRequest, on: span)
        switch loader.plan(for: bundleRequest, followingRedirects: Self.redirectsFollowedHere) {
        case (.miss, _):
            let error = URLError(.resourceUnavailable, userInfo: [NSLocalizedDescriptionKey: "not in the offline bundle: \(url)"])
            span.attributes["offline_bundle.outcome"] = "miss"
            span.recordError(error)
            span.end()
            client.urlProtocol(self, didFailWithError: error)
        case (.answer(let answer), let finalURL):
            OfflineLoader.trace(answer, fallback: false, on: span)
            span.end()
            deliver(self.answer(answer, loader: loader, url: url, finalURL: finalURL), to: client)
        case (.network(let limit), _):
            let queue = CallerQueue.current()
            let handle = Carried(self)
            let seconds = limit.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 } ?? request.timeoutInterval
            fetch(through: installed.network, timeout: min(seconds, request.timeoutInterval), body: streamed, trace: (tracer, span.context)) { outcome in
                queue.async {
                    let this = handle.value
                    // The span ends before the client hears of the answer: once the caller has it, its span is finished
                    // (a tracer read right after the request found the last one still open).
                    // On the task's queue again: a cancel() ran stopLoading here first, or not at all.
                    guard let client = this.client, !this.stateLock.withLock({ this.stopped }) else { return span.end() }
                    let fallback: (response: BundleResponse, url: String)?
                    switch outcome {
                    case .answer(let response, let data):
                        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
                        if loader.fallsBack(onStatus: status),
                            let answer = loader.fallback(for: bundleRequest, networkAnswered: true, followingRedirects: Self.redirectsFollowedHere)
                        {
                            fallback = answer
                        } else {
                            if status == 200, let http = response as? HTTPURLResponse {
                                Self.remember(http, data: data, for: bundleRequest, loader: loader, session: installed.network)
                            }
                            OfflineLoader.trace(networkStatus: status, on: span)
                            span.end()
                            this.deliver(.network(response, data), to: client)
                            return
                        }
                    case .failed(let error):
                        fallback = loader.fallback(for: bundleRequest, networkAnswered: false, followingRedirects: Self.redirectsFollowedHere)
                        guard fallback != nil else {
                            span.attributes["offline_bundle.outcome"] = "network-error"
                            span.recordError(error)
                            span.end()
                            client.urlProtocol(this, didFailWithError: error)
                            return
                        }
                    }
                    guard let (answer, finalURL) = fallback else { return span.end() }
                    OfflineLoader.trace(answer, fallback: true, on: span)
                    span.end()
                    this.deliver(this.answer(answer, loader: loader, url: url, finalURL: finalURL), to: client)
                }
            }
        }
    }

    /// swift-corelibs-foundation cannot follow a redirect a protocol reports, so recorded hops are followed inside the
    /// bundle and the final response is delivered; on Apple platforms URLSession follows them.
    #if canImport(FoundationNetworking)
        private static let redirectsFollowedHere = 10
    #else
        private static let redirectsFollowedHere = 0
    #endif

    /// The request as the loader sees it. Accept-Encoding is left out: URLSession does not decode what a protocol
    /// hands it, so bodies go out as identity.
    /// A body given as `httpBody` is matched as it is; one given as a stream is read only when a bundle recorded an
    /// answer to a body at this URL and method (``OfflineLoader/matchesBody(method:url:)``), and then kept in
    /// ``collectedBody`` for the network.
    private static func bundleRequest(_ request: URLRequest, url: URL, collectedBody: Data? = nil) -> BundleRequest {
        var headers = HTTPFields()
        for (name, value) in request.allHTTPHeaderFields ?? [:] where name.lowercased() != "accept-encoding" {
            if let fieldName = HTTPField.Name(name) { headers.append(HTTPField(name: fieldName, value: value)) }
        }
        return BundleRequest(method: request.httpMethod ?? "GET", url: url.absoluteString, headers: headers, body: collectedBody ?? request.httpBody)
    }

    /// The bytes of a request body given as a stream, when a bundle may match them (nil otherwise).
    private static func streamedBody(of request: URLRequest, url: URL, loader: OfflineLoader) -> Data? {
        guard request.httpBody == nil, let stream = request.httpBodyStream, loader.matchesBody(method: request.httpMethod ?? "GET", url: url.absoluteString)
        else { return nil }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        stream.open()
        defer { stream.close() }
        while true {
            let n = stream.read(&chunk, maxLength: chunk.count)
            if n <= 0 { break }
            data.append(contentsOf: chunk[0..<n])
        }
        return data
    }

    /// Keeps a network response in the loader's last-seen cache (URLSession has decoded its body), written off the
    /// task's queue. Not kept: a response reached by following redirects (it answers another URL), and one to a
    /// request the session sent cookies with (they are not among the request's own headers).
    private static func remember(_ response: HTTPURLResponse, data: Data, for request: BundleRequest, loader: OfflineLoader, session: URLSession) {
        guard loader.mayRemember(request), response.url?.absoluteString == request.url else { return }
        if let url = response.url, session.configuration.httpShouldSetCookies,
            session.configuration.httpCookieStorage?.cookies(for: url)?.isEmpty == false
        {
            return
        }
        var headers = HTTPFields()
        for (name, value) in response.allHeaderFields {
            // The body was decoded: its encoding and length no longer describe it.
            guard let name = name as? String, let value = value as? String, !["content-encoding", "content-length"].contains(name.lowercased()),
                let fieldName = HTTPField.Name(name)
            else { continue }
            headers.append(HTTPField(name: fieldName, value: value))
        }
        let status = response.statusCode
        let kept = headers
        DispatchQueue.global().async { loader.remember(request, status: status, headers: kept, body: data) }
    }

    public override func stopLoading() {
        // Nothing is reported from here: URLSession's cancel() reports the cancellation itself.
        let task = stateLock.withLock {
            stopped = true
            return networkTask
        }
        task?.cancel()
    }

    /// What to hand the client.
    private enum Answer {
        case network(URLResponse, Data)
        /// The chunks read (and checked) before the response is handed over, and the reader of the rest of a large body.
        case bundle(HTTPURLResponse, [Data], rest: BodyReader?, redirect: URLRequest?)
        case failure(any Error)
    }

    /// Hands one answer to the client, on the calling thread, once.
    private func deliver(_ answer: Answer, to client: any URLProtocolClient) {
        switch answer {
        case .network(let response, let data):
            client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            // One didLoad with the whole body: corelibs-foundation keeps only the last chunk a protocol loads.
            if !data.isEmpty { client.urlProtocol(self, didLoad: data) }
            client.urlProtocolDidFinishLoading(self)
        case .bundle(let response, let chunks, let rest, let redirect):
            if let redirect {
                client.urlProtocol(self, wasRedirectedTo: redirect, redirectResponse: response)
                return
            }
            #if canImport(FoundationNetworking)
                // swift-corelibs-foundation keeps only the last piece a protocol loads for a task with a completion
                // handler: the body goes over in one piece, read (and checked) chunk by chunk first.
                var body = chunks.reduce(Data(), +)
                do {
                    while let chunk = try rest?.next() { body.append(chunk) }
                } catch {
                    Self.current?.loader.recordError(error, url: response.url?.absoluteString ?? "")
                    client.urlProtocol(self, didFailWithError: URLError(.cannotDecodeContentData, userInfo: [NSLocalizedDescriptionKey: "\(error)"]))
                    return
                }
                client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
                if !body.isEmpty { client.urlProtocol(self, didLoad: body) }
            #else
                client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
                for chunk in chunks where !chunk.isEmpty { client.urlProtocol(self, didLoad: chunk) }
                // A large body streams on, chunk by chunk; one that fails its check ends the load as an error.
                if let rest {
                    do {
                        while let chunk = try rest.next() { client.urlProtocol(self, didLoad: chunk) }
                    } catch {
                        Self.current?.loader.recordError(error, url: response.url?.absoluteString ?? "")
                        client.urlProtocol(
                            self, didFailWithError: URLError(.cannotDecodeContentData, userInfo: [NSLocalizedDescriptionKey: "\(error)"]))
                        return
                    }
                }
            #endif
            client.urlProtocolDidFinishLoading(self)
        case .failure(let error):
            client.urlProtocol(self, didFailWithError: error)
        }
    }

    /// What to hand the client for the loader's `answer` to the request for `url`, which answers `finalURL`.
    private func answer(_ answer: BundleResponse, loader: OfflineLoader, url: URL, finalURL finalString: String) -> Answer {
        let finalURL = URL(string: finalString) ?? url
        do {
            // The first chunk (for most pages, the whole body) is read and checked before the response is handed over.
            let opened = try answer.openBody()
            let reader = opened?.reader
            let chunks = opened?.chunks ?? [Data()]
            var fields: [String: String] = [:]
            for field in answer.headers { fields[field.name.canonicalName] = fields[field.name.canonicalName].map { $0 + ", " + field.value } ?? field.value }
            guard let response = HTTPURLResponse(url: finalURL, statusCode: answer.status, httpVersion: "HTTP/1.1", headerFields: fields) else {
                return .failure(URLError(.badServerResponse))
            }
            #if !canImport(FoundationNetworking)
                // On Apple platforms URLSession follows a recorded redirect as it follows a network one.
                if (300...399).contains(answer.status), answer.status != 304, let location = answer.header("location"),
                    let target = URL(string: location, relativeTo: url)?.absoluteURL
                {
                    var next = request
                    next.url = target
                    return .bundle(response, [], rest: nil, redirect: next)
                }
            #endif
            return .bundle(response, chunks, rest: opened?.second == nil ? nil : reader, redirect: nil)
        } catch {
            loader.recordError(error, url: url.absoluteString)
            return .failure(URLError(.cannotDecodeContentData, userInfo: [NSLocalizedDescriptionKey: "\(error)"]))
        }
    }

    /// Fetches from the network; `done` is called once, on URLSession's callback queue.
    ///
    /// The task is created and resumed from another thread: creating a task does a synchronous hop onto the
    /// queue every corelibs-foundation session shares, which this thread holds while in `startLoading()`.
    private func fetch(
        through network: URLSession, timeout: TimeInterval, body: Data? = nil, trace: (tracer: any Tracer, context: ServiceContext),
        done: @escaping @Sendable (NetworkOutcome) -> Void
    ) {
        var networkRequest = request
        networkRequest.timeoutInterval = timeout
        // The trace goes on to the origin with the request.
        trace.tracer.inject(trace.context, into: &networkRequest, using: URLRequestInjector())
        // A streamed body read to match it against the bundle goes out as the bytes read.
        if let body { networkRequest.httpBody = body }
        let handle = Carried(self)
        let outgoing = Carried(networkRequest)
        let session = Carried(network)
        DispatchQueue.global().async {
            let task = session.value.dataTask(with: outgoing.value) { data, response, error in
                if let error {
                    done(.failed(error))
                } else if let response {
                    done(.answer(response, data ?? Data()))
                } else {
                    done(.failed(URLError(.badServerResponse)))
                }
            }
            let this = handle.value
            let cancelled = this.stateLock.withLock {
                if !this.stopped { this.networkTask = task }
                return this.stopped
            }
            if cancelled {
                done(.failed(URLError(.cancelled)))
            } else {
                task.resume()
            }
        }
    }
}

/// A value carried to another thread (a session to the thread that sends on it, a request, the protocol instance to
/// its task's queue).
// Unchecked: it carries only these three. URLSession is thread-safe and URLRequest a value type, neither marked
// Sendable by corelibs-foundation; the protocol instance's mutable state (`networkTask`, `stopped`) is behind its
// lock, and its client is only called on the task's queue, where the carried instance is used.
private struct Carried<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// Writes a trace context into a request's header fields.
private struct URLRequestInjector: Injector {
    func inject(_ value: String, forKey key: String, into request: inout URLRequest) {
        request.setValue(value, forHTTPHeaderField: key)
    }
}

/// What the network answered.
private enum NetworkOutcome {
    case answer(URLResponse, Data)
    /// A connection error or a timeout: the bundle may answer instead.
    case failed(any Error)
}

/// The dispatch queue a call arrived on, kept to run later work there.
private final class CallerQueue: @unchecked Sendable {
    // Unchecked: the queue handle is immutable, and dispatch queues are thread-safe.
    #if canImport(CDispatchQueue)
        private let queue: UnsafeMutableRawPointer

        private init(queue: UnsafeMutableRawPointer) { self.queue = queue }
        deinit { packager_queue_release(queue) }

        /// The queue the caller runs on (for a URLProtocol in startLoading: its task's work queue).
        static func current() -> CallerQueue { CallerQueue(queue: packager_current_queue_retained()) }

        func async(_ work: @escaping @Sendable () -> Void) {
            let box = Unmanaged.passRetained(Work(work)).toOpaque()
            packager_queue_async(queue, box) { context in
                Unmanaged<Work>.fromOpaque(context!).takeRetainedValue().run()
            }
        }

        private final class Work {
            let run: @Sendable () -> Void
            init(_ run: @escaping @Sendable () -> Void) { self.run = run }
        }
    #else
        /// Apple's URLSession accepts client calls from any thread.
        static func current() -> CallerQueue { CallerQueue() }
        func async(_ work: @escaping @Sendable () -> Void) { work() }
    #endif
}

extension URLSessionConfiguration {
    /// Lists ``OfflineURLProtocol`` first in this configuration's protocols and installs `loader` for the whole
    /// process (see ``OfflineURLProtocol/installProcessWide(_:fallbackSession:tracer:)``).
    ///
    /// - Throws: `BundleError` with code `.invalidArgument` when another loader is already installed.
    public func useProcessWideOfflineBundle(_ loader: OfflineLoader, fallbackSession: URLSession? = nil, tracer: (any Tracer)? = nil) throws {
        try OfflineURLProtocol.installProcessWide(loader, fallbackSession: fallbackSession, tracer: tracer)
        protocolClasses = [OfflineURLProtocol.self] + (protocolClasses ?? []).filter { $0 != OfflineURLProtocol.self }
    }
}
