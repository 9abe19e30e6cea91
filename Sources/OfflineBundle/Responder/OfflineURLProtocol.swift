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
            client?.urlProtocol(self, didFailWithError: URLError(.unsupportedURL))
            return
        }
        switch loader.policy(for: url.absoluteString) {
        case .bundleOnly:
            if !answerFromBundle(loader, url: url) {
                client?.urlProtocol(self, didFailWithError: URLError(.resourceUnavailable, userInfo: [NSLocalizedDescriptionKey: "not in the offline bundle: \(url)"]))
            }
        case .bundleFirst:
            if !answerFromBundle(loader, url: url) { fetch(timeout: request.timeoutInterval, fallback: nil) }
        case .networkFirst(let limit):
            let this = Unchecked(value: self)
            fetch(timeout: min(limit, request.timeoutInterval)) { this.value.answerFromBundle(loader, url: url) }
        }
    }

    public override func stopLoading() { networkTask?.cancel() }

    /// Delivers the bundle's response; false on a miss.
    private func answerFromBundle(_ loader: OfflineLoader, url: URL) -> Bool {
        var headers: [(name: String, value: String)] = []
        for (name, value) in request.allHTTPHeaderFields ?? [:] { headers.append((name, value)) }
        let bundleRequest = BundleRequest(method: request.httpMethod ?? "GET", url: url.absoluteString, headers: headers)
        guard let answer = loader.response(for: bundleRequest) else { return false }
        do {
            let body = try answer.bodyData()
            var fields: [String: String] = [:]
            for (name, value) in answer.headers { fields[name] = fields[name].map { $0 + ", " + value } ?? value }
            guard let response = HTTPURLResponse(url: url, statusCode: answer.status, httpVersion: "HTTP/1.1", headerFields: fields) else { return false }
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            if !body.isEmpty { client?.urlProtocol(self, didLoad: body) }
            client?.urlProtocolDidFinishLoading(self)
        } catch {
            loader.recordError(error, url: url.absoluteString)
            client?.urlProtocol(self, didFailWithError: URLError(.cannotDecodeContentData, userInfo: [NSLocalizedDescriptionKey: "\(error)"]))
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
            let protocolInstance = this.value
            let failed = error != nil || ((response as? HTTPURLResponse)?.statusCode ?? 0) >= 500
            if failed, let fallback, fallback() { return }
            let client = protocolInstance.client
            if let error {
                client?.urlProtocol(protocolInstance, didFailWithError: error)
                return
            }
            if let response { client?.urlProtocol(protocolInstance, didReceive: response, cacheStoragePolicy: .notAllowed) }
            if let data, !data.isEmpty { client?.urlProtocol(protocolInstance, didLoad: data) }
            client?.urlProtocolDidFinishLoading(protocolInstance)
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
