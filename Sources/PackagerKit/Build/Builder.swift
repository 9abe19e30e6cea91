import Crypto
import Foundation
import NIOPosix
import OfflineBundle

/// `packager build`: crawls what a declaration names and writes the bundle.
///
/// The bundle is written only when the build succeeds (every declared URL
/// fetched, failures within `max-errors`), atomically, so a pipeline never
/// ships a partial crawl and a previous bundle at the output path survives a
/// failed or interrupted build. Spool files are removed in every case.
public struct Builder: Sendable {
    /// Settings the command line adds to the declaration.
    public struct Options: Sendable {
        /// Overrides the declaration's `output`.
        public var output: String?
        /// Overrides the declaration's `max-errors`.
        public var maxErrors: Int?
        /// Signs the bundle with this key.
        public var signingKey: Curve25519.Signing.PrivateKey?
        /// Recorded as the bundle's creation time.
        public var createdAt: Date?
        /// Deflate level for text bodies, 1 (fastest) to 12 (smallest), libdeflate's scale.
        public var compressionLevel: Int
        /// Stores `index.bin` as it is rather than deflated (``BundleWriter/Options/storesIndex``).
        public var storesIndex = false
        /// Whether the build keeps what it fetched in a journal beside the output until it succeeds, and resumes from
        /// the journal an interrupted build of the same declaration left there (``Resume``).
        public var resume = Resume.off

        /// What a build does with the journal beside its output (`.NAME.packager-journal`).
        public enum Resume: Sendable {
            /// Neither reads nor keeps one.
            case off
            /// Takes what an interrupted build of the same declaration kept there, and keeps what it fetches.
            case resume
            /// Discards what is kept there, and keeps what it fetches.
            case fresh
        }

        public init(
            output: String? = nil, maxErrors: Int? = nil, signingKey: Curve25519.Signing.PrivateKey? = nil, createdAt: Date? = Date(),
            compressionLevel: Int = Builder.defaultCompressionLevel
        ) {
            self.output = output
            self.maxErrors = maxErrors
            self.signingKey = signingKey
            self.createdAt = createdAt
            self.compressionLevel = compressionLevel
        }
    }

    /// The deflate level a build uses unless told otherwise: libdeflate's level 6 writes zlib level 6's size (what
    /// `zip` and `bsdtar` write) in half zlib's time, and a crawl is bound by the CPU it spends; level 8, the writer's
    /// default for `pack`, writes 2% less in 2.7 times the time (scripts/bench-deflate.sh).
    public static let defaultCompressionLevel = 6

    /// What a build says about its journal.
    public enum Notice: Sendable {
        /// Responses taken from an interrupted build's journal, their body bytes, and whether a record cut off by
        /// the interruption was dropped.
        case resuming(responses: Int, bytes: Int64, droppedTail: Bool)
        /// A journal that was not resumed from, and why (another declaration or version, damaged).
        case ignored(journal: String, reason: String)
        /// `--fresh` discarded a journal.
        case freshStart(journal: String)
        /// Another build of the same output holds the journal: this one keeps none.
        case inUse(journal: String)
        /// The journal stopped (a full disk, its bound): the build goes on.
        case stopped(reason: String)
        /// The build did not write its bundle; the journal keeps what it fetched for the next build.
        case kept(journal: String, responses: Int, bytes: Int64)
    }

    public var declaration: Declaration
    public var options: Options

    public init(declaration: Declaration, options: Options = Options()) {
        self.declaration = declaration
        self.options = options
    }

    /// The output path, from the options or the declaration.
    public var outputPath: String? { options.output.map { declaration.resolve($0) } ?? declaration.outputPath }

