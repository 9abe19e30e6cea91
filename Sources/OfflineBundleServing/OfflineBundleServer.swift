import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import UnixSignals

/// A Hummingbird server run in the background: started on an address, its bound port known once it listens,
/// stopped by a graceful shutdown that lets open responses finish.
///
/// `packager demo`, the test suite's origins and the benchmark's file server run through it (`packager serve` runs
/// ``OfflineBundleChannelServer``); a service that serves a bundle beside other work can too:
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
    /// HTTPS for a server (this one, or ``OfflineBundleChannelServer``): a certificate chain and its private key, both
    /// PEM files. The server then speaks HTTP/2 to clients that offer it by ALPN, and HTTP/1.1 to the others.
    public struct TLS: Sendable {
        /// A PEM file with the server's certificate first, then any intermediate certificates.
        public var certificateChain: String
        /// A PEM file with the certificate's private key.
        public var privateKey: String
        /// When set, a PEM file of CAs: every client must present a certificate signed by one (mutual TLS).
        public var clientCA: String?

        public init(certificateChain: String, privateKey: String, clientCA: String? = nil) {
            self.certificateChain = certificateChain
            self.privateKey = privateKey
            self.clientCA = clientCA
        }

        /// The server's TLS configuration, or an error that names the file and says what is wrong with it.
        func configuration() throws -> TLSConfiguration {
            let chain: [NIOSSLCertificate]
            do {
                chain = try NIOSSLCertificate.fromPEMFile(certificateChain)
            } catch {
                throw TLSFileError(message: "\(certificateChain) holds no PEM certificate that can be read")
            }
            guard !chain.isEmpty else { throw TLSFileError(message: "\(certificateChain) holds no PEM certificate") }
            let key: NIOSSLPrivateKey
            do {
                key = try NIOSSLPrivateKey(file: privateKey, format: .pem)
            } catch {
                throw TLSFileError(message: "\(privateKey) holds no PEM private key that can be read")
            }
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
            configuration.applicationProtocols = ["h2", "http/1.1"]
            if let clientCA {
                configuration.certificateVerification = .noHostnameVerification
                configuration.trustRoots = .file(clientCA)
            }
            return configuration
        }
    }

    /// A certificate or key file that cannot be used, in words.
    public struct TLSFileError: Error, Sendable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

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
    ///   - tls: HTTPS with HTTP/2 by ALPN; plain HTTP/1.1 when nil.
    /// - Throws: the listener's error (an address in use, say) when the server does not come up; ``TLSFileError``
    ///   when a certificate or key file cannot be used.
    public static func start<Responder: HTTPResponder>(
        responder: Responder, host: String = "127.0.0.1", port: Int = 0, serverName: String? = nil, shutdownSignals: [UnixSignal] = [],
        tls: TLS? = nil, logger: Logger = Logger(label: "offline-bundle-server", factory: { _ in SwiftLogNoOpLogHandler() })
    ) async throws -> OfflineBundleServer where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
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
