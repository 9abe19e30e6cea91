import Synchronization

/// A loader that can be replaced while a server runs (a new release bundle, on SIGHUP): requests already answering
/// keep the loader they started with, and its bundles stay open until they finish; new requests get the new one.
public final class LoaderHandle: Sendable {
    private let current: Mutex<(loader: OfflineLoader, generation: UInt64)>

    public init(_ loader: OfflineLoader) { current = Mutex((loader, 0)) }

    /// The loader answering now.
    public var loader: OfflineLoader { current.withLock { $0.loader } }

    /// The loader answering now, and how many times it was replaced before (what a server's cache of answers is for).
    public var snapshot: (loader: OfflineLoader, generation: UInt64) { current.withLock { $0 } }

    /// Makes `loader` answer from now on.
    public func replace(with loader: OfflineLoader) { current.withLock { $0 = (loader, $0.generation &+ 1) } }
}
