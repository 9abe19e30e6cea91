import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import OfflineBundle

/// An AsyncHTTPClient wrapper that answers requests from a bundle by policy.
///
/// - `bundleOnly`: only the bundle answers; a miss throws
///   `BundleError` with code `.notFound`, and nothing reaches the network.
/// - `bundleFirst`: the bundle answers what it has; the rest goes to the network.
/// - `networkFirst(timeout:)`: the network answers; when it fails,
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
            // Saturating: a Duration of centuries (meant as "no limit") must not overflow TimeAmount's nanoseconds.
            let (seconds, attoseconds) = limit.components
            let nanoseconds = seconds >= Int64.max / 1_000_000_000 ? Int64.max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000
            let networkTimeout = min(timeout, .nanoseconds(max(0, nanoseconds)))
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
    ///
    /// Recorded redirects are followed inside the bundle (up to 10 hops), as AsyncHTTPClient follows network ones;
    /// a redirect whose target the bundle lacks is returned as recorded. Accept-Encoding is left out, so bodies
    /// come back as identity (AsyncHTTPClient's decompression never sees these responses).
    public func fromBundle(_ request: HTTPClientRequest) throws -> HTTPClientResponse? {
        // AsyncHTTPClient speaks NIO's HTTPHeaders; the bundle speaks HTTPFields.
        var headers = HTTPFields()
        for (name, value) in request.headers where name.lowercased() != "accept-encoding" {
            if let fieldName = HTTPField.Name(name) { headers.append(HTTPField(name: fieldName, value: value)) }
        }
        let bundleRequest = BundleRequest(method: request.method.rawValue, url: request.url, headers: headers)
        guard let (answer, url) = loader.response(for: bundleRequest, followingRedirects: 10) else { return nil }
        let body: Data
        do {
            body = try answer.bodyData()
        } catch {
            loader.recordError(error, url: url)
            throw error
        }
        var fields = HTTPHeaders()
        for field in answer.headers { fields.add(name: field.name.canonicalName, value: field.value) }
        return HTTPClientResponse(status: HTTPResponseStatus(statusCode: answer.status), headers: fields, body: .bytes(ByteBuffer(bytes: body)))
    }
}
