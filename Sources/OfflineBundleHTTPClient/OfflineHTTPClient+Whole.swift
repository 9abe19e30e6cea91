import AsyncHTTPClient
import Foundation
import HTTPFieldsNIO
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import OfflineBundle

extension OfflineHTTPClient {
    /// A response read whole: what a client that hands bodies over in memory (Vapor's `ClientResponse`) needs.
    package struct WholeResponse: Sendable {
        package var status: HTTPResponseStatus
        package var headers: HTTPHeaders
        /// Nil for a bundle's answer with no body (HEAD, 204, 304).
        package var body: ByteBuffer?
    }

    /// `request` answered as ``execute(_:timeout:)`` answers it, the body read whole:
    /// - the network's within the policy's timeout together with its head, so a body that stalls falls back as a
    ///   failed request does (AsyncHTTPClient's deadline ends with the head), and at most `maxBodySize` bytes (past it,
    ///   `NIOTooManyBytesError` is thrown, never answered by the bundle instead); a 200 kept in the last-seen cache;
    /// - a bundle's checked, read in one chunk through `hop`.
    package func executeWhole(
        _ request: HTTPClientRequest, timeout requested: TimeAmount?, maxBodySize: Int, hop: BlockingHop, logger: Logger?
    ) async throws -> WholeResponse {
        let loader = handle.loader
        let (outgoing, bundleRequest) = try await prepared(request, loader: loader)
        let (http, tracer) = (client, tracer)
        let loaded = try await loader.load(bundleRequest, followingRedirects: 10, tracer: tracer) { limit -> NetworkOutcome in
            let timeout = limit.map { min(requested ?? .nanoseconds(Int64.max), TimeAmount(saturating: $0)) } ?? requested
            let sent = Self.traced(outgoing, tracer: tracer)
            do {
                return try await Self.within(timeout) { [timeout] () -> NetworkOutcome in
                    let deadline = timeout.map { NIODeadline.now() + $0 } ?? .distantFuture
                    let response = try await http.execute(sent, deadline: deadline, logger: logger)
                    return .answered(response, try await response.body.collect(upTo: maxBodySize))
                }
            } catch let error as NIOTooManyBytesError {
                // The network answered, past what is held: not a failure the bundle stands in for.
                return .tooLarge(error)
            }
        } status: { (outcome: NetworkOutcome) -> Int in
            if case .answered(let response, _) = outcome { return Int(response.status.code) }
            return 200
        }
        switch loaded {
        case .bundle(let answer, let url, _):
            let body = try await loader.clientBody(of: answer, url: url, hop: hop, chunkSize: answer.wholeChunkSize).collected()
            let hasBody = !(answer.status == 204 || answer.status == 304) || !body.isEmpty
            return WholeResponse(
                status: HTTPResponseStatus(statusCode: answer.status), headers: HTTPHeaders(answer.headers), body: hasBody ? ByteBuffer(bytes: body) : nil)
        case .network(.tooLarge(let error)):
            throw error
        case .network(.answered(let response, let body)):
            // A response reached by following redirects answers another URL: it is not kept for this one.
            if response.status.code == 200, response.history.count <= 1, loader.mayRemember(bundleRequest) {
                loader.remember(bundleRequest, status: 200, headers: HTTPFields(response.headers), body: Data(body.readableBytesView))
            }
            return WholeResponse(status: response.status, headers: response.headers, body: body)
        }
    }

    /// What the network gave: a response and its body, or a body past the limit (thrown, never answered by the bundle
    /// instead).
    enum NetworkOutcome: Sendable {
        case answered(HTTPClientResponse, ByteBuffer)
        case tooLarge(NIOTooManyBytesError)
    }

    /// What `work` returns, or AsyncHTTPClient's `deadlineExceeded` once `timeout` has passed (the work is then
    /// cancelled).
    static func within<T: Sendable>(_ timeout: TimeAmount?, _ work: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let timeout else { return try await work() }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await work() }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(max(0, timeout.nanoseconds)))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw HTTPClientError.deadlineExceeded }
            return value
        }
    }
}