    /// Crawls and writes the bundle.
    ///
    /// - Parameter progress: called after each response, from any thread.
    /// - Returns: the report; ``BuildReport/succeeded`` says whether a bundle was written.
    /// - Throws: ``PackagerError`` when there is no output path, its folder is missing, or the bundle cannot be written.
    /// - Parameter notice: told what the build does with its journal (``Options/resume``), from any thread.
    public func run(progress: (@Sendable (CrawlProgress) -> Void)? = nil, notice: (@Sendable (Notice) -> Void)? = nil) async throws -> BuildReport {
        guard let output = outputPath else {
            throw PackagerError(.invalidInput, "no output path: give 'output' in the declaration or -o PATH")
        }
        // Before the crawl, not after it.
        if let problem = OutputFile.problem(with: output) { throw problem }
        let folder = (output as NSString).deletingLastPathComponent
        // A signed bundle vouches for its content; content fetched without checking certificates cannot be vouched for.
        if declaration.tls.insecure && options.signingKey != nil {
            throw PackagerError(.invalidInput, "tls.insecure cannot be used with a signing key: a signed bundle would vouch for unverified content")
        }
        // A declared file that is not there is a mistake in the declaration: said before anything is fetched.
        if let problem = declaration.substitutionProblem() { throw PackagerError(.invalidInput, problem) }
        let journalPath = BuildJournal.folder(forOutput: output)
        let journal =
            options.resume == .off
            ? nil
            : BuildJournal.open(
                output: output, fingerprint: BuildJournal.fingerprint(declaration), fresh: options.resume == .fresh,
                limit: declaration.scope.maxBytes + (256 << 20)
            ) { event in
                switch event {
                case .resuming(let responses, let bytes, let dropped): notice?(.resuming(responses: responses, bytes: bytes, droppedTail: dropped))
                case .ignored(let reason): notice?(.ignored(journal: journalPath, reason: reason))
                case .freshStart: notice?(.freshStart(journal: journalPath))
                case .inUse: notice?(.inUse(journal: journalPath))
                case .stopped(let reason): notice?(.stopped(reason: reason))
                case .kept(let responses, let bytes): notice?(.kept(journal: journalPath, responses: responses, bytes: bytes))
                }
            }
        let session = try BuildSession.forBuild(in: folder, compressionLevel: options.compressionLevel, journal: journal)
        defer { session.remove() }
        let started = Date()
        // Bodies are hashed and compressed while the crawl goes on; the writer then only orders and copies them.
        let crawl = try await Crawler(declaration: declaration, session: session, progress: progress).run()
        let maxErrors = options.maxErrors ?? declaration.maxErrors
        // A failure of this machine (a full disk) fails the build as a declared URL's does: the bundle would lack what
        // the site has for no reason of the site's.
        let declaredFailed = crawl.failures.contains { $0.declared || $0.local == true }
        let tooMany = maxErrors.map { crawl.failures.count > $0 } ?? false
        journal?.sync()
        var report = BuildReport(
            output: nil, digest: nil, entries: crawl.store.count, bodies: 0, fetched: crawl.stats.done - crawl.stats.resumed, blocked: crawl.stats.blocked,
            substituted: crawl.stats.substituted, bytesFetched: crawl.stats.bytes - crawl.stats.bytesResumed, fileSize: 0, seconds: 0,
            failures: crawl.failures,
            skipped: crawl.skipped, limitsReached: crawl.limitsReached, succeeded: !declaredFailed && !tooMany && crawl.store.count > 0)
        report.crawlSeconds = Date().timeIntervalSince(started)
        report.protocols = crawl.stats.protocols
        report.resumed = crawl.stats.resumed
        report.bytesResumed = crawl.stats.bytesResumed
        report.browserProblems = crawl.browserProblems
        report.searchSweeps = crawl.searchSweeps
        if report.succeeded {
            var rules = declaration.bundleRules
            if declaration.ignoreQuery == .auto { rules.ignoreQuery = crawl.ignoreQuery }
            var writerOptions = BundleWriter.Options(
                rules: rules, createdAt: options.createdAt, signingKey: options.signingKey, compressionLevel: options.compressionLevel)
            writerOptions.storesIndex = options.storesIndex
            let writer = BundleWriter(options: writerOptions, session: session, store: crawl.store)
            // Writing reads, compresses and writes files: on NIO's thread pool, not Swift's cooperative one.
            let summary = try await NIOThreadPool.singleton.runIfActive { try writer.write(to: output) }
            report.output = output
            report.digest = summary.digest
            report.entries = summary.entries
            report.bodies = summary.bodies
            report.fileSize = summary.fileSize
            report.signedBy = options.signingKey.map { BundlePublicKey.fingerprint(of: Array($0.publicKey.rawRepresentation)) }
            // The bundle is in place: what it was made from need not be kept.
            journal?.remove()
        } else if let journal, journal.kept.responses > 0 {
            notice?(.kept(journal: journalPath, responses: journal.kept.responses, bytes: journal.kept.bytes))
        }
        report.seconds = Date().timeIntervalSince(started)
        return report
    }
}
