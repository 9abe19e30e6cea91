import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflineBundle
import Vapor

/// Vapor middleware that serves a mounted bundle's content over HTTP, as `packager serve` and the Hummingbird
/// middleware do.
///
/// A request is answered by the runtime's answer step (``OfflineBundle/BundleServing``), as every transport is:
/// mapped to a request key by path prefix or by Host (see ``OfflineBundle/BundleRoute``), checked against the
/// ``OfflineBundle/ServerPolicy`` (Host), answered by the loader with the recorded status and headers (ETag,
/// Last-Modified, Cache-Control), 304 on a matching conditional request, 206 on Range, HEAD without a body, and a
/// deflated body as `Content-Encoding: gzip` without inflating it when the client accepts gzip (once the body is
/// checked). A miss falls through to the next responder.
///
/// Bodies are read on the application's thread pool (never on an event loop or Swift's cooperative pool) and
/// streamed in chunks, so a response holds a chunk of memory, not its body. A body not yet checked in this mount is
/// checked as it goes, and its last chunk is held back until the check passes: one that fails ends the response as
/// an error (the connection closes short of its Content-Length), never sent whole. A small body (one chunk) is
/// checked before the head goes out, and fails as a 500.
///
/// ```swift
/// let loader = try OfflineLoader(path: "release.bundle.zip")
/// app.middleware.use(try OfflineBundleMiddleware(loader: loader, pathPrefix: "/docs"))
/// ```
///
/// Give it a ``OfflineBundle/LoaderHandle`` (``init(handle:routes:policy:)``) that a
/// ``OfflineBundle/BundleReloader`` replaces, and it answers from the next release without a restart.
public struct OfflineBundleMiddleware: AsyncMiddleware {
    /// The answer step: routes, policy, and the handle whose loader answers.
    public let serving: BundleServing
    /// The request body bytes held at once by the requests this middleware answers (64 MiB): bodies are held only at
    /// URLs whose recorded answers are chosen by them.
    let bodyBudget = BodyBudget(limit: 64 << 20)

    /// Where the loader comes from: a handle whose loader can be replaced while the application runs.
    public var handle: LoaderHandle { serving.handle }
    public var routes: [BundleRoute] { serving.routes }

    /// The loader answering now.
    public var loader: OfflineLoader { handle.loader }

    /// Serves the loader `handle` holds through `routes`, tried in order; `LoaderHandle.replace(with:)` swaps it
    /// atomically.
    public init(handle: LoaderHandle, routes: [BundleRoute], policy: ServerPolicy = .open) {
        serving = BundleServing(handle: handle, routes: routes, policy: policy)
    }

    /// Serves `loader`'s bundles through `routes`, tried in order.
    public init(loader: OfflineLoader, routes: [BundleRoute], policy: ServerPolicy = .open) {
        self.init(handle: LoaderHandle(loader), routes: routes, policy: policy)
    }

    /// Serves one bundle's single origin at the root (or under `pathPrefix`); the origin is read from the bundle.
    ///
    /// - Throws: `BundleError` with code `.invalidArgument` when the bundles record more than one origin (give routes
    ///   then).
    public init(loader: OfflineLoader, pathPrefix: String = "/", policy: ServerPolicy = .open) throws {
        self.init(loader: loader, routes: [try BundleServing.singleOriginRoute(of: loader, pathPrefix: pathPrefix)], policy: policy)
    }

    /// Serves the single origin of the loader `handle` holds now, at the root or under `pathPrefix`.
    ///
    /// - Throws: `BundleError` with code `.invalidArgument` when the bundles record more than one origin.
    public init(handle: LoaderHandle, pathPrefix: String = "/", policy: ServerPolicy = .open) throws {
        self.init(handle: handle, routes: [try BundleServing.singleOriginRoute(of: handle.loader, pathPrefix: pathPrefix)], policy: policy)
    }

