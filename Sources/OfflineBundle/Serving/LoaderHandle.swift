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

    /// How many times the loader was replaced: what a cache of answers from it is kept for, read without the loader.
    package var generation: UInt64 { current.withLock { $0.generation } }

    /// Makes `loader` answer from now on.
    public func replace(with loader: OfflineLoader) { current.withLock { $0 = (loader, $0.generation &+ 1) } }

    /// The generation whose replacement last failed to mount, while no other reload has started since.
    private let failedReplacement = Mutex<UInt64?>(nil)

    /// A reload starts: whether it fails is not known yet.
    package func reloadStarted() { failedReplacement.withLock { $0 = nil } }

    /// The reload that started last failed: the loader answering stays, with no replacement on its way.
    package func reloadFailed() {
        let generation = snapshot.generation
        failedReplacement.withLock { $0 = generation }
    }

    /// Whether `generation` is answering after its replacement failed to mount, and no reload has started since: a
    /// request that needs the replacement need not wait for it.
    package func replacementFailed(for generation: UInt64) -> Bool { failedReplacement.withLock { $0 == generation } }
}
