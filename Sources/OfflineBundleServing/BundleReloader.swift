import Foundation
import OfflineBundle
import ServiceLifecycle
import Synchronization

/// Mounts a server's bundles again and swaps them into its ``OfflineBundle/LoaderHandle``: when told to (on SIGHUP,
/// say: ``reload(because:)``), and, while it runs as a swift-service-lifecycle `Service`, when a bundle file is
/// replaced or changed. Requests already answering finish on the loader they started with; a set of bundles that does
/// not mount is reported and the loader answering keeps answering.
///
/// A file is taken as changed when its device, inode, size, modification time or status-change time differ from when
/// it was last mounted (a file written in place with its modification time set back still shows in the status-change
/// time). A set that failed to mount is not tried again until a file changes again, or ``reload(because:)``.
///
/// ```swift
/// let reloader = BundleReloader(paths: ["release.zip"], handle: handle, mount: { try OfflineLoader(path: "release.zip") }) { event in
///     print(event)
/// }
/// let group = ServiceGroup(configuration: .init(services: [server, reloader], logger: logger))
/// ```
public final class BundleReloader: Service, Sendable {
    /// What a reload did.
    public enum Event: Sendable, CustomStringConvertible {
        /// The new loader answers from now on.
        case reloaded(OfflineLoader, reason: String)
        /// The bundles did not mount; the loader answering keeps answering.
        case failed(any Error, reason: String)

        public var description: String {
            switch self {
            case .reloaded(let loader, let reason):
                "reloaded (\(reason)): \(loader.bundles.map(\.entryCount).reduce(0, +)) entries"
            case .failed(let error, let reason):
                "not reloaded (\(reason)): \(error)"
            }
        }
    }

    public let paths: [String]
    public let handle: LoaderHandle
    /// Seconds between checks of the files while ``run()`` runs; 0 checks none (reloads only when told to).
    public let interval: Double
    private let mount: @Sendable () throws -> OfflineLoader
    private let report: @Sendable (Event) -> Void
    /// What each file was when last mounted.
    private let seen: Mutex<[String: BundleFile.Identity?]>

    /// - Parameters:
    ///   - paths: the bundle files watched.
    ///   - handle: the handle whose loader a reload replaces.
    ///   - interval: seconds between checks of the files; 0 checks none.
    ///   - mount: mounts the bundles (and rules) again, off the request path.
    ///   - report: told of every reload and every failed one.
    public init(
        paths: [String], handle: LoaderHandle, interval: Double = 2, mount: @escaping @Sendable () throws -> OfflineLoader,
        report: @escaping @Sendable (Event) -> Void
    ) {
        self.paths = paths
        self.handle = handle
        self.interval = interval
        self.mount = mount
        self.report = report
        seen = Mutex(Dictionary(uniqueKeysWithValues: paths.map { ($0, BundleFile.identity(ofPath: $0)) }))
    }

    /// Mounts every bundle again; on success the new loader answers new requests, on failure the old one stays.
    public func reload(because reason: String) {
        let identities = Dictionary(uniqueKeysWithValues: paths.map { ($0, BundleFile.identity(ofPath: $0)) })
        // Not again for the same files after a failure: a half-copied bundle is retried when it changes again.
        defer { seen.withLock { $0 = identities } }
        do {
            let loader = try mount()
            handle.replace(with: loader)
            report(.reloaded(loader, reason: reason))
        } catch {
            report(.failed(error, reason: reason))
        }
    }

    /// Checks the files every ``interval`` seconds until cancelled or a graceful shutdown, reloading when one changed.
    public func run() async throws {
        guard interval > 0 else { return }
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(self.interval))
                if !Task.isCancelled && self.changed { self.reload(because: "a bundle file changed") }
            }
        }
    }

    /// Whether a file differs from what was last mounted.
    var changed: Bool { seen.withLock { seen in paths.contains { BundleFile.identity(ofPath: $0) != seen[$0] } } }
}
