import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import OfflineBundle

/// `packager verify`: asks the live servers, as cheaply as each entry allows, whether its content moved on.
///
/// - An entry with the origin's ETag or Last-Modified gets a conditional GET; 304, or 200 with the same
///   validators, means fresh. When the validators differ, the body of that answer is hashed: the same
///   SHA-256 is fresh (the header differences become notes), another is stale.
/// - One without (a packed file's validators are made up, and never compared) gets a GET whose body is hashed.
/// - `shallow` never reads bodies: differing validators are stale, and entries without any are unverifiable.
/// - `deep` ignores validators and compares every body.
/// - Recorded redirects are asked again without following, and their target compared.
/// - Substituted and blocked entries are reported, not probed; `checkSubstituted` asks whether the remote a
///   local file stands in for changed since the build.
///
/// Requests run with bounded concurrency, a per-host limit and an optional
/// rate limit; connection errors, 429 and 5xx are retried with backoff,
/// honouring Retry-After. Request headers (from a declaration) are sent and
/// never printed.
public struct Verifier: Sendable {
    /// How to verify.
    public struct Options: Sendable {
        /// Compare every body by SHA-256, whatever the validators say.
        public var deep = false
        /// Never read a body: validators and uncoded lengths only (entries without validators are unverifiable).
        public var shallow = false
        /// Ask the remote URLs substituted entries stand in for whether they changed since the build.
        public var checkSubstituted = false
        /// No body is read past this many bytes (an endless body ends the check as unreachable: body longer than …).
        public var maxBodyBytes: UInt64 = 256 << 20
        /// How reports name the bundle in the commands they advise (`packager refresh BUNDLE`).
        public var bundleArgument = "BUNDLE"
        public var concurrency = 16
        public var perHost = 8
        /// Requests per second in all; nil for no limit.
        public var rate: Double?
        public var retries = Declaration.Retries()
        public var timeouts = Declaration.Timeouts()
        /// Which declared headers go to which origin (from ``init(declaration:)``; none otherwise).
        var headerRules = RequestHeaderRules.none
        /// The values from the environment in the declared headers: never written into a refreshed bundle.
        var secrets: [String] = []
        /// Loopback and private addresses may be asked on every origin, not only on those the declaration names
        /// (`--allow-private-addresses`). Link-local and cloud-metadata addresses never are.
        public var allowPrivateAddresses = false
        /// The declaration's origins, which may be loopback or private addresses (none without a declaration).
        var declaredPolicy: AddressPolicy?

        /// The address policy of these options (the crawl's: ``AddressPolicy``).
        func addressPolicy() -> AddressPolicy {
            AddressPolicy(
                namedOrigins: declaredPolicy?.namedOrigins ?? [], declaredOrigins: declaredPolicy?.declaredOrigins ?? [],
                allowPrivate: allowPrivateAddresses)
        }
        /// How HTTPS servers are trusted (the declaration's `tls`).
        var tls = TLSSettings.system
        public var userAgent = "packager/\(PackagerVersion.string)"
        public var failOn = Verdict.failingByDefault
        /// Whether declared requests that may change the server (POST, PUT, PATCH, DELETE…) are sent again.
        public var resendUnsafe = false
        /// The declaration's requests: a secret header of one (which the bundle does not keep) is sent again.
        var declaredRequests: [Declaration.Request] = []

        public init() {}

        /// Takes headers, retries, timeouts, user agent and concurrency from a declaration.
        public init(declaration: Declaration) {
            headerRules = RequestHeaderRules(declaration)
            secrets = declaration.secrets
            declaredPolicy = AddressPolicy(declaration)
            tls = TLSSettings(declaration)
            retries = declaration.retries
            timeouts = declaration.timeouts
            userAgent = declaration.userAgent
            concurrency = declaration.concurrency.total
            perHost = declaration.concurrency.perHost
            declaredRequests = declaration.requests
        }
    }

    public var options: Options
    /// Origins found down; the retry loop marks them (shared with the fetches of a refresh that follows).
    let downHosts: DownHosts

    public init(options: Options = Options()) {
        self.options = options
        downHosts = DownHosts()
    }

    init(options: Options, downHosts: DownHosts) {
        self.options = options
        self.downHosts = downHosts
    }

