import Foundation
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import OfflineBundle
import ServiceLifecycle
import UnixSignals

/// Serves bundles over HTTP/1.1, or HTTPS with HTTP/2 by ALPN, from a SwiftNIO channel handler, without a web
/// framework: the answers of the runtime's answer step (`BundleServing`, which the Hummingbird middleware runs too: the
/// same routes, policy, loader and checks) at the rate the network stack allows.
///
/// In docs/BENCHMARKS.md's serve rows a Hummingbird route answering a fixed body reaches less of nginx's rate than a
/// bare SwiftNIO handler; `packager serve` uses this server, over plain HTTP and over HTTPS.
///
/// With `tls`, a client that offers `h2` by ALPN is answered over HTTP/2 (one request per stream, its frames turned into
/// request parts and the handler's response bytes into frames), others over HTTP/1.1; the same handler answers both,
/// with the same response cache, whose bodies are then kept as bytes (TLS cannot send a file's span with `sendfile`).
/// Over HTTP/2, an answer the cache holds is given on the connection, without a stream channel.
///
/// Response heads are written as bytes, without NIO's HTTP encoder. A plain GET (no conditional or Range header) answered
/// once is answered again from a cache of whole responses (the head as bytes, the body as checked, or a span of the
/// bundle file sent with `sendfile`). Otherwise, bodies in memory (the mount's cache of inflated bodies, rule content)
/// and bodies of at most 64 KiB are answered on the event loop (one read, from the page cache as a rule, as nginx
/// reads); larger ones are read in chunks on NIO's thread pool, one chunk in flight per response. A body not yet
/// checked in this mount is checked as it goes: one that fails before its head went out is a 500, one that fails
/// later closes the connection short of its Content-Length. Requests on a connection are answered in order; a request
/// that cannot be parsed is a 400 and ends the connection.
public final class OfflineBundleChannelServer: Service, Sendable {
    /// HTTPS for the server: a certificate chain and its key.
    public typealias TLS = ServerTLS

    /// The port it listens on, once ``start(serving:host:port:serverName:idleTimeout:responseCacheSize:requestBodyBudget:requestBodyTimeout:tls:group:)`` returned.
    public let port: Int
    private let channel: any Channel
    private let connections: Connections
    private let grace = NIOLockedValueBox(TimeAmount.seconds(25))

    /// How long a graceful shutdown lets the answers in flight finish (25 s by default, under the 30 s Kubernetes waits
    /// after its SIGTERM); connections still open then are closed.
    public var shutdownGrace: TimeAmount {
        get { grace.withLockedValue { $0 } }
        set { grace.withLockedValue { $0 = newValue } }
    }

    private init(port: Int, channel: any Channel, connections: Connections) {
        self.port = port
        self.channel = channel
        self.connections = connections
    }

    /// The connections open now: what a graceful shutdown asks to finish and waits for.
    final class Connections: Sendable {
        private let open = NIOLockedValueBox([ObjectIdentifier: any Channel]())

        func add(_ channel: any Channel) {
            let id = ObjectIdentifier(channel)
            open.withLockedValue { $0[id] = channel }
            channel.closeFuture.whenComplete { [self] _ in _ = open.withLockedValue { $0.removeValue(forKey: id) } }
        }

        var all: [any Channel] { open.withLockedValue { Array($0.values) } }
        var isEmpty: Bool { open.withLockedValue { $0.isEmpty } }
    }

