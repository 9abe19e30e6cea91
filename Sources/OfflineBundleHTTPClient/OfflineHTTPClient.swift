import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import OfflineBundle

/// An AsyncHTTPClient wrapper that answers requests from a bundle by policy.
///
/// - ``OfflinePolicy/bundleOnly``: only the bundle answers; a miss throws
///   ``BundleError`` with code `.notFound`, and nothing reaches the network.
/// - ``OfflinePolicy/bundleFirst``: the bundle answers what it has; the rest goes to the network.
/// - ``OfflinePolicy/networkFirst(timeout:)``: the network answers; when it fails,
///   answers 5xx, or takes longer than the timeout, the bundle answers instead
///   (and the network error is thrown when the bundle has nothing either).
///
/// Responses from the bundle carry the recorded status and headers and honour
/// conditional and Range requests, like the origin would.
public struct OfflineHTTPClient: Sendable {
    public let loader: OfflineLoader
    public let client: HTTPClient

    /// Wraps `client`; the loader's policy (and overrides) decide per URL.
    public init(loader: OfflineLoader, client: HTTPClient = .shared) {
        self.loader = loader
        self.client = client
    }

    /// Executes `request` from the bundle or the network, as the policy for its URL says.
    public func execute(_ request: HTTPClientRequest, timeout: TimeAmount) async throws -> HTTPClientResponse {
        switch loader.policy(for: request.url) {
        case .bundleOnly:
            guard let response = try fromBundle(request) else {
                throw BundleError(.notFound, "the bundle has no entry for \(request.method.rawValue) \(request.url) (policy: bundle only)")
            }
            return response
        case .bundleFirst:
            if let response = try fromBundle(request) { return response }
            return try await client.execute(request, timeout: timeout)
        case .networkFirst(let limit):
            let networkTimeout = min(timeout, .milliseconds(Int64(limit * 1000)))
            do {
                let response = try await client.execute(request, timeout: networkTimeout)
                if response.status.code >= 500, let fallback = try fromBundle(request) { return fallback }
                return response
            } catch {
                if let fallback = try fromBundle(request) { return fallback }
                throw error
            }
        }
    }

    /// The bundle's answer to `request`, or nil on a miss.
    public func fromBundle(_ request: HTTPClientRequest) throws -> HTTPClientResponse? {
        let bundleRequest = BundleRequest(method: request.method.rawValue, url: request.url, headers: request.headers.map { ($0.name, $0.value) })
        guard let answer = loader.response(for: bundleRequest) else { return nil }
        let body: Data
        do {
            body = try answer.bodyData()
        } catch {
            loader.recordError(error, url: request.url)
            throw error
        }
        var headers = HTTPHeaders()
        for (name, value) in answer.headers { headers.add(name: name, value: value) }
        return HTTPClientResponse(status: HTTPResponseStatus(statusCode: answer.status), headers: headers, body: .bytes(ByteBuffer(bytes: body)))
    }
}