    /// Verifies every entry of the bundle at `path`.
    ///
    /// - Parameter progress: called after each entry with the number done and the total.
    /// - Throws: `BundleError` when the bundle cannot be mounted.
    /// A URL is a remote bundle, read through `remote` (its index; verify reads no body).
    public func verify(bundleAt path: String, remote: RemoteOptions? = nil, progress: (@Sendable (Int, Int) -> Void)? = nil) async throws -> VerifyReport {
        guard RemoteOptions.isRemote(path), let remote else {
            // Its index aside, as check and inspect read a bundle whole.
            let bundle = try MountedBundle.mountedWithIndexAside(path, options: .init(), scratchIn: NSTemporaryDirectory(), remote: remote)
            return try await verify(bundle, path: path, progress: progress)
        }
        return try await verify(try await MountedBundle.mount(.remote(path, remote)), path: RemoteObject.shown(path), progress: progress)
    }

    /// Verifies a bundle already mounted (refresh mounts once, for its verify and its writing).
    func verify(_ bundle: MountedBundle, path: String, progress: (@Sendable (Int, Int) -> Void)? = nil) async throws -> VerifyReport {
        let started = Date()
        // Entries are read from the index by position as the workers take them, not all made at once.
        let count = bundle.entryCount
        // Bodies are asked for with the crawl's codings and decoded, so digests compare with the stored (decoded) bodies.
        let client = HTTPTransport.makeClient(timeouts: options.timeouts, perHost: options.perHost, decompress: true, tls: options.tls)
        // A fixed set of workers pulls entries in order: no task per entry. The per-host limiter is consulted only
        // when it can bind (per-host below the total); hosts found unreachable are remembered either way.
        let limiter = options.perHost < options.concurrency ? HostLimiter(total: options.concurrency, perHost: options.perHost) : nil
        let downHosts = self.downHosts
        let pacer = options.rate.map { Pacer(perSecond: $0) }
        let done = NIOLockedValueBox(0)
        let dispenser = NIOLockedValueBox(0)
        let probe = Probe(
            options: options, client: client, pacer: pacer, retryLoop: RetryLoop(retries: options.retries, downHosts: downHosts, timeoutsBeforeDown: 3),
            bundle: bundle, addresses: options.addressPolicy())
        let order = limiter == nil ? Array(0..<count) : Self.interleavedByHost((0..<count).map(bundle.key(ofEntryAt:)))
        let declared = Self.declaredEntries(of: bundle)
        let declaredRequests = options.declaredRequests
        let rules = bundle.rules
        let verdicts = Verdicts(count: count)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<max(1, min(options.concurrency, count)) {
                group.addTask {
                    while case let n = dispenser.withLockedValue({
                        $0 += 1
                        return $0
                    }) - 1, n < order.count {
                        let entry = bundle.entry(at: order[n])
                        var record = Recorded(entry: entry, declared: declared[entry.position], rules: rules)
                        record.request = record.request?.restoringBody(url: record.url, declared: declaredRequests, rules: rules)
                        // Scheme and authority: http://a and https://a are different servers. Mounting checked the
                        // shape of every key; one without an origin all the same is not probed.
                        guard let origin = HTTPOrigin(key: record.url) else {
                            verdicts.add(
                                EntryVerification(
                                    url: record.key, verdict: .unreachable, recordedStatus: record.status, liveStatus: nil, method: EntryVerification.notProbed,
                                    changes: [], error: "not an http or https URL with a host and port", attempts: 0))
                            progress?(
                                done.withLockedValue {
                                    $0 += 1
                                    return $0
                                }, count)
                            continue
                        }
                        let host = origin.description
                        let down = record.kind == .recorded ? downHosts.reason(origin) : nil
                        if let limiter, down == nil { await limiter.acquire(host) }
                        if let down {
                            // A host no connection could be made to, after every retry, is not asked again for each of its entries.
                            var entry = EntryVerification(
                                url: record.key, verdict: .unreachable, recordedStatus: record.status, liveStatus: nil, method: EntryVerification.notProbed,
                                changes: [], error: EntryVerification.notTriedPrefix + down, attempts: 0)
                            // The advice the entries that found the origin down carry (run verify again once it answers).
                            entry.advice = probe.advice(for: entry, record, failure: .notTried)
                            verdicts.add(entry)
                        } else {
                            verdicts.add(await probe.verify(record))
                        }
                        if let limiter, down == nil { await limiter.release(host) }
                        progress?(
                            done.withLockedValue {
                                $0 += 1
                                return $0
                            }, count)
                    }
                }
            }
        }
        let results = verdicts.taken()
        try? await client.shutdown()
        return VerifyReport(bundle: path, checkedAt: started, seconds: Date().timeIntervalSince(started), entries: results, failOn: options.failOn)
    }
}

