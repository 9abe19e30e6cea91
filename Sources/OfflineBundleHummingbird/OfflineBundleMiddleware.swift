import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import OfflineBundle

/// Hummingbird middleware that serves a mounted bundle's content over HTTP.
///
/// A request is mapped to a request key by path prefix or by Host (see
/// ``Route``), answered by the `OfflineLoader` with the recorded status and
/// headers (ETag, Last-Modified, Cache-Control), 304 on a matching
/// conditional request, 206 on Range, HEAD without a body, and a deflated body
/// as `Content-Encoding: gzip` without inflating it when the client accepts
/// gzip. A miss falls through to the next responder.
///
/// Bodies are streamed in chunks read from the bundle on NIO's thread pool (never on the event loop or Swift's
/// cooperative pool), so a response holds a chunk of memory, not its body. A body not yet checked in this mount
/// is checked as it goes, and its last chunk is held back until the check passes: one that fails ends the response
/// as an error (the connection closes short of its Content-Length), never sent whole. A small body (one chunk) is
/// checked before the head goes out, and fails as a 500.
public struct OfflineBundleMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Which requests the bundle answers, and for which origin.
    public typealias Route = BundleRoute

    /// Where the loader comes from: a handle whose loader can be replaced while the server runs.
    public let handle: LoaderHandle
    public let routes: [Route]

    /// The loader answering now.
    public var loader: OfflineLoader { handle.loader }

    /// Serves `loader`'s bundles through `routes`, tried in order.
    public init(loader: OfflineLoader, routes: [Route]) {
        self.init(handle: LoaderHandle(loader), routes: routes)
    }

    /// Serves the loader `handle` holds through `routes`; ``LoaderHandle/replace(with:)`` swaps it atomically.
    public init(handle: LoaderHandle, routes: [Route]) {
        self.handle = handle
        self.routes = routes
    }

    /// Serves one bundle's single origin at the root (or under `pathPrefix`); the origin is read from the bundle.
    ///
    /// - Throws: `BundleError` with code `.invalidArgument` when the bundle records more than one origin (give routes then).
    public init(loader: OfflineLoader, pathPrefix: String = "/") throws {
        let origins = Set(loader.bundles.flatMap { $0.origins })
        guard origins.count == 1, let origin = origins.first else {
            throw BundleError(
                .invalidArgument, "the bundle records \(origins.count) origins (\(origins.sorted().joined(separator: ", "))); give a route for each")
        }
        self.init(loader: loader, routes: [Route(pathPrefix: pathPrefix, origin: origin)])
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let (url, route) = key(for: request) else { return try await next(request, context) }
        // One loader for the whole request: a reload meanwhile does not change which bundles answer it, and the
        // bundles it answers from stay open until its body has gone out.
        let loader = handle.loader
        guard let answer = loader.response(for: BundleRequest(method: request.method.rawValue, url: url, headers: request.headers)) else {
            return try await next(request, context)
        }
        (context as? any AnswerRecordingRequestContext)?.answeredBy.record(answer.source)
        // A recorded redirect to the origin itself stays on this server.
        var fields = answer.headers
        for name in [HTTPField.Name.location, .contentLocation] {
            if let value = fields[name] { fields[name] = route.localize(value) }
        }
        // Mounting refuses statuses outside 200...599 and bodies on 204 and 304; checked again here, since a
        // body after a body-less head would be read by the client as the next response.
        guard (200...599).contains(answer.status) else {
            throw HTTPError(.internalServerError, message: "the bundle records an invalid status for this resource")
        }
        let status = HTTPResponse.Status(code: answer.status)
        if answer.status == 204 || answer.status == 304 { return Response(status: status, headers: fields) }
        // The first chunk (for most pages, the whole body) is read and checked before the head goes out.
        let reader: BodyReader
        let first: Data
        let second: Data?
        do {
            // File reads happen on NIO's thread pool, in one hop for the first two chunks; a body in the mount's
            // cache of inflated bodies reads no file, and is answered without the hop.
            if let bodyReader = answer.bodyReaderIfInMemory() {
                reader = bodyReader
                (first, second) = (try bodyReader.next() ?? Data(), try bodyReader.next())
            } else {
                guard
                    let (bodyReader, one, two) = try await NIOThreadPool.singleton.runIfActive({ () -> (BodyReader, Data, Data?)? in
                        guard let bodyReader = try answer.bodyReader() else { return nil }
                        return (bodyReader, try bodyReader.next() ?? Data(), try bodyReader.next())
                    })
                else { return Response(status: status, headers: fields) }
                (reader, first, second) = (bodyReader, one, two)
            }
        } catch {
            // Never half-serve: a body that fails its checks is an error response, counted and logged.
            loader.recordError(error, url: url)
            throw HTTPError(.internalServerError, message: "the bundle's copy of this resource is damaged")
        }
        guard let second else { return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: first))) }
        let body = ResponseBody { writer in
            try await writer.write(ByteBuffer(bytes: first))
            try await writer.write(ByteBuffer(bytes: second))
            do {
                while let chunk = try await NIOThreadPool.singleton.runIfActive({ try reader.next() }) {
                    try await writer.write(ByteBuffer(bytes: chunk))
                }
            } catch let error as BundleError {
                // Mid-stream: the head has gone out; ending the body short of its length tells the client it failed.
                loader.recordError(error, url: url)
                throw error
            }
            try await writer.finish(nil)
        }
        return Response(status: status, headers: fields, body: body)
    }

    /// The absolute URL a request stands for, or nil when no route takes it.
    func key(for request: Request) -> (String, Route)? {
        BundleRoute.key(target: request.uri.string, host: request.head.authority.flatMap { HTTPRules.host(ofAuthority: $0) }, in: routes)
    }

}

