import Foundation

/// What one build shares between its crawl and its write, made once and passed to both (``Crawler`` and
/// ``BundleWriter``'s initializer), so neither is configured after it is made.
///
/// - the scratch folder beside the output: crawl body files, the entry store, the job queue's overflow;
/// - the overflow file: prepared (compressed) bodies that did not fit in memory, read back as the bundle is written;
/// - the memory budgets: received bodies (which the writer's compressed ones draw on afterwards, so the two together
///   stay within it) and, when bodies are compressed while the crawl goes on, prepared ones;
/// - the compression level.
final class BuildSession: Sendable {
    let scratch: ScratchFolder
    let overflow: OverflowFile
    /// Received bodies waiting to be read for links and compressed; beyond it they go to crawl body files.
    let received: MemoryBudget
    /// Compressed bodies waiting for the write; beyond it they go to the overflow file. Nil when bodies are not
    /// compressed during the crawl (the writer then does it).
    let prepared: MemoryBudget?
    let compressionLevel: Int
    /// The responses this build stored, kept beside the output until a build of it succeeds (``BuildJournal``);
    /// nil keeps none.
    let journal: BuildJournal?

    init(
        scratch: ScratchFolder, received: MemoryBudget, prepared: MemoryBudget?, compressionLevel: Int = BundleWriter.defaultCompressionLevel,
        journal: BuildJournal? = nil
    ) {
        self.journal = journal
        self.scratch = scratch
        overflow = OverflowFile(in: scratch)
        self.received = received
        self.prepared = prepared
        self.compressionLevel = compressionLevel
    }

    /// A build's session in `folder` (the output's): 64 MiB for bodies in all, 48 for received ones (256 KiB each at
    /// most) and 16 for prepared ones. Neither grows with the site.
    static func forBuild(in folder: String, compressionLevel: Int, journal: BuildJournal? = nil) throws -> BuildSession {
        BuildSession(
            scratch: try ScratchFolder(in: folder), received: MemoryBudget(total: 48 << 20, perBody: 256 << 10),
            prepared: MemoryBudget(total: 16 << 20, perBody: .max), compressionLevel: compressionLevel, journal: journal)
    }

    /// Removes the scratch folder and what is in it.
    func remove() { scratch.remove() }
}
