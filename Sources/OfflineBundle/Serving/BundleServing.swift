import Foundation
import HTTPTypes

/// The one answer step every server transport runs, without a web framework: route the request target to a request
/// key, apply the ``ServerPolicy`` (Host), ask the loader, check the recorded status, rewrite a same-origin
/// `Location` to this server, and say how the body is to be read. The Hummingbird middleware and the channel server
/// are thin around it: framing, a hop to a thread pool for file reads, `sendfile` and a cache of whole answers are
/// theirs; what the answer is, is decided here, once. A framework's middleware runs the whole exchange,
/// ``respond(method:target:host:headers:client:hop:collectBody:)`` (the request's body, the answer, the body opened
/// and checked), and only converts its request and the ``ServeResponse``.
///
/// ```swift
/// let serving = BundleServing(handle: LoaderHandle(loader), routes: [BundleRoute(origin: "https://docs.example.com")])
/// switch serving.answer(method: "GET", target: "/guide/", host: "localhost:8080", headers: fields) {
/// case .answer(let answer): …  // answer.status, answer.headers, answer.openBody()
/// case .status(let code): …    // 421 for a Host the policy refuses, 500 for a status the bundle cannot give
/// case .miss: …                // 404, or the next responder
/// }
/// ```
public struct BundleServing: Sendable {
    /// Where the loader comes from; a reloader replaces what it holds.
    public let handle: LoaderHandle
    /// Tried in order.
    public let routes: [BundleRoute]
    public let policy: ServerPolicy
    /// The request body bytes held at once by the requests ``respond(method:target:host:headers:client:hop:collectBody:)``
    /// answers (64 MiB): bodies are held only at URLs whose recorded answers are chosen by them.
    package let bodyBudget = BodyBudget(limit: 64 << 20)

    public init(handle: LoaderHandle, routes: [BundleRoute], policy: ServerPolicy = .open) {
        self.handle = handle
        self.routes = routes
        self.policy = policy
    }

    /// Serves the single origin of the loader `handle` holds now, at the root or under `pathPrefix`
    /// (``singleOriginRoute(of:pathPrefix:)``).
    ///
    /// - Throws: `BundleError` with code `.invalidArgument` when the bundles record more or fewer than one origin.
    public init(handle: LoaderHandle, pathPrefix: String = "/", policy: ServerPolicy = .open) throws {
        self.init(handle: handle, routes: [try Self.singleOriginRoute(of: handle.loader, pathPrefix: pathPrefix)], policy: policy)
    }

    /// The route for one bundle's single origin at the root (or under `pathPrefix`); the origin is read from the loader.
    ///
    /// - Throws: `BundleError` with code `.invalidArgument` when the bundles record more or fewer than one origin.
    public static func singleOriginRoute(of loader: OfflineLoader, pathPrefix: String = "/") throws -> BundleRoute {
        let origins = Set(loader.bundles.flatMap { $0.origins })
        guard origins.count == 1, let origin = origins.first else {
            throw BundleError(
                .invalidArgument, "the bundle records \(origins.count) origins (\(origins.sorted().joined(separator: ", "))); give a route for each")
        }
        return BundleRoute(pathPrefix: pathPrefix, origin: origin)
    }

    /// Whether the bundles match `method` at `target` by the request's body
    /// (``OfflineLoader/matchesBody(method:url:)``): a transport reads a body into memory only then.
    public func matchesBody(method: String, target: String, host: String?, loader: OfflineLoader? = nil) -> Bool {
        let loader = loader ?? handle.loader
        // Every GET of a served site asks: without request variants, the answer is no, before any routing.
        guard loader.bundles.contains(where: \.hasRequestVariants) else { return false }
        let (path, authority) = BundleRoute.originForm(target)
        let hostName = (authority ?? host).flatMap { HTTPRules.host(ofAuthority: $0) }
        guard let (url, _) = BundleRoute.key(target: path, host: hostName, in: routes) else { return false }
        return loader.matchesBody(method: method, url: url)
    }

