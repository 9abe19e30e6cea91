import Foundation
import HTTPTypes
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflineBundle
import ServiceLifecycle
import UnixSignals

/// What one request got, for an access log.
public struct ServedRequest: Sendable {
    /// The client's address, when known.
    public var client: String?
    public var method: String
    /// The request target as the client sent it.
    public var target: String
    public var status: Int
    /// The response's Content-Length, when it has one.
    public var contentLength: String?
    /// What answered; nil for a miss, a refused Host or an error.
    public var source: BundleResponse.Source?

    public init(client: String?, method: String, target: String, status: Int, contentLength: String?, source: BundleResponse.Source?) {
        self.client = client
        self.method = method
        self.target = target
        self.status = status
        self.contentLength = contentLength
        self.source = source
    }
}

/// Serves bundles over plain HTTP/1.1 from a SwiftNIO channel handler, without a web framework: the answers of
/// ``OfflineBundleMiddleware`` (the same loader, routes and checks) at the rate the network stack allows.
///
/// On this machine's benchmark a Hummingbird route answering a fixed body reaches half of nginx's rate and a bare
/// SwiftNIO handler all of it (docs/BENCHMARKS.md); `packager serve` uses this server for plain HTTP and Hummingbird
/// (``OfflineBundleServer``) for HTTPS with HTTP/2.
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
    /// The port it listens on, once ``start(handle:routes:host:port:serverName:idleTimeout:responseCacheSize:accepts:served:group:)`` returned.
    public let port: Int
    private let channel: any Channel

    private init(port: Int, channel: any Channel) {
        self.port = port
        self.channel = channel
    }

    /// Starts listening and returns once it does.
    ///
    /// - Parameters:
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
    ///   - accepts: whether a request's Host (without port; nil when it sent none) is answered; others get 421. It must
    ///     give the same result for the same Host: an answer kept for a Host value is given again without asking.
    ///   - served: called after each response head, for an access log.
    ///   - group: the event loops that answer (by default NIO's shared group, a loop per core).
    public static func start(
        handle: LoaderHandle, routes: [BundleRoute], host: String = "127.0.0.1", port: Int = 0, serverName: String? = nil,
        idleTimeout: TimeAmount = .seconds(60), responseCacheSize: Int = 32 << 20, accepts: @escaping @Sendable (String?) -> Bool = { _ in true },
        served: (@Sendable (ServedRequest) -> Void)? = nil, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> OfflineBundleChannelServer {
        let cache = responseCacheSize > 0 ? ResponseCache(budget: responseCacheSize) : nil
        let settings = BundleChannelHandler.Settings(
            handle: handle, routes: routes, serverName: serverName, idleTimeout: idleTimeout, accepts: accepts, served: served)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            // A client that half-closes after its requests still gets every answer (the handler closes once they went).
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
                    try channel.pipeline.syncOperations.addHandler(BundleChannelHandler(settings, cache: cache))
                }
            }
            .bind(host: host, port: port).get()
        return OfflineBundleChannelServer(port: channel.localAddress?.port ?? port, channel: channel)
    }

    /// Serves until a graceful shutdown (a service group's signal), then stops listening.
    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await channel.closeFuture.get()
        } onGracefulShutdown: {
            self.channel.close(promise: nil)
        }
    }

    /// Serves until one of `shutdownSignals` (or a service group's graceful shutdown), then stops listening.
    public func wait(shutdownSignals: [UnixSignal]) async throws {
        let group = ServiceGroup(
            configuration: .init(services: [self], gracefulShutdownSignals: shutdownSignals, logger: Logger(label: "offline-bundle-channel-server")))
        try await group.run()
    }

    /// Stops listening.
    public func stop() async {
        try? await channel.close()
    }
}
