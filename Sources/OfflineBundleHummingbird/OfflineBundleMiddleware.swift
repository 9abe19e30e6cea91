import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOPosix
import OfflineBundle

/// Hummingbird middleware that serves a mounted bundle's content over HTTP: a thin adapter over the runtime's whole
/// exchange, ``OfflineBundle/BundleServing/respond(method:target:host:headers:client:hop:collectBody:)``, as every
/// transport is (routes by path prefix or Host, the ``OfflineBundle/ServerPolicy``, recorded status and headers, 304,
/// 206, HEAD, gzip as stored). A miss falls through to the next responder.
///
/// Bodies stream in chunks read on NIO's thread pool, checked as they go: a damaged one is a 500 before its head, or
/// ends the response short of its Content-Length, never sent whole. With an access log in its policy, every request
/// that reaches the middleware is logged with the status the application finally gave.
public struct OfflineBundleMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Which requests the bundle answers, and for which origin.
    public typealias Route = BundleRoute

    /// The answer step: routes, policy, and the handle whose loader answers.
    public let serving: BundleServing

    /// Serves the loader `handle` holds through `routes`, tried in order; `LoaderHandle.replace(with:)` swaps it
    /// atomically.
    public init(handle: LoaderHandle, routes: [Route], policy: ServerPolicy = .open) {
        serving = BundleServing(handle: handle, routes: routes, policy: policy)
    }

    /// Serves `loader`'s bundles through `routes`, tried in order.
    public init(loader: OfflineLoader, routes: [Route], policy: ServerPolicy = .open) {
        self.init(handle: LoaderHandle(loader), routes: routes, policy: policy)
    }

    /// Serves the single origin of the loader `handle` holds now, at the root or under `pathPrefix`.
    ///
    /// - Throws: `BundleError` with code `.invalidArgument` when the bundles record more than one origin (give routes then).
    public init(handle: LoaderHandle, pathPrefix: String = "/", policy: ServerPolicy = .open) throws {
        serving = try BundleServing(handle: handle, pathPrefix: pathPrefix, policy: policy)
    }

    /// Serves one bundle's single origin at the root (or under `pathPrefix`); the origin is read from the bundle.
    public init(loader: OfflineLoader, pathPrefix: String = "/", policy: ServerPolicy = .open) throws {
        try self.init(handle: LoaderHandle(loader), pathPrefix: pathPrefix, policy: policy)
    }

    /// File reads go to NIO's thread pool.
    static var hop: BlockingHop { BlockingHop { work in try await NIOThreadPool.singleton.runIfActive(work) } }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        let (method, target) = (request.method.rawValue, request.uri.string)
        let client = (context as? any RemoteAddressRequestContext)?.remoteAddress?.ipAddress
        return try await serving.logging(method: method, target: target, client: client) { source in
            let outcome = await serving.respond(
                method: method, target: target, host: request.head.authority, headers: request.headers, client: client, hop: Self.hop
            ) { limit in Data(try await request.collectBody(upTo: limit).readableBytesView) }
            switch outcome {
            case .miss: return try await next(request, context)
            case .failure(let reason, let answered):
                source = answered
                throw HTTPError(.internalServerError, message: reason)
            case .response(let status, let headers, let body, let answered):
                source = answered
                return Response(status: HTTPResponse.Status(code: status), headers: headers, body: Self.body(body))
            }
        } outcome: {
            ($0.status.code, $0.headers[.contentLength])
        } failed: {
            ($0 as? any HTTPResponseError)?.status.code ?? 500
        }
    }

    static func body(_ body: ServeBody) -> ResponseBody {
        switch body {
        case .empty: return ResponseBody()
        case .bytes(let bytes): return ResponseBody(byteBuffer: ByteBuffer(bytes: bytes))
        case .stream(let chunks):
            return ResponseBody { writer in
                for try await chunk in chunks { try await writer.write(ByteBuffer(bytes: chunk)) }
                try await writer.finish(nil)
            }
        }
    }
}
