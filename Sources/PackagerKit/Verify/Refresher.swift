import Crypto
import Foundation
import NIOHTTP1
import NIOPosix
import OfflineBundle

/// `packager refresh`: re-fetches only what verify finds stale, gone or moved, and writes a new bundle.
///
/// Every other entry is carried over as it was: the same status, headers,
/// body bytes, fetch time and source, so its manifest record and body are
/// byte-identical in the new bundle. Refetched entries record the live
/// response (a 404 for a gone page, the new redirect for a moved one).
///
/// The new bundle keeps the old one's guarantees: a signed bundle is signed
/// again (``signingKey``) or the refresh is refused; carried-over bodies are
/// read from the old bundle one at a time, checked, when the new one is
/// written; re-fetched bodies stop at ``Verifier/Options/maxBodyBytes``; the
/// manifest is read only after its digest matched the one index.bin records.
public struct Refresher: Sendable {
    /// What a refresh did.
    public struct Summary: Sendable {
        public var verify: VerifyReport
        /// Keys re-fetched, with their new status.
        public var refreshed: [(url: String, status: Int)]
        /// Keys whose re-fetch failed; they keep their old response.
        public var failed: [(url: String, reason: String)]
        /// Keys verify could not check (unreachable); they keep their old response, which may be stale.
        public var unchecked: [(url: String, reason: String)]
        /// Refreshed pages that now link resources the bundle lacks (a rebuild would record them), with the first.
        public var linksNew: [(url: String, resources: String)]
        /// The bundle written; nil when nothing changed and nothing was written (`output` then holds the old bundle).
        public var write: BundleWriter.Summary?
    }

    public var options: Verifier.Options
    /// Verdicts whose entries are re-fetched.
    public var refreshVerdicts: Set<Verdict> = [.stale, .gone, .moved]
    /// Signs the new bundle. Required when the old one is signed: refresh never writes an unsigned bundle in its place.
    public var signingKey: Curve25519.Signing.PrivateKey?

    public init(options: Verifier.Options = .init()) { self.options = options }