    public func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
        guard let log = serving.policy.accessLog else {
            var source: BundleResponse.Source?
            return try await answer(request, next: next, source: &source)
        }
        var served = ServedRequest(client: request.remoteAddress?.ipAddress, method: request.method.rawValue, target: request.url.string, status: 500)
        do {
            let response = try await answer(request, next: next, source: &served.source)
            served.status = Int(response.status.code)
            served.contentLength = response.headers.first(name: .contentLength)
            log(served)
            return response
        } catch {
            served.status = Int((error as? any AbortError)?.status.code ?? 500)
            log(served)
            throw error
        }
    }

    /// The response; `source` is set to what answered, as soon as the bundles do.
    private func answer(_ request: Request, next: any AsyncResponder, source: inout BundleResponse.Source?) async throws -> Response {
        let method = request.method.rawValue
        let target = request.url.string
        let host = request.headers.first(name: .host)
        let loader = serving.handle.loader
        var requestBody: Data?
        // The body is read only at a URL whose recorded answers are chosen by it (BundleRequest.maxBodySize bytes at
        // most: more is a 413, as serve answers), within the middleware's budget for bodies held at once (503 past
        // it); the next responder then finds it collected.
        if request.method != .HEAD, serving.matchesBody(method: method, target: target, host: host, loader: loader) {
            let declared = request.headers.first(name: .contentLength).flatMap { Int($0) }
            if let declared, declared > BundleRequest.maxBodySize { return Response(status: .payloadTooLarge) }
            let reserved = declared ?? BundleRequest.maxBodySize
            // One client address holds at most its share of the budget (BodyBudget.perClient), so one cannot starve the rest.
            let client = request.remoteAddress?.ipAddress.map(BodyBudget.clientKey)
            guard bodyBudget.reserve(reserved, client: client) else { return Response(status: .serviceUnavailable) }
            defer { bodyBudget.release(reserved, client: client) }
            let collected: ByteBuffer?
            do {
                collected = try await request.body.collect(max: BundleRequest.maxBodySize).get()
            } catch {
                return Response(status: .payloadTooLarge)
            }
            requestBody = collected.map { Data($0.readableBytesView) } ?? Data()
        }
        let answer: ServeAnswer
        switch serving.answer(method: method, target: target, host: host, headers: HTTPFields(request.headers), body: requestBody, loader: loader) {
        case .miss: return try await next.respond(to: request)
        case .status(500): throw Abort(.internalServerError, reason: "the bundle records an invalid status for this resource")
        case .status(let code): return Response(status: HTTPResponseStatus(statusCode: code))
        case .answer(let found): answer = found
        }
        source = answer.source
        let status = HTTPResponseStatus(statusCode: answer.status)
        // The recorded fields go out as they are: Content-Length is the body's (or the range's), also on HEAD and 304.
        let headers = HTTPHeaders(answer.headers)
        let pool = request.application.threadPool
        // The first chunk (for most pages, the whole body) is read and checked before the head goes out.
        let opened: OpenedBody?
        do {
            switch answer.bodyPlace {
            case .none: opened = nil
            case .memory:
                // Unless the mount's cache let it go meanwhile: then it is read as any other.
                if let inMemory = try answer.openBodyIfInMemory() {
                    opened = inMemory
                } else {
                    opened = try await pool.runIfActive { try answer.openBody() }
                }
            case .small, .large: opened = try await pool.runIfActive { try answer.openBody() }
            }
        } catch {
            // Never half-serve: a body that fails its checks is an error response (counted and logged by the loader).
            throw Abort(.internalServerError, reason: "the bundle's copy of this resource is damaged")
        }
        guard let opened else { return Response(status: status, version: request.version, headersNoUpdate: headers, body: .empty) }
        guard let second = opened.second else {
            let body = Response.Body(buffer: ByteBuffer(bytes: opened.first), byteBufferAllocator: request.byteBufferAllocator)
            return Response(status: status, version: request.version, headersNoUpdate: headers, body: body)
        }
        let reader = opened.reader
        let count = headers.first(name: .contentLength).flatMap { Int($0) } ?? -1
        let body = Response.Body(
            asyncStream: { writer in
                do {
                    try await writer.writeBuffer(ByteBuffer(bytes: opened.first))
                    try await writer.writeBuffer(ByteBuffer(bytes: second))
                    while let chunk = try await pool.runIfActive({ try reader.next() }) {
                        try await writer.writeBuffer(ByteBuffer(bytes: chunk))
                    }
                } catch {
                    // Mid-stream: the head has gone out; ending the body short of its length tells the client it failed.
                    // A body that failed its checks is counted; a client gone or a pool shut down ends the stream too.
                    if error is BundleError { answer.recordError(error) }
                    try? await writer.write(.error(error))
                    return
                }
                try await writer.write(.end)
            }, count: count, byteBufferAllocator: request.byteBufferAllocator)
        return Response(status: status, version: request.version, headersNoUpdate: headers, body: body)
    }
}

extension HTTPFields {
    /// Vapor's (NIO's) header fields as the runtime's; a name that is not a valid field name is left out.
    init(_ headers: HTTPHeaders) {
        self.init()
        reserveCapacity(headers.count)
        for (name, value) in headers {
            if let fieldName = HTTPField.Name(name) { append(HTTPField(name: fieldName, value: value)) }
        }
    }
}

extension HTTPHeaders {
    /// The runtime's header fields as Vapor's (NIO's), in order.
    init(_ fields: HTTPFields) {
        self.init()
        reserveCapacity(fields.count)
        for field in fields { add(name: field.name.canonicalName, value: field.value) }
    }
}
