import Foundation
import HTTPTypes
import OfflineBundle
import Synchronization
import Tracing

#if canImport(FoundationNetworking)
    import FoundationNetworking
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
    /// The request's network call, when the policy sends it to the network; `stopLoading()` cancels it.
    private let call = NetworkCall()

    public override class func canInit(with request: URLRequest) -> Bool {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", let loader else { return false }
        return takes(request, url: url, loader: loader)
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
        // The loader's step, as every client's: the plan, the span (ended before the client hears of the answer: once
        // the caller has it, its span is finished), the fallbacks.
        let start: OfflineLoader.LoadStart
        do {
            start = try loader.begin(bundleRequest, followingRedirects: Self.redirectsFollowedHere, tracer: installed.tracer)
        } catch {
            return client.urlProtocol(self, didFailWithError: Self.miss(error, url: url))
        }
        guard case .network(let pending) = start else {
            if case .bundle(let answer, let finalURL) = start { deliver(answer, loader: loader, url: url, finalURL: finalURL, to: client) }
            return
        }
        let (queue, handle) = (CallerQueue.current(), Carried(self))
        let outgoing = Self.networkRequest(request, within: pending, tracer: installed.tracer ?? InstrumentationSystem.tracer, body: streamed)
        call.start(outgoing, on: installed.network) { outcome in
            queue.async {
                // On the task's queue again: a cancel() ran stopLoading here first, or not at all.
                let this = handle.value
                guard let client = this.client, !this.call.isCancelled else { return pending.cancel() }
                do {
                    switch try pending.settle(outcome, status: { ($0.value.response as? HTTPURLResponse)?.statusCode ?? 0 }) {
                    case .bundle(let answer, let finalURL, _):
                        this.deliver(answer, loader: loader, url: url, finalURL: finalURL, to: client)
                    case .network(let answer):
                        Self.remember(answer.value, for: bundleRequest, loader: loader, session: installed.network)
                        try this.hand(answer.value.response, chunks: [answer.value.data], to: client)
                    }
                } catch {
                    client.urlProtocol(this, didFailWithError: error)
                }
            }
        }
    }

    // Nothing is reported from here: URLSession's cancel() reports the cancellation itself.
    public override func stopLoading() { call.cancel() }

    /// Hands the loader's `answer` to the request for `url` (which answers `finalURL`) to the client, on the calling
    /// thread, its body read and checked (``body(of:)``); on Apple platforms URLSession follows a recorded redirect as
    /// it follows a network one.
    private func deliver(_ answer: BundleResponse, loader: OfflineLoader, url: URL, finalURL: String, to client: any URLProtocolClient) {
        guard let response = HTTPURLResponse(answer, url: URL(string: finalURL) ?? url) else {
            return client.urlProtocol(self, didFailWithError: URLError(.badServerResponse))
        }
        #if !canImport(FoundationNetworking)
            if let next = Self.redirect(answer, of: request, url: url) {
                return client.urlProtocol(self, wasRedirectedTo: next, redirectResponse: response)
            }
        #endif
        do {
            let (chunks, rest) = try Self.body(of: answer)
            try hand(response, chunks: chunks, rest: rest, to: client)
        } catch {
            loader.recordError(error, url: finalURL)
            client.urlProtocol(self, didFailWithError: URLError(.cannotDecodeContentData, userInfo: [NSLocalizedDescriptionKey: "\(error)"]))
        }
    }

    /// Hands `response` and its body to the client: `chunks`, then what `rest` reads.
    private func hand(_ response: URLResponse, chunks: [Data], rest: BodyReader? = nil, to client: any URLProtocolClient) throws {
        client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        for chunk in chunks where !chunk.isEmpty { client.urlProtocol(self, didLoad: chunk) }
        while let chunk = try rest?.next() { client.urlProtocol(self, didLoad: chunk) }
        client.urlProtocolDidFinishLoading(self)
    }
}