    /// Verifies `path`, re-fetches what changed, and writes the result to `output` (atomically; it may be `path`).
    public func refresh(bundleAt path: String, output: String) async throws -> Summary {
        // Refused before any request: a signed bundle's consumers insist on a signature, by the key they were given.
        var bundle = try MountedBundle(path: path)
        if bundle.isSigned {
            guard let signingKey else {
                throw PackagerError(
                    .invalidInput,
                    "\(path) is signed, and refresh would write it unsigned: give the signing key (--sign-key FILE, or PACKAGER_SIGN_KEY)",
                    subject: path)
            }
            // Mounted again requiring that key: its signature is checked, and carried-over bodies are read under
            // SHA-256, as the bundle's consumers read them.
            do {
                bundle = try MountedBundle(path: path, options: .init(requiredPublicKey: Array(signingKey.publicKey.rawRepresentation)))
            } catch {
                throw PackagerError(
                    .invalidInput,
                    "\(path) is not signed by the key given (\(error)): its consumers check the key that signed it, so refresh signs only with that one",
                    subject: path)
            }
        }
        // One memory of origins found down, for the verify and the fetches that follow it.
        let downHosts = DownHosts()
        let report = try await Verifier(options: options, downHosts: downHosts).verify(bundle, path: path)
        let targets = Set(report.entries.filter { refreshVerdicts.contains($0.verdict) }.map(\.url))
        let unchecked = report.entries.filter { $0.verdict == .unreachable }.map { ($0.url, $0.error ?? "unreachable") }
        let linksNew = report.entries.compactMap { entry in
            entry.notes.first { $0.field == Change.newResources }.map { (entry.url, $0.live ?? "") }
        }
        if targets.isEmpty {
            // Nothing changed: the bundle stays byte for byte as it was (a copy when another output is asked for,
            // written as every output is: a temporary file, synced, renamed, removed when interrupted).
            if output != path { try Self.copy(path, to: output) }
            return Summary(verify: report, refreshed: [], failed: [], unchecked: unchecked, linksNew: [], write: nil)
        }
        // The manifest's entries are read beside the keys, in key order, twice (for the keys fetched again, then for
        // every key carried over): not decoded whole and kept by key, which took hundreds of MB for a large bundle.
        let targetRecords = try bundle.manifestEntries()

        let folder = (output as NSString).deletingLastPathComponent
        let spool = try ScratchFolder(in: folder.isEmpty ? "." : folder)
        defer { spool.remove() }
        let fetcher = Fetcher(
            settings: .init(
                headerRules: options.headerRules, userAgent: options.userAgent, timeouts: options.timeouts, retries: options.retries,
                perHost: options.perHost, contentEncoding: .decoded, tls: options.tls), downHosts: downHosts)
        let secrets = SecretScan(options.secrets)
        let addresses = options.addressPolicy()
        var refreshed: [(String, Int)] = []
        var failed: [(String, String)] = []
        var fresh: [String: RecordedExchange] = [:]
        /// Keys of pages the bundle did not hold, which a paged answer now names.
        var added: [String] = []
        var n = 0
        let limit = options.maxBodyBytes
        let canonicalizer = RequestKeyCanonicalizer(rules: bundle.rules, formQuery: bundle.readsQueriesAsForms)
        /// Fetches one key's request again: the entry to write, and the response (its spool file still there).
        func fetch(key: String, url: String, request: RecordedRequest?, volatile: [String]) async -> (RecordedExchange, Fetcher.Response)? {
            n += 1
            // The crawl's address policy: a hostile bundle's internal keys are neither asked nor stored.
            if let refusal = addresses.refusal(forURL: url) {
                failed.append((key, "not fetched: \(refusal.reason)"))
                return nil
            }
            // Sent without its body, the request would get another answer, kept under this key.
            if let request, request.bodySecret && request.body == nil {
                failed.append((key, "not sent: its request body is a secret the bundle does not keep; give --declaration with the request"))
                return nil
            }
            let headers = request?.headersToSend(url: url, declared: options.declaredRequests, rules: bundle.rules) ?? []
            // The key's method, which the answer was recorded for.
            let method = RequestQualifiers.split(key: key).qualifiers?.method ?? request?.method ?? "GET"
            switch await fetcher.fetch(
                url, method: HTTPMethod(rawValue: method), headers: headers, body: request?.body, spoolPath: spool.newFile(n),
                withinBudget: { $0 <= Int64(clamping: limit) }, limitName: "the --max-body limit of \(limit) bytes")
            {
            case .success(let response):
                var entry = Recorder.entry(url: url, response: response, policy: .decoded, secrets: secrets)
                entry.request = request
                if !volatile.isEmpty {
                    entry.volatile = volatile
                    entry.stableSHA256 = StableJSON.digest(of: Data(response.bodyBytes()), volatile: volatile)
                }
                refreshed.append((key, response.status))
                return (entry, response)
            case .failure(let failure):
                failed.append((key, failure.message))
                return nil
            }
        }
        for key in targets.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            let record = try targetRecords.entry(forKey: key)
            let split = RequestQualifiers.split(key: key)
            let url = String(split.url)
            let request = record?.request.map {
                RecordedRequest($0, keyQualifiers: split.qualifiers).restoringBody(url: url, declared: options.declaredRequests, rules: bundle.rules)
            }
            guard var (entry, response) = await fetch(key: key, url: url, request: request, volatile: record?.volatile ?? []) else { continue }
            // Under its very key, whatever the manifest kept of the request.
            entry.carriedKeySuffix = String(key[split.url.endIndex...])
            fresh[key] = entry
            // A paged answer's pages are walked again from it, so the bundle never names a next page it lacks: each
            // next page the bundle does not hold is fetched, until the chain reaches one it holds (and verify did not
            // find changed) or ends.
            guard let request, let word = request.paginate, let pagination = Declaration.Pagination(word: word), (200...299).contains(response.status) else {
                continue
            }
            var page = RecordedRequest(method: "GET", headers: request.headers, keyHeaders: request.keyHeaders)
            page.paginate = request.paginate
            var seen: Set<String> = [key]
            var current = url
            while seen.count <= 1_000,
                let next = Recorder.nextPage(of: response.headers, body: Data(response.bodyBytes()), pagination: pagination),
                let target = URLReference.resolve(next, against: current), let pageKey = page.key(for: target, canonicalizer: canonicalizer)
            {
                guard seen.insert(pageKey).inserted else {
                    failed.append((pageKey, "pagination loop: the pages from \(key) come back to it"))
                    break
                }
                // As the crawl: a next page stays on the request's origin (its headers go nowhere else), and one whose
                // URL carries a secret is never a key.
                guard HTTPOrigin(key: pageKey) == HTTPOrigin(key: url) else {
                    failed.append((key, "its next page is on another origin; not followed"))
                    break
                }
                guard !secrets.found(in: pageKey), !secrets.found(in: target) else {
                    failed.append((secrets.redacted(key), "its next page's URL carries a secret from the environment; not followed"))
                    break
                }
                if bundle.entry(forKey: pageKey) != nil || fresh[pageKey] != nil { break }
                guard let (pageEntry, pageResponse) = await fetch(key: pageKey, url: target, request: page, volatile: record?.volatile ?? []) else { break }
                fresh[pageKey] = pageEntry
                added.append(pageKey)
                response = pageResponse
                current = target
            }
        }
        await fetcher.shutdown()

