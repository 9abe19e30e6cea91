import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A `URLProtocol` that answers URLSession requests from an ``OfflineLoader``, by its policy.
///
/// Install it with one line: `configuration.useOfflineBundle(loader)`. It
/// takes http and https requests; what the bundle cannot answer (by policy)
/// goes to the network through a plain URLSession, and in bundle-only mode a
/// miss fails with `URLError(.resourceUnavailable)`. One loader serves the
/// process: installing another replaces it.
public final class OfflineURLProtocol: URLProtocol {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var installed: OfflineLoader?
    private static let network = URLSession(configuration: .ephemeral)
    private var networkTask: URLSessionDataTask?
    private let stateLock = NSLock()
    private var stopped = false

    /// Makes `loader` the one this protocol asks.
    public static func install(_ loader: OfflineLoader) { lock.withLock { installed = loader } }

    static var loader: OfflineLoader? { lock.withLock { installed } }

    public override class func canInit(with request: URLRequest) -> Bool {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return false }
        return loader != nil
    }

    public override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    public override func startLoading() {
        // FoundationNetworking on Linux calls startLoading on the session's queue and the client's callbacks
        // dispatch synchronously onto it again; answering from another queue avoids that deadlock.
        let this = Unchecked(value: self)
        Self.work.async { this.value.load() }
    }

    private static let work = DispatchQueue(label: "offline-bundle.url-protocol", attributes: .concurrent)

    private func load() {
        guard let loader = Self.loader, let url = request.url else {
            deliver { $0.urlProtocol(self, didFailWithError: URLError(.unsupportedURL)) }
            return
        }
        switch loader.policy(for: url.absoluteString) {
        case .bundleOnly:
            if !answerFromBundle(loader, url: url) {
                deliver {
                    $0.urlProtocol(
                        self, didFailWithError: URLError(.resourceUnavailable, userInfo: [NSLocalizedDescriptionKey: "not in the offline bundle: \(url)"]))
                }
            }
        case .bundleFirst:
            if !answerFromBundle(loader, url: url) { fetch(timeout: request.timeoutInterval, fallback: nil) }
        case .networkFirst(let limit):
            let this = Unchecked(value: self)
            fetch(timeout: min(limit, request.timeoutInterval)) { this.value.answerFromBundle(loader, url: url) }
        }
    }

    public override func stopLoading() {
        stateLock.withLock { stopped = true }
        networkTask?.cancel()
    }

    /// Calls the client unless loading was stopped: no callback arrives after stopLoading.
    private func deliver(_ call: (any URLProtocolClient) -> Void) {
        guard let client, !stateLock.withLock({ stopped }) else { return }
        call(client)
    }

    /// Delivers the bundle's response; false on a miss.
    private func answerFromBundle(_ loader: OfflineLoader, url: URL) -> Bool {
        // Accept-Encoding is left out: URLSession does not decode what a protocol hands it, so bodies go out as identity.
        var headers: [(name: String, value: String)] = []
        for (name, value) in request.allHTTPHeaderFields ?? [:] where name.lowercased() != "accept-encoding" { headers.append((name, value)) }
        let bundleRequest = BundleRequest(method: request.httpMethod ?? "GET", url: url.absoluteString, headers: headers)
        #if canImport(FoundationNetworking)
            // swift-corelibs-foundation cannot follow a redirect a protocol reports, so recorded hops are followed
            // inside the bundle and the final response is delivered.
            guard let (answer, finalString) = loader.response(for: bundleRequest, followingRedirects: 10) else { return false }
            let finalURL = URL(string: finalString) ?? url
        #else
            guard let answer = loader.response(for: bundleRequest) else { return false }
            let finalURL = url
        #endif
        do {
            let body = try answer.bodyData()
            var fields: [String: String] = [:]
            for (name, value) in answer.headers { fields[name] = fields[name].map { $0 + ", " + value } ?? value }
            guard let response = HTTPURLResponse(url: finalURL, statusCode: answer.status, httpVersion: "HTTP/1.1", headerFields: fields) else { return false }
            #if !canImport(FoundationNetworking)
                // On Apple platforms URLSession follows a recorded redirect as it follows a network one.
                if (300...399).contains(answer.status), answer.status != 304, let location = answer.header("location"),
                    let target = URL(string: location, relativeTo: url)?.absoluteURL
                {
                    var next = request
                    next.url = target
                    deliver { $0.urlProtocol(self, wasRedirectedTo: next, redirectResponse: response) }
                    return true
                }
            #endif
            deliver { $0.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed) }
            if !body.isEmpty { deliver { $0.urlProtocol(self, didLoad: body) } }
            deliver { $0.urlProtocolDidFinishLoading(self) }
        } catch {
            loader.recordError(error, url: url.absoluteString)
            deliver { $0.urlProtocol(self, didFailWithError: URLError(.cannotDecodeContentData, userInfo: [NSLocalizedDescriptionKey: "\(error)"])) }
        }
        return true
    }

    /// Fetches from the network; on failure (or 5xx) `fallback` may answer instead.
    private func fetch(timeout: TimeInterval, fallback: (@Sendable () -> Bool)?) {
        var networkRequest = request
        networkRequest.timeoutInterval = timeout
        // URLSession calls back on its own queue; the protocol instance is only touched there after startLoading returns.
        let this = Unchecked(value: self)
        let task = Self.network.dataTask(with: networkRequest) { data, response, error in
            let instance = this.value
            if (error as? URLError)?.code == .cancelled { return }  // stopLoading: the client wants nothing more
            let failed = error != nil || ((response as? HTTPURLResponse)?.statusCode ?? 0) >= 500
            if failed, let fallback, fallback() { return }
            if let error {
                instance.deliver { $0.urlProtocol(instance, didFailWithError: error) }
                return
            }
            if let response { instance.deliver { $0.urlProtocol(instance, didReceive: response, cacheStoragePolicy: .notAllowed) } }
            if let data, !data.isEmpty { instance.deliver { $0.urlProtocol(instance, didLoad: data) } }
            instance.deliver { $0.urlProtocolDidFinishLoading(instance) }
        }
        networkTask = task
        task.resume()
    }
}

extension URLSessionConfiguration {
    /// Answers this configuration's requests from `loader`, by its policy.
    public func useOfflineBundle(_ loader: OfflineLoader) {
        OfflineURLProtocol.install(loader)
        protocolClasses = [OfflineURLProtocol.self] + (protocolClasses ?? []).filter { $0 != OfflineURLProtocol.self }
    }
}

/// Carries a value into a `@Sendable` closure where the caller guarantees it is not used concurrently.
private struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
}
