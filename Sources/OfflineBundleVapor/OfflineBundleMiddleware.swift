import Foundation
import HTTPFieldsNIO
import HTTPTypes
import NIOCore
import NIOHTTP1
import OfflineBundle
import Vapor

/// Vapor middleware that serves a mounted bundle's content over HTTP: a thin adapter over the runtime's whole exchange,
/// ``OfflineBundle/BundleServing/respond(method:target:host:headers:client:hop:collectBody:)``, as every transport is
/// (routes by path prefix or Host, the ``OfflineBundle/ServerPolicy``, recorded status and headers, 304, 206, HEAD, gzip
/// as stored). A miss falls through to the next responder. Bodies stream in chunks read on the application's thread
/// pool, checked as they go: a damaged one is a 500 before its head, or ends the response short, never sent whole.
///
/// ```swift
/// app.middleware.use(try OfflineBundleMiddleware(loader: try OfflineLoader(path: "release.bundle.zip"), pathPrefix: "/docs"))
/// ```
///
/// Give it a ``OfflineBundle/LoaderHandle`` that a ``OfflineBundle/BundleReloader`` replaces, and it answers from the
/// next release without a restart.
public struct OfflineBundleMiddleware: AsyncMiddleware {
    /// The answer step: routes, policy, and the handle whose loader answers.
    public let serving: BundleServing

    /// Serves the loader `handle` holds through `routes`, tried in order; `LoaderHandle.replace(with:)` swaps it.
    public init(handle: LoaderHandle, routes: [BundleRoute], policy: ServerPolicy = .open) {
        serving = BundleServing(handle: handle, routes: routes, policy: policy)
    }

    /// Serves `loader`'s bundles through `routes`, tried in order.
    public init(loader: OfflineLoader, routes: [BundleRoute], policy: ServerPolicy = .open) {
        self.init(handle: LoaderHandle(loader), routes: routes, policy: policy)
    }

    /// Serves the single origin of the loader `handle` holds now, at the root or under `pathPrefix`.
    ///
    /// - Throws: `BundleError` with code `.invalidArgument` when the bundles record more than one origin.
    public init(handle: LoaderHandle, pathPrefix: String = "/", policy: ServerPolicy = .open) throws {
        serving = try BundleServing(handle: handle, pathPrefix: pathPrefix, policy: policy)
    }

    /// Serves the single origin of `loader`'s bundles, at the root or under `pathPrefix`.
    public init(loader: OfflineLoader, pathPrefix: String = "/", policy: ServerPolicy = .open) throws {
        try self.init(handle: LoaderHandle(loader), pathPrefix: pathPrefix, policy: policy)
    }

    public func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
        let (method, target) = (request.method.rawValue, request.url.string)
        let client = request.remoteAddress?.ipAddress
        let pool = request.application.threadPool
        return try await serving.logging(method: method, target: target, client: client) { source in
            let outcome = await serving.respond(
                method: method, target: target, host: request.headers.first(name: .host), headers: HTTPFields(request.headers), client: client,
                hop: BlockingHop { work in try await pool.runIfActive(work) }
            ) { limit in try await request.body.collect(max: limit).get().map { Data($0.readableBytesView) } ?? Data() }
            switch outcome {
            case .miss: return try await next.respond(to: request)
            case .failure(let reason, let answered):
                source = answered
                throw Abort(.internalServerError, reason: reason)
            case .response(let status, let fields, let body, let answered):
                source = answered
                // The recorded fields go out as they are: Content-Length is the body's (or the range's), also on HEAD and 304.
                let headers = HTTPHeaders(fields)
                let body = Self.body(body, headers, request)
                return Response(status: HTTPResponseStatus(statusCode: status), version: request.version, headersNoUpdate: headers, body: body)
            }
        } outcome: {
            (Int($0.status.code), $0.headers.first(name: .contentLength))
        } failed: {
            Int(($0 as? any AbortError)?.status.code ?? 500)
        }
    }

    static func body(_ body: ServeBody, _ headers: HTTPHeaders, _ request: Request) -> Response.Body {
        switch body {
        case .empty: return .empty
        case .bytes(let bytes): return Response.Body(buffer: ByteBuffer(bytes: bytes), byteBufferAllocator: request.byteBufferAllocator)
        case .stream(let chunks):
            let count = headers.first(name: .contentLength).flatMap { Int($0) } ?? -1
            return Response.Body(
                asyncStream: { writer in
                    do {
                        for try await chunk in chunks { try await writer.writeBuffer(ByteBuffer(bytes: chunk)) }
                        try await writer.write(.end)
                    } catch {
                        // Mid-stream: ending the body short of its length tells the client it failed.
                        try? await writer.write(.error(error))
                    }
                }, count: count, byteBufferAllocator: request.byteBufferAllocator)
        }
    }
}
