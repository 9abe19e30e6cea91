import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL
import OfflineBundleServing
import ServiceLifecycle
import UnixSignals

/// A Hummingbird server run in the background: started on an address, its bound port known once it listens,
/// stopped by a graceful shutdown that lets open responses finish.
///
/// `packager demo`, the test suite's origins and the benchmark's file server run through it; it is not part of any
/// product (`packager serve` and services run `OfflineBundleChannelServer`, or their own Hummingbird application with
/// the middleware), so that the serving module compiles neither Hummingbird nor its HTTP/2.
package struct HummingbirdServer: Sendable {
    /// The port the server listens on (the one picked, when it was asked for port 0).
    package let port: Int
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    /// Starts a server for `responder` and returns once it listens.
    ///
    /// - Parameters:
    ///   - host: the address to listen on.
    ///   - port: the port; 0 picks a free one.
    ///   - shutdownSignals: signals that stop the server gracefully (none by default: ``stop()`` does).
    ///   - tls: HTTPS with HTTP/2 by ALPN; plain HTTP/1.1 when nil.
    /// - Throws: the listener's error (an address in use, say) when the server does not come up; ``TLSFileError``
    ///   when a certificate or key file cannot be used.
    package static func start<Responder: HTTPResponder>(
        responder: Responder, host: String = "127.0.0.1", port: Int = 0, serverName: String? = nil, shutdownSignals: [UnixSignal] = [],
        tls: ServerTLS? = nil, logger: Logger = Logger(label: "offline-bundle-server", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> HummingbirdServer where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let server: HTTPServerBuilder = try tls.map { try .http2Upgrade(tlsConfiguration: $0.configuration()) } ?? .http1()
        let app = Application(
            responder: responder, server: server, configuration: .init(address: .hostname(host, port: port), serverName: serverName),
            onServerRunning: { channel in
                continuation.yield(channel.localAddress?.port ?? port)
                continuation.finish()
            }, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: shutdownSignals, logger: logger))
        let task = Task {
            // Ends the wait below also when the server never comes up.
            defer { continuation.finish() }
            try await group.run()
        }
        var bound: Int?
        for await value in ports { bound = value }
        guard let bound else {
            // The server never listened: the group ended (its error says why) or this task was cancelled, in which
            // case the group is stopped before waiting for it.
            await group.triggerGracefulShutdown()
            try await task.value
            throw CancellationError()
        }
        return HummingbirdServer(port: bound, group: group, task: task)
    }

    /// Stops the server gracefully and waits until it has stopped.
    package func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }

    /// Waits until the server stops (by ``stop()`` or one of its shutdown signals).
    package func wait() async throws {
        try await task.value
    }
}