/// A request context that hears what answered a request (a bundle's label, `rules`, `last-seen`), for an access
/// log: ``OfflineBundleMiddleware`` records it in ``answeredBy``, which outer middleware reads after `next` returns.
public protocol AnswerRecordingRequestContext: RequestContext {
    var answeredBy: AnswerRecord { get }
}

/// What answered one request, recorded by ``OfflineBundleMiddleware``.
public final class AnswerRecord: Sendable {
    private let value = NIOLockedValueBox<BundleResponse.Source?>(nil)

    public init() {}

    /// What answered; nil when the bundles did not (a miss, or another responder).
    public var source: BundleResponse.Source? { value.withLockedValue { $0 } }

    func record(_ source: BundleResponse.Source) { value.withLockedValue { $0 = source } }
}

/// A loader that can be replaced while a server runs (a new release bundle, on SIGHUP): requests already answering
/// keep the loader they started with, and its bundles stay open until they finish; new requests get the new one.
public final class LoaderHandle: Sendable {
    private let current: NIOLockedValueBox<(loader: OfflineLoader, generation: UInt64)>

    public init(_ loader: OfflineLoader) { current = NIOLockedValueBox((loader, 0)) }

    /// The loader answering now.
    public var loader: OfflineLoader { current.withLockedValue { $0.loader } }

    /// The loader answering now, and how many times it was replaced before (what a server's cache of answers is for).
    var snapshot: (loader: OfflineLoader, generation: UInt64) { current.withLockedValue { $0 } }

    /// Makes `loader` answer from now on.
    public func replace(with loader: OfflineLoader) { current.withLockedValue { $0 = (loader, $0.generation &+ 1) } }
}

/// Which requests a server answers from a bundle, and for which origin: by Host, then by path prefix. Used by
/// ``OfflineBundleMiddleware`` and ``OfflineBundleChannelServer`` alike.
public struct BundleRoute: Sendable {
    /// Requests whose Host is this (without port), or any Host when nil.
    public var host: String?
    /// Requests whose path starts with this prefix; it is removed before the origin is prepended.
    public var pathPrefix: String
    /// The origin the bundle recorded, like `https://docs.example.com`.
    public var origin: String

    public init(host: String? = nil, pathPrefix: String = "/", origin: String) {
        self.host = host?.lowercased()
        self.pathPrefix = pathPrefix.hasSuffix("/") ? pathPrefix : pathPrefix + "/"
        self.origin = origin.hasSuffix("/") ? String(origin.dropLast()) : origin
    }

    /// A Location value as this server serves it: the origin's absolute URLs, and its absolute paths, under the prefix.
    func localize(_ location: String) -> String {
        if location.lowercased().hasPrefix(origin.lowercased() + "/") { return pathPrefix + location.dropFirst(origin.count + 1) }
        if location.lowercased() == origin.lowercased() { return pathPrefix }
        if location.hasPrefix("/") && !location.hasPrefix("//") { return pathPrefix + location.dropFirst() }
        return location
    }

    /// The absolute URL a request target stands for under the first route that takes it (by Host, then path prefix).
    /// A target that is not an absolute path (`*`, or an HTTP/2 `:path` such as `@other-host/x`, which appended to the
    /// origin would name another authority) is taken by none.
    package static func key(target: String, host: String?, in routes: [BundleRoute]) -> (String, BundleRoute)? {
        guard target.utf8.first == UInt8(ascii: "/") else { return nil }
        for route in routes {
            if let wanted = route.host, wanted != host { continue }
            if route.pathPrefix == "/" { return (route.origin + target, route) }
            if target.hasPrefix(route.pathPrefix) { return (route.origin + "/" + target.dropFirst(route.pathPrefix.count), route) }
            if target == String(route.pathPrefix.dropLast()) { return (route.origin + "/", route) }
        }
        return nil
    }
}
