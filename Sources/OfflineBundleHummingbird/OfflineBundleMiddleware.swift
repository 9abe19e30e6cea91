import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOPosix
import OfflineBundle

/// Hummingbird middleware that serves a mounted bundle's content over HTTP.
///
/// A request is answered by the runtime's answer step (``OfflineBundle/BundleServing``), as every transport is:
/// mapped to a request key by path prefix or by Host (see ``OfflineBundle/BundleRoute``), checked against the
/// ``OfflineBundle/ServerPolicy`` (Host), answered by the `OfflineLoader` with the recorded status and headers (ETag,
/// Last-Modified, Cache-Control), 304 on a matching conditional request, 206 on Range, HEAD without a body, and a
/// deflated body as `Content-Encoding: gzip` without inflating it when the client accepts gzip (once the body is
/// checked: see `BodyReader`). A miss falls through to the next responder.
///
/// Bodies are streamed in chunks read from the bundle on NIO's thread pool (never on the event loop or Swift's
/// cooperative pool), so a response holds a chunk of memory, not its body. A body not yet checked in this mount
/// is checked as it goes, and its last chunk is held back until the check passes: one that fails ends the response
/// as an error (the connection closes short of its Content-Length), never sent whole. A small body (one chunk) is
/// checked before the head goes out, and fails as a 500.
///
/// With an access log in its policy, the middleware reports every request that reaches it, with the status the
/// application finally gave (a miss reports what the next responder answered).
public struct OfflineBundleMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Which requests the bundle answers, and for which origin.
    public typealias Route = BundleRoute

    /// The answer step: routes, policy, and the handle whose loader answers.
    public let serving: BundleServing
    /// The request body bytes held at once by the requests this middleware answers (64 MiB): bodies are held only at
    /// URLs whose recorded answers are chosen by them.
    let bodyBudget = BodyBudget(limit: 64 << 20)

    /// Where the loader comes from: a handle whose loader can be replaced while the server runs.
    public var handle: LoaderHandle { serving.handle }
    public var routes: [Route] { serving.routes }

    /// The loader answering now.
    public var loader: OfflineLoader { handle.loader }

    /// Serves `loader`'s bundles through `routes`, tried in order.
    public init(loader: OfflineLoader, routes: [Route], policy: ServerPolicy = .open) {
        self.init(handle: LoaderHandle(loader), routes: routes, policy: policy)
    }

    /// Serves the loader `handle` holds through `routes`; `LoaderHandle.replace(with:)` swaps it atomically.
    public init(handle: LoaderHandle, routes: [Route], policy: ServerPolicy = .open) {
        serving = BundleServing(handle: handle, routes: routes, policy: policy)
    }

    /// Serves one bundle's single origin at the root (or under `pathPrefix`); the origin is read from the bundle.
    ///
    /// - Throws: `BundleError` with code `.invalidArgument` when the bundle records more than one origin (give routes then).
    public init(loader: OfflineLoader, pathPrefix: String = "/", policy: ServerPolicy = .open) throws {
        self.init(loader: loader, routes: [try BundleServing.singleOriginRoute(of: loader, pathPrefix: pathPrefix)], policy: policy)
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let log = serving.policy.accessLog else {
            var source: BundleResponse.Source?
            return try await answer(request, context: context, next: next, source: &source)
        }
        var served = ServedRequest(
            client: (context as? any RemoteAddressRequestContext)?.remoteAddress?.ipAddress, method: request.method.rawValue,
            target: request.uri.string, status: 500)
        do {
            let response = try await answer(request, context: context, next: next, source: &served.source)
            served.status = response.status.code
            served.contentLength = response.headers[.contentLength]
            log(served)
            return response
        } catch {
            // What answered stays in the line: a damaged body is the bundle's 500.
            served.status = (error as? any HTTPResponseError)?.status.code ?? 500
            log(served)
            throw error
        }
    }

    /// The response; `source` is set to what answered, as soon as the bundles do.
    private func answer(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response, source: inout BundleResponse.Source?
    ) async throws -> Response {
        let answer: ServeAnswer
        var request = request
        var requestBody: Data?
        // One loader for the whole request: a swap between reading the body and answering must not pair one bundle's
        // decision to keep the body with another's answer.
        let loader = serving.handle.loader
        // The body is read only at a URL whose recorded answers are chosen by it (BundleRequest.maxBodySize bytes at
        // most: more is a 413, as serve answers), within the middleware's budget for bodies held at once (503 past
        // it); the next responder then reads it from memory.
        if request.method != .head,
            serving.matchesBody(method: request.method.rawValue, target: request.uri.string, host: request.head.authority, loader: loader)
        {
            let declared = request.headers[.contentLength].flatMap { Int($0) }
            if let declared, declared > BundleRequest.maxBodySize { return Response(status: .contentTooLarge) }
            let reserved = declared ?? BundleRequest.maxBodySize
            // One client address holds at most its share of the budget (BodyBudget.perClient), so one cannot starve the rest.
            let client = (context as? any RemoteAddressRequestContext)?.remoteAddress?.ipAddress.map(BodyBudget.clientKey)
            guard bodyBudget.reserve(reserved, client: client) else { return Response(status: .serviceUnavailable) }
            defer { bodyBudget.release(reserved, client: client) }
            guard let collected = try? await request.collectBody(upTo: BundleRequest.maxBodySize) else { return Response(status: .contentTooLarge) }
            requestBody = Data(collected.readableBytesView)
        }
        switch serving.answer(
            method: request.method.rawValue, target: request.uri.string, host: request.head.authority, headers: request.headers, body: requestBody,
            loader: loader)
        {
        case .miss: return try await next(request, context)
        case .status(500): throw HTTPError(.internalServerError, message: "the bundle records an invalid status for this resource")
        case .status(let code): return Response(status: HTTPResponse.Status(code: code))
        case .answer(let found): answer = found
        }
        source = answer.source
        let status = HTTPResponse.Status(code: answer.status)
        // The first chunk (for most pages, the whole body) is read and checked before the head goes out.
        let opened: OpenedBody?
        do {
            // File reads happen on NIO's thread pool, in one hop for the first two chunks; a body in memory reads no
            // file, and is answered without the hop.
            switch answer.bodyPlace {
            case .none: opened = nil
            case .memory:
                // Unless the mount's cache let it go meanwhile: then it is read as any other.
                if let inMemory = try answer.openBodyIfInMemory() {
                    opened = inMemory
                } else {
                    opened = try await NIOThreadPool.singleton.runIfActive { try answer.openBody() }
                }
            case .small, .large: opened = try await NIOThreadPool.singleton.runIfActive { try answer.openBody() }
            }
        } catch {
            // Never half-serve: a body that fails its checks is an error response (counted and logged by the loader).
            throw HTTPError(.internalServerError, message: "the bundle's copy of this resource is damaged")
        }
        guard let opened else { return Response(status: status, headers: answer.headers) }
        guard let second = opened.second else {
            return Response(status: status, headers: answer.headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: opened.first)))
        }
        let reader = opened.reader
        let body = ResponseBody { writer in
            try await writer.write(ByteBuffer(bytes: opened.first))
            try await writer.write(ByteBuffer(bytes: second))
            do {
                while let chunk = try await NIOThreadPool.singleton.runIfActive({ try reader.next() }) {
                    try await writer.write(ByteBuffer(bytes: chunk))
                }
            } catch let error as BundleError {
                // Mid-stream: the head has gone out; ending the body short of its length tells the client it failed.
                answer.recordError(error)
                throw error
            }
            try await writer.finish(nil)
        }
        return Response(status: status, headers: answer.headers, body: body)
    }
}
