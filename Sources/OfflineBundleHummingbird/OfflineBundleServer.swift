import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import UnixSignals

/// A Hummingbird server run in the background: started on an address, its bound port known once it listens,
/// stopped by a graceful shutdown that lets open responses finish.
///
/// `packager serve`, `packager demo`, the test suite's origins and the benchmark's file server all run through
/// it; a service that serves a bundle beside other work can too:
///
/// ```swift
/// let router = Router()
/// router.add(middleware: try OfflineBundleMiddleware(loader: loader))
/// let server = try await OfflineBundleServer.start(responder: router.buildResponder(), port: 0)
/// print("serving on port \(server.port)")
/// // …
/// await server.stop()
/// ```
public struct OfflineBundleServer: Sendable {
    /// The port the server listens on (the one picked, when it was asked for port 0).
    public let port: Int
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    /// Starts a server for `responder` and returns once it listens.
    ///
    /// - Parameters:
    ///   - host: the address to listen on.
    ///   - port: the port; 0 picks a free one.
    ///   - shutdownSignals: signals that stop the server gracefully (none by default: ``stop()`` does).
    /// - Throws: the listener's error (an address in use, say) when the server does not come up.
    public static func start<Responder: HTTPResponder>(
        responder: Responder, host: String = "127.0.0.1", port: Int = 0, serverName: String? = nil, shutdownSignals: [UnixSignal] = [],
        logger: Logger = Logger(label: "offline-bundle-server", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> OfflineBundleServer where Responder.Context == BasicRequestContext {
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            responder: responder, configuration: .init(address: .hostname(host, port: port), serverName: serverName),
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
        return OfflineBundleServer(port: bound, group: group, task: task)
    }

    /// Stops the server gracefully and waits until it has stopped.
    public func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }

    /// Waits until the server stops (by ``stop()`` or one of its shutdown signals).
    public func wait() async throws {
        try await task.value
    }
}