    /// What a request gets.
    ///
    /// - Parameters:
    ///   - target: the request target as sent: origin form (`/path?query`), or absolute form (`http://host/path`),
    ///     whose authority then stands for the Host (RFC 9112 §3.2.2).
    ///   - host: the Host field (or HTTP/2 `:authority`) as sent, port and all; nil when there was none.
    ///   - loader: the loader to ask, when the caller took one from ``handle`` already (to pair it with a generation).
    ///   - body: the request's body, where a bundle may match it (see ``OfflineLoader/matchesBody(method:url:)``).
    public func answer(method: String, target: String, host: String?, headers: HTTPFields, body: Data? = nil, loader: OfflineLoader? = nil) -> ServeOutcome {
        let (path, authority) = BundleRoute.originForm(target)
        let hostName = (authority ?? host).flatMap { HTTPRules.host(ofAuthority: $0) }
        guard policy.accepts(host: hostName) else { return .status(421) }
        guard let (url, route) = BundleRoute.key(target: path, host: hostName, in: routes) else { return .miss }
        // One loader for the whole request: a reload meanwhile does not change which bundles answer it, and the
        // bundles it answers from stay open until its body has gone out.
        let loader = loader ?? handle.loader
        guard let response = loader.response(for: BundleRequest(method: method, url: url, headers: headers, body: body)) else { return .miss }
        // Mounting refuses statuses outside 200...599 and bodies on 204 and 304; checked again here, since a body after
        // a body-less head would be read by the client as the next response.
        guard (200...599).contains(response.status) else { return .status(500) }
        var fields = response.headers
        // A recorded redirect to the origin itself stays on this server.
        for name in [HTTPField.Name.location, .contentLocation] where fields[name] != nil {
            fields[values: name] = fields[values: name].map(route.localize)
        }
        let sendsBody = !(response.status == 204 || response.status == 304 || method == "HEAD")
        return .answer(ServeAnswer(response: response, headers: fields, url: url, loader: loader, sendsBody: sendsBody))
    }
}

extension BundleServing {
    /// Why a request ``answer(method:target:host:headers:body:loader:)`` found no answer for is a miss: no route takes
    /// its target, or the bundles' nearest recorded request differs (``OfflineLoader/explainMiss(_:)``).
    public func explainMiss(
        method: String, target: String, host: String?, headers: HTTPFields, body: Data? = nil, loader: OfflineLoader? = nil
    ) -> MissExplanation? {
        let (path, authority) = BundleRoute.originForm(target)
        let hostName = (authority ?? host).flatMap { HTTPRules.host(ofAuthority: $0) }
        guard let (url, _) = BundleRoute.key(target: path, host: hostName, in: routes) else {
            return MissExplanation(nearest: nil, nearestRequest: nil, differences: ["no route takes this target (serve --route, --origin)"], kind: .path)
        }
        return (loader ?? handle.loader).explainMiss(BundleRequest(method: method, url: url, headers: headers, body: body))
    }
}

/// What a request gets from ``BundleServing``.
public enum ServeOutcome: Sendable {
    /// The bundles answer.
    case answer(ServeAnswer)
    /// An answer without a body that the server makes itself: 421 for a Host the policy refuses, 500 for a recorded
    /// status outside 200...599.
    case status(Int)
    /// No route takes the target, or nothing in the bundles or rules answers it: 404, or the next responder.
    case miss
}

/// The bundles' answer to one request, ready for a transport to frame.
public struct ServeAnswer: Sendable {
    /// The loader's answer, as it recorded it.
    public let response: BundleResponse
    /// The header fields to send: the recorded ones, with a same-origin `Location` or `Content-Location` under this
    /// server. (`Age` among them is the answer's age now; a server that keeps the answer adds its resident time.)
    public let headers: HTTPFields
    /// The request key the target stood for.
    public let url: String
    /// The loader that answered, which counts a body that fails its checks.
    public let loader: OfflineLoader
    /// Whether a body follows the head: not for 204, 304 or HEAD.
    public let sendsBody: Bool

    public var status: Int { response.status }

    /// What answered (a bundle's label, `rules`, `last-seen`).
    public var source: BundleResponse.Source { response.source }

    /// How the body is best read: where the request stands, or off it (``BundleResponse/bodyPlace``); `.none` when
    /// no body goes out.
    public var bodyPlace: BundleResponse.BodyPlace { sendsBody ? response.bodyPlace : .none }

    /// The body's reader and its first two chunks, read and checked as far as they go (blocking unless ``bodyPlace`` is `.memory`);
    /// nil when no body goes out. A body that fails its checks is counted by the loader and thrown: the transport
    /// answers 500 (or, once a head went out, ends the response short).
    public func openBody(chunkSize: Int = 64 << 10) throws -> OpenedBody? {
        try counted { try response.openBody(chunkSize: chunkSize) }
    }

    /// The body opened where the caller stands, when it is in memory now; nil when it is not (read it with
    /// ``openBody(chunkSize:)`` off the caller then). See ``BundleResponse/openBodyIfInMemory(chunkSize:)``.
    public func openBodyIfInMemory(chunkSize: Int = 64 << 10) throws -> OpenedBody? {
        try counted { try response.openBodyIfInMemory(chunkSize: chunkSize) }
    }

    /// `open`'s body, when one goes out; a body that fails its checks is counted by the loader, then thrown.
    private func counted(_ open: () throws -> OpenedBody?) throws -> OpenedBody? {
        guard sendsBody else { return nil }
        do {
            return try open()
        } catch {
            recordError(error)
            throw error
        }
    }

    /// Counts a body that failed its checks after ``openBody(chunkSize:)`` (a later chunk of a streamed body).
    public func recordError(_ error: any Error) { loader.recordError(error, url: url) }

    /// The access-log record of this answer to `method` `target`.
    public func served(method: String, target: String) -> ServedRequest {
        ServedRequest(method: method, target: target, status: status, contentLength: headers[.contentLength], source: source)
    }
}