/// The entries' verdicts as the workers give them, in one array of the bundle's size (not one a worker, joined after),
/// with one copy of each error and advice text: an origin that is down gives each of its entries the same two (about
/// 370 bytes an entry, 370 MB for a million entries, held until the report is written).
final class Verdicts: Sendable {
    private struct State {
        var entries: [EntryVerification] = []
        var texts = Set<String>()
    }
    private let state: NIOLockedValueBox<State>

    init(count: Int) {
        var state = State()
        state.entries.reserveCapacity(count)
        self.state = NIOLockedValueBox(state)
    }

    func add(_ entry: EntryVerification) {
        state.withLockedValue { state in
            guard entry.error != nil || entry.advice != nil else { return state.entries.append(entry) }
            var entry = entry
            entry.error = entry.error.map { state.texts.insert($0).memberAfterInsert }
            entry.advice = entry.advice.map { state.texts.insert($0).memberAfterInsert }
            state.entries.append(entry)
        }
    }

    /// The entries given, taken out (not copied).
    func taken() -> [EntryVerification] {
        state.withLockedValue { state in
            var entries: [EntryVerification] = []
            swap(&entries, &state.entries)
            return entries
        }
    }
}

extension Verifier {
    /// Whether `needle` occurs in `haystack` (``Swift/Array/containsBytes(_:)``).
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool { haystack.containsBytes(needle) }

    /// What an entry's manifest description says beyond its index record: its declared request, and the fields of its
    /// JSON body that change on every answer (with the digest of the body without them).
    struct Declared: Sendable, Hashable {
        var request: ManifestRequest?
        var volatile: [String]?
        var stableSha256: String?
    }

    /// The declared requests and volatile bodies of a bundle's entries, by their position in the index.
    struct DeclaredTable: Sendable {
        /// For each position, where its fields stand in `values`: entries recorded alike (an imported archive's GETs,
        /// each with the same headers) share one.
        fileprivate var slots: [Int: Int32] = [:]
        fileprivate var values: [Declared] = []

        subscript(position: Int) -> Declared? { slots[position].map { values[Int($0)] } }

        /// The positions that have some.
        var positions: Dictionary<Int, Int32>.Keys { slots.keys }
    }

    /// The declared requests and volatile bodies: only the manifest's entries that have some are decoded (a crawled
    /// site's manifest is scanned, not decoded), and only those fields kept, once for the entries recorded alike. By
    /// position, no key is held twice: about 200 bytes an entry of an archive of 1,000,000 records before, 20 now.
    static func declaredEntries(of bundle: MountedBundle) -> DeclaredTable {
        var table = DeclaredTable()
        guard let entries = try? bundle.manifestEntries() else { return table }
        var alike: [Declared: Int32] = [:]
        // The manifest lists the entries in the index's order (by their keys' bytes): each is found by walking on from
        // the last, not by a lookup, which reads the index at random (a page fault each, the index being mapped aside).
        var cursor = 0
        func position(of key: String) -> Int? {
            while cursor < bundle.entryCount {
                let here = bundle.key(ofEntryAt: cursor)
                if here.utf8.elementsEqual(key.utf8) { return cursor }
                if key.utf8.lexicographicallyPrecedes(here.utf8) { break }
                cursor += 1
            }
            return bundle.entry(forKey: key)?.position
        }
        while let entry = try? entries.nextDeclaring() {
            guard entry.request != nil || entry.volatile != nil, let position = position(of: entry.key) else { continue }
            let declared = Declared(request: entry.request, volatile: entry.volatile, stableSha256: entry.stableSha256)
            if let slot = alike[declared] {
                table.slots[position] = slot
            } else {
                let slot = Int32(table.values.count)
                table.values.append(declared)
                alike[declared] = slot
                table.slots[position] = slot
            }
        }
        return table
    }

    /// Entry positions taking each host in turn, so that workers waiting on one host's limit do not hold back the others.
    static func interleavedByHost(_ keys: [String]) -> [Int] {
        var buckets: [String: [Int]] = [:]
        var hosts: [String] = []
        for (i, key) in keys.enumerated() {
            let host = keyOrigin(key).map { String($0.origin) } ?? key
            if buckets[host] == nil { hosts.append(host) }
            buckets[host, default: []].append(i)
        }
        var order: [Int] = []
        order.reserveCapacity(keys.count)
        var round = 0
        while order.count < keys.count {
            for host in hosts where round < buckets[host]!.count { order.append(buckets[host]![round]) }
            round += 1
        }
        return order
    }
}
