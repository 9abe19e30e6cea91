import Foundation
import OfflineBundle
import Synchronization
import Tracing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The loader OfflineURLProtocol asks, installed for the whole process.

extension OfflineURLProtocol {
    struct Installed {
        var loader: OfflineLoader
        var network: URLSession
        var tracer: (any Tracer)?
    }

    /// Process-wide: URLSession creates protocol instances itself, so the loader cannot be handed to them.
    static let installed = Mutex<Installed?>(nil)

    /// Makes `loader` the one this protocol asks, for the whole process.
    ///
    /// - Parameters:
    ///   - fallbackSession: the session network requests go through (network-first answers); by default an
    ///     ephemeral session of its own. It must not list this protocol.
    ///   - tracer: where each request this protocol takes is traced (`OfflineLoader.loadSpanName`, the attributes
    ///     `OfflineLoader.load` gives); nil: `InstrumentationSystem.tracer`. A request sent to the network carries the
    ///     trace in its headers.
    /// - Throws: `BundleError` with code `.invalidArgument` when another loader is installed (installing the same one
    ///   again is allowed, and replaces the fallback session and tracer), or when the fallback session lists this
    ///   protocol.
    public static func installProcessWide(_ loader: OfflineLoader, fallbackSession: URLSession? = nil, tracer: (any Tracer)? = nil) throws {
        if let fallbackSession, (fallbackSession.configuration.protocolClasses ?? []).contains(where: { $0 == OfflineURLProtocol.self }) {
            throw BundleError(
                .invalidArgument, "the fallback session lists OfflineURLProtocol, so network requests would come back to the bundle; give it a plain session")
        }
        try installed.withLock { installed in
            if let current = installed, current.loader !== loader {
                throw BundleError(
                    .invalidArgument,
                    "another OfflineLoader is installed for this process; call OfflineURLProtocol.uninstallProcessWide() first")
            }
            installed = Installed(
                loader: loader, network: fallbackSession ?? installed?.network ?? URLSession(configuration: .ephemeral), tracer: tracer ?? installed?.tracer)
        }
    }

    /// Removes the installed loader; requests this protocol would have taken then go to the network.
    public static func uninstallProcessWide() { installed.withLock { $0 = nil } }

    /// The installed loader, if any.
    public static var processWideLoader: OfflineLoader? { installed.withLock { $0?.loader } }

    static var current: Installed? { installed.withLock { $0 } }
    static var loader: OfflineLoader? { current?.loader }
}

extension URLSessionConfiguration {
    /// Lists ``OfflineURLProtocol`` first in this configuration's protocols and installs `loader` for the whole
    /// process (see ``OfflineURLProtocol/installProcessWide(_:fallbackSession:tracer:)``).
    ///
    /// - Throws: `BundleError` with code `.invalidArgument` when another loader is already installed.
    public func useProcessWideOfflineBundle(_ loader: OfflineLoader, fallbackSession: URLSession? = nil, tracer: (any Tracer)? = nil) throws {
        try OfflineURLProtocol.installProcessWide(loader, fallbackSession: fallbackSession, tracer: tracer)
        protocolClasses = [OfflineURLProtocol.self] + (protocolClasses ?? []).filter { $0 != OfflineURLProtocol.self }
    }
}