        var writerOptions = BundleWriter.Options(rules: bundle.rules, createdAt: Date(), signingKey: signingKey)
        // The keys as the bundle wrote them: a bundle of classic queries stays one (its carried keys are not read again).
        writerOptions.readsQueriesAsForms = bundle.readsQueriesAsForms
        // A version-3 bundle written with its index stored (--stored-index) stays so; older ones get version 3's default.
        writerOptions.storesIndex = bundle.formatVersion >= 3 && bundle.metadata[BundleFormat.indexEntryName]?.method == 0
        var writer = BundleWriter(options: writerOptions)
        let carriedRecords = try bundle.manifestEntries()
        for position in 0..<bundle.entryCount {
            let entry = bundle.entry(at: position)
            if let replacement = fresh[entry.key] {
                writer.add(replacement)
                continue
            }
            let record = try carriedRecords.entry(forKey: entry.key)
            let split = RequestQualifiers.split(key: entry.key)
            // Carried over as recorded: the stored headers, and a synthesized ETag stays a synthesized one; a declared
            // request's entry keeps its key, its request and its volatile fields.
            var carried = RecordedExchange(
                url: String(split.url), status: entry.status, kind: entry.kind, headers: bundle.headers(ofEntryAt: entry.position),
                body: entry.body == nil ? nil : .bundle(bundle, entry),
                fetchedAt: entry.fetchedAt ?? record?.fetchedAt.flatMap(HTTPDates.parseRFC3339), originDate: entry.originDate,
                source: record?.source, synthesizeETag: entry.etagSynthesized, lastModifiedSynthesized: entry.lastModifiedSynthesized)
            carried.carriedKeySuffix = String(entry.key[split.url.endIndex...])
            carried.request = record?.request.map { RecordedRequest($0, keyQualifiers: split.qualifiers) }
            carried.volatile = record?.volatile ?? []
            carried.stableSHA256 = record?.stableSha256
            writer.add(carried)
        }
        for key in added { if let entry = fresh[key] { writer.add(entry) } }
        // Writing reads, compresses and writes files: on NIO's thread pool, not Swift's cooperative one.
        let finished = writer
        let summary = try await NIOThreadPool.singleton.runIfActive { try finished.write(to: output) }
        let written = Set(refreshed.map(\.0))
        return Summary(
            verify: report, refreshed: refreshed, failed: failed, unchecked: unchecked, linksNew: linksNew.filter { written.contains($0.0) },
            write: summary)
    }

    /// Copies the bundle at `source` to `destination` through ``AtomicOutput``, 1 MiB at a time.
    static func copy(_ source: String, to destination: String) throws {
        let file: BundleFile
        do {
            file = try BundleFile(path: source)
        } catch let error as BundleError {
            throw PackagerError(.io, error.message, subject: source, cause: error.underlying)
        }
        let output = try AtomicOutput(destination: destination)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: UInt64 = 0
        while offset < file.size {
            let count = Int(min(UInt64(buffer.count), file.size - offset))
            do {
                try buffer.withUnsafeMutableBytes {
                    try file.readFully(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<count]), at: offset, what: "the bundle")
                }
            } catch let error as BundleError {
                throw PackagerError(.io, error.message, subject: source, cause: error.underlying)
            }
            try buffer.withUnsafeBytes { try output.write(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            offset += UInt64(count)
        }
        try output.commit()
    }
}
