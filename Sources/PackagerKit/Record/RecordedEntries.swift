import CMalloc
import Foundation
import NIOConcurrencyHelpers
import Synchronization

/// Where a recording's exchanges go on their way to a bundle, as a crawl's responses do (``Crawler``): each entry is
/// kept in a scratch file as it is taken (``EntryStore``), and its body hashed and compressed at once on every core
/// (``BodyPipeline``), kept within 4 MiB for prepared bodies and in its overflow file beyond. Memory
/// then holds neither the recording's bodies nor its entries, and the compression runs while the recording is read.
package final class RecordedEntries: Sendable {
    let session: BuildSession
    private let store: EntryStore
    private let pipeline: BodyPipeline?
    private let superseded = Mutex<Set<Int>>([])

    /// At most this many bytes of bodies (2 MiB) wait for the compression: past it, ``add(_:ownsFile:)`` waits (a second at
    /// most), so that a recording read faster than it is compressed does not fill memory.
    static let waitingBytes = 2 << 20
    /// The bytes of bodies in memory submitted and not yet compressed, by entry, and their sum.
    private let inFlight = NIOLockedValueBox((bytes: 0, byEntry: [Int: Int]()))

    /// Entries kept in a scratch folder beside `output` (where the bundle is written: the same file system).
    package init(beside output: String, compressionLevel: Int) throws {
        let folder = (output as NSString).deletingLastPathComponent
        // 4 MiB for compressed bodies waiting for the write (a build's 16: the import's reader and its pages hold
        // more of the rest), its overflow file beyond.
        let session = BuildSession(
            scratch: try ScratchFolder(in: folder.isEmpty ? "." : folder), received: MemoryBudget(total: 0, perBody: 0),
            prepared: MemoryBudget(total: 4 << 20, perBody: .max), compressionLevel: compressionLevel)
        self.session = session
        let store = EntryStore(path: session.scratch.path(for: "entries"))
        self.store = store
        let inFlight = self.inFlight
        pipeline = session.prepared.map { kept in
            BodyPipeline(level: compressionLevel, memory: session.received, kept: kept, overflow: session.overflow) {
                store.setPrepared($0, $1)
                let index = $0
                inFlight.withLockedValue { if let bytes = $0.byEntry.removeValue(forKey: index) { $0.bytes -= bytes } }
            }
        }
    }

    /// How many entries were taken (superseded ones included).
    var count: Int { store.count }

    /// Takes `entry`; its index. `ownsFile`: its body is a file of this import's own, deleted once compressed.
    ///
    /// The reader goes no faster than the compression: memory does not fill with a recording read ahead of it.
    func add(_ entry: RecordedExchange, ownsFile: Bool) -> Int {
        let index = store.append(entry)
        guard let pipeline, entry.body != nil else { return index }
        // A body that failed to compress is not delivered: the wait is bounded, not a count that must come back to 0.
        var waited = 0
        while waited < 2_000, inFlight.withLockedValue({ $0.bytes }) >= Self.waitingBytes {
            usleep(500)
            waited += 1
        }
        if case .data(let data) = entry.body {
            inFlight.withLockedValue {
                $0.bytes += data.count
                $0.byEntry[index] = data.count
            }
        }
        pipeline.submit(.init(index: index, entry: entry, ownsFile: ownsFile, budgeted: false))
        return index
    }

    /// The URL of the entry at `index` (read back from the store).
    func url(of index: Int) -> String? { try? store.entry(at: index).url }

    /// The entry at `index` was replaced by a later one: it is left out of the bundle.
    func supersede(_ index: Int) { superseded.withLock { _ = $0.insert(index) } }

    /// Writes the bundle, once every body is prepared.
    package func write(to path: String, options: BundleWriter.Options) throws -> BundleWriter.Summary {
        pipeline?.finishBlocking()
        // What reading the recording held (its places, the revisits' payload index, the request keys) was freed by the
        // reader's threads: given back before the writer takes its own, the peak is the larger of the two, not their sum.
        packager_release_free_memory()
        var writer = BundleWriter(options: options, session: session, store: store)
        writer.superseded = superseded.withLock { $0 }
        return try writer.write(to: path)
    }

    /// Removes the scratch folder: once the bundle is written (or will not be).
    package func remove() { session.remove() }
}
