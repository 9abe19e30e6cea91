import Foundation

/// What `packager build` did: counts, the bundle written, and every failure with its URL and cause.
///
/// Encoded as JSON by `packager build --json`; docs/DECLARATION.md describes the fields.
public struct BuildReport: Codable, Sendable {
    /// One URL that could not be fetched, or that answered with an error status.
    public struct Failure: Codable, Sendable, Equatable {
        /// The request key.
        public var url: String
        /// What went wrong, as a sentence.
        public var reason: String
        /// The last HTTP status, when the server answered.
        public var status: Int?
        /// Requests made, retries included.
        public var attempts: Int
        /// Whether the URL was declared (a seed, a `urls` item, a sitemap), so that its failure fails the build.
        public var declared: Bool
        /// The page that linked to it.
        public var referrer: String?
        /// Whether the response was still recorded in the bundle (a 404 page, say), so the loader answers as the origin did.
        public var recorded: Bool
        /// Whether this machine failed, not the server (a spool file on a full disk): such a failure fails the build,
        /// declared or not. Nil (absent from JSON) when not.
        public var local: Bool?

        public init(url: String, reason: String, status: Int? = nil, attempts: Int = 1, declared: Bool, referrer: String?, recorded: Bool = false) {
            self.url = url
            self.reason = reason
            self.status = status
            self.attempts = attempts
            self.declared = declared
            self.referrer = referrer
            self.recorded = recorded
        }
    }

    /// The bundle's path, or nil when none was written.
    public var output: String?
    /// SHA-256 of the bundle's index, when written.
    public var digest: String?
    /// Request keys in the bundle.
    public var entries: Int
    /// Distinct bodies stored.
    public var bodies: Int
    /// Responses fetched from the network.
    public var fetched: Int
    public var blocked: Int
    public var substituted: Int
    /// Body bytes received from the network.
    public var bytesFetched: Int64
    /// The bundle's size on disk.
    public var fileSize: UInt64
    /// Wall time of the crawl and the write, in seconds.
    public var seconds: Double
    /// Wall time of the crawl alone, in seconds.
    public var crawlSeconds: Double = 0
    public var failures: [Failure]
    /// URLs left out, by reason (out of scope, robots.txt, limits).
    public var skipped: [String: Int]
    /// Limits the crawl ran into.
    public var limitsReached: [String]
    /// Whether the build counts as a success: every declared URL fetched and failures within `max-errors`.
    public var succeeded: Bool
    /// Responses recorded, by the protocol they came over (`HTTP/2`, `HTTP/1.1`).
    public var protocols: [String: Int] = [:]
    /// Responses an interrupted build of this output stored, taken from its journal instead of the network (not in
    /// ``fetched``), and their body bytes (not in ``bytesFetched``).
    public var resumed = 0
    public var bytesResumed: Int64 = 0
    /// The fingerprint of the key that signed the bundle (``OfflineBundle/BundlePublicKey/fingerprint``); nil when
    /// unsigned.
    public var signedBy: String?
    /// Pages the browser could not render in full (`browser`): a crash, a load that never ended. Never fatal: the
    /// page itself was crawled, and what the browser saw before the problem is kept.
    public var browserProblems: [PageProblem] = []
    /// The search boxes the browser swept (`browser`; one page per origin): every leading letter, digit and `_`
    /// typed, so that a search that loads its index in pieces is whole in the bundle.
    public var searchSweeps: [SearchSweep] = []

    /// A page the browser could not render in full, and why.
    public struct PageProblem: Codable, Sendable, Equatable {
        public var page: String
        public var reason: String

        public init(page: String, reason: String) {
            self.page = page
            self.reason = reason
        }
    }
}