    /// Starts listening and returns once it does.
    ///
    /// - Parameters:
    ///   - serving: the answer step: routes, the server policy (Host values answered, others 421; the access log, told
    ///     after each response head) and the handle whose loader answers.
    ///   - serverName: the `Server` header every response carries, when given.
    ///   - idleTimeout: a connection that sends nothing for this long while its answers make no progress (none going
    ///     out, or one the client stopped reading: a write timeout, as nginx's `send_timeout`) is closed, so a client
    ///     that opens connections and goes quiet, or stops reading a large body, cannot hold the server's descriptors
    ///     and buffers. It is checked once per period, so such a connection closes after one to two periods. (Whatever
    ///     the client does, a connection's memory is bounded: requests pipelined while answers are unsent wait, and
    ///     the connection is not read until the client reads.)
    ///   - responseCacheSize: memory for whole responses to plain GET requests (no conditional or Range header), kept
    ///     ready to send again: the head as bytes and the body as checked and sent, bodies of at most 4 MiB; shared by
    ///     the event loops, emptied when the handle's loader is replaced. 0 keeps none; nor is anything kept from a
    ///     loader with a last-seen cache (what it keeps later takes the bundle's place).
    ///   - requestBodyBudget: the request body bytes all connections may hold at once. A body is read into memory
    ///     only for a method other than GET or HEAD at a URL whose recorded answers are chosen by their request's body
    ///     (``OfflineLoader/matchesBody(method:url:)``), at most 1 MiB each (more is a 413); past the budget, such a
    ///     request is answered 503, so connections that send bodies at once cost the budget, not a megabyte each. One
    ///     client address holds at most an eighth of it (at least 1 MiB), and a body with a `Content-Length` is
    ///     reserved whole before it is read: a 503 (or a 413 past 1 MiB, on any request) goes out before its body, and
    ///     the connection closes. `Expect: 100-continue` gets its 100 when the body will be read.
    ///   - requestBodyTimeout: how long a body being held may make no progress before its connection is closed and its
    ///     budget given back (nginx's `client_body_timeout`).
    ///   - tls: HTTPS, with HTTP/2 for clients that offer it by ALPN; plain HTTP/1.1 when nil. A connection whose
    ///     handshake has not ended within `idleTimeout` is closed, and so is an HTTP/2 connection that neither sends
    ///     anything nor takes any of its answers' bytes for that long.
    ///   - group: the event loops that answer (by default NIO's shared group, a loop per core).
    /// - Throws: ``TLSFileError`` when a certificate or key file cannot be used; the listener's
    ///   error (an address in use, say) when it cannot listen.
    public static func start(
        serving: BundleServing, host: String = "127.0.0.1", port: Int = 0, serverName: String? = nil, idleTimeout: TimeAmount = .seconds(60),
        responseCacheSize: Int = 32 << 20, requestBodyBudget: Int = 64 << 20, requestBodyTimeout: TimeAmount = .seconds(10), tls: TLS? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> OfflineBundleChannelServer {
        let cache = responseCacheSize > 0 ? ResponseCache(budget: responseCacheSize) : nil
        var settings = BundleChannelHandler.Settings(
            serving: serving, serverName: serverName, idleTimeout: idleTimeout, bodyBudget: BodyBudget(limit: requestBodyBudget))
        settings.bodyTimeout = requestBodyTimeout
        let secure = try tls.map { try NIOSSLContext(configuration: $0.configuration()) }
        settings.sendfile = secure == nil
        let connections = Connections()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            // A client that half-closes after its requests still gets every answer (the handler closes once they went).
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { [settings] channel in
                connections.add(channel)
                if let secure { return SecureServing.configure(channel, context: secure, settings: settings, cache: cache) }
                return channel.eventLoop.makeCompletedFuture { try BundleChannelHandler.addHTTP1(to: channel, settings: settings, cache: cache) }
            }
            .bind(host: host, port: port).get()
        return OfflineBundleChannelServer(port: channel.localAddress?.port ?? port, channel: channel, connections: connections)
    }

    /// Starts listening for `handle`'s loader through `routes` under `policy`, and returns once it does (see
    /// ``start(serving:host:port:serverName:idleTimeout:responseCacheSize:requestBodyBudget:requestBodyTimeout:tls:group:)``).
    public static func start(
        handle: LoaderHandle, routes: [BundleRoute], policy: ServerPolicy = .open, host: String = "127.0.0.1", port: Int = 0,
        serverName: String? = nil, idleTimeout: TimeAmount = .seconds(60), responseCacheSize: Int = 32 << 20, requestBodyBudget: Int = 64 << 20,
        requestBodyTimeout: TimeAmount = .seconds(10), tls: TLS? = nil, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> OfflineBundleChannelServer {
        try await start(
            serving: BundleServing(handle: handle, routes: routes, policy: policy), host: host, port: port, serverName: serverName,
            idleTimeout: idleTimeout, responseCacheSize: responseCacheSize, requestBodyBudget: requestBodyBudget, requestBodyTimeout: requestBodyTimeout,
            tls: tls, group: group)
    }

    /// Serves until a graceful shutdown (a service group's signal), then shuts down gracefully: it stops accepting at
    /// once, closes idle connections, lets the answers in flight (and requests already received) finish, closing each
    /// connection after its last answer (HTTP/2 connections get a GOAWAY), and returns once none is open, or after
    /// ``shutdownGrace``, when it closes those left.
    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await channel.closeFuture.get()
        } onGracefulShutdown: {
            self.channel.close(promise: nil)
            for connection in self.connections.all { connection.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
        }
        let deadline = NIODeadline.now() + shutdownGrace
        while !connections.isEmpty && NIODeadline.now() < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        for connection in connections.all { connection.close(promise: nil) }
    }

    /// Serves until one of `shutdownSignals` (or a service group's graceful shutdown), then stops listening.
    public func wait(shutdownSignals: [UnixSignal]) async throws {
        let group = ServiceGroup(
            configuration: .init(services: [self], gracefulShutdownSignals: shutdownSignals, logger: Logger(label: "offline-bundle-channel-server")))
        try await group.run()
    }

    /// Stops listening, and closes every connection at once (answers in flight are cut: ``run()``'s graceful shutdown
    /// lets them finish).
    public func stop() async {
        try? await channel.close()
        for connection in connections.all { connection.close(promise: nil) }
    }
}
