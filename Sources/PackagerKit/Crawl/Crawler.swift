import Foundation
import NIOConcurrencyHelpers
import OfflineBundle

/// Crawls what a declaration names: fetches, follows requisites and in-scope links, and records every response.
///
/// Small bodies are kept in memory within a fixed budget and the rest stream
/// to spool files, so memory stays bounded whatever the size of the site;
/// each request key is fetched once. The result is an ``EntryStore`` of writer entries, kept in a scratch file (their
/// bodies in memory, in crawl body files or already prepared), the failures, and what the crawl learned (which
/// origins ignore the query).
final class Crawler: Sendable {
    /// What the crawl produced.
    struct Result: Sendable {
        /// The entries, kept in a scratch file.
        var store: EntryStore
        var failures: [BuildReport.Failure]
        var skipped: [String: Int]
        var limitsReached: [String]
        var stats: CrawlProgress
        /// Pages the browser could not render in full.
        var browserProblems: [BuildReport.PageProblem] = []
        /// The search boxes the browser swept.
        var searchSweeps: [SearchSweep] = []
        /// Ignore-query patterns learned for the origins that ignore the query (``QueryProbe``); empty unless the
        /// declaration's `ignore-query` is `auto`.
        var ignoreQuery: [String] = []

        /// Every entry, read back (for tests; the writer reads them one at a time).
        func entries() throws -> [RecordedExchange] { try (0..<store.count).map { try store.entry(at: $0) } }
    }

    let declaration: Declaration
    let scope: CrawlScope
    let canonicalizer: RequestKeyCanonicalizer
    /// The declaration's secrets, searched for in every URL taken in and every header kept.
    let secretScan: SecretScan
    let fetcher: Fetcher
    let spool: ScratchFolder
    let state: CrawlState
    let robots: RobotsCache
    let progress: (@Sendable (CrawlProgress) -> Void)?
    /// Which origins ignore the query: one page per origin, probed once the crawl is done.
    let queryProbe = QueryProbe()
    /// With the declaration's browser on: each HTML page also loaded in headless Chromium.
    let browser: BrowserPool?
    /// The script sets of the pages rendered (browser.pages: by-scripts).
    let renderedScripts = SeenSet()
    /// The plain keys the declared requests answered: the crawl does not fetch them again.
    let requestedKeys = SeenSet()
    /// Each key a declared request's answer took, and the line of the request.
    let declaredKeys = NIOLockedValueBox([String: Int]())
    /// Small bodies are kept in memory within the run's budget (256 KiB each at most); the rest go to spool files.
    let memory: MemoryBudget
    /// Hashes and compresses each recorded body once the crawl has read it; nil leaves that to the writer.
    let pipeline: BodyPipeline?
    /// What an interrupted build of this declaration stored, taken instead of fetching; what this one stores is added.
    let journal: BuildJournal?
    /// Pages and style sheets larger than this are stored but not searched for links.
    static let parseLimit: Int64 = 32 << 20
    static let maxRedirects = 10
    static let maxURLLength = 16 << 10

    /// - Parameter session: the build's scratch folder and memory budgets; when it has a budget for prepared bodies,
    ///   bodies are hashed and compressed at its level while the crawl goes on, and the entries carry the results: kept
    ///   in memory within that budget, in its overflow file beyond it.
    /// - Throws: ``PackagerError`` when the declaration's browser is on and no Chromium starts.
    init(declaration: Declaration, session: BuildSession, progress: (@Sendable (CrawlProgress) -> Void)?) throws {
        let scope = CrawlScope(declaration)
        browser =
            declaration.browser.enabled
            ? try BrowserPool(
                settings: declaration.browser, profile: session.scratch.path(for: "browser"),
                allows: Self.browserConnections(scope: scope, anyHost: declaration.scope.requisitesFromAnyHost)) : nil
        let memory = session.received
        self.memory = memory
        let spool = session.scratch
        let state = CrawlState(
            maxResources: declaration.scope.maxResources, maxBytes: declaration.scope.maxBytes, entriesPath: spool.path(for: "entries"))
        self.state = state
        self.pipeline = session.prepared.map { kept in
            BodyPipeline(level: session.compressionLevel, memory: memory, kept: kept, overflow: session.overflow) { state.setPrepared($0, $1) }
        }
        self.declaration = declaration
        self.journal = session.journal
        self.scope = scope
        self.canonicalizer = RequestKeyCanonicalizer(rules: declaration.bundleRules, formQuery: true)
        self.secretScan = SecretScan(declaration.secrets)
        self.fetcher = Fetcher(settings: .init(declaration))
        self.spool = spool
        self.robots = RobotsCache()
        self.progress = progress
    }

    /// Runs the crawl to the end.
    func run() async -> Result {
        let frontier = Frontier(perHost: declaration.concurrency.perHost, spill: spool)
        await runDeclaredRequests()
        let seeds: [(String, CrawlScope.Role)] =
            declaration.seeds.map { ($0, .seed) } + declaration.urls.map { ($0, .declared) } + declaration.sitemaps.map { ($0, .sitemap) }
        for (url, role) in seeds {
            await offer(url, role: role, depth: 0, referrer: nil, frontier: frontier, declared: true)
        }
        await offerSubstitutions(frontier: frontier)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<min(max(1, declaration.concurrency.total), Declaration.maxConcurrency) {
                group.addTask {
                    while let job = await frontier.next() {
                        await self.process(job, frontier: frontier)
                        await frontier.finish(job)
                        self.progress?(self.state.snapshot(queued: await frontier.queued))
                    }
                }
            }
        }
        await browser?.close()
        let ignoreQuery = declaration.ignoreQuery == .auto ? await learnIgnoredQueries() : []
        await fetcher.shutdown()
        await pipeline?.finish()
        let lost = await frontier.lost
        if lost > 0 {
            state.fail(
                .init(url: spool.path, reason: "\(lost) queued URLs could not be read back from the crawl's scratch files", declared: true, referrer: nil))
        }
        var result = state.result()
        result.ignoreQuery = ignoreQuery
        return result
    }

    /// Asks each origin's probe page with and without a query (``QueryProbe``), within robots.txt and the body limits.
    private func learnIgnoredQueries() async -> [String] {
        let maxBody = declaration.scope.maxBody
        return await queryProbe.learn(
            allowed: { url in
                guard declaration.respectRobots else { return true }
                guard let rules = await robots.rules(for: url, fetcher: fetcher, spool: spool, scope: scope) else { return true }
                return rules.unavailable == nil && rules.allows(Self.pathAndQuery(url))
            },
            fetch: { url in
                guard case .success(let response) = await fetcher.fetch(url, spoolPath: spool.newFile(state.nextSpoolNumber()), withinBudget: { $0 <= maxBody })
                else { return nil }
                defer { response.discard(returningTo: nil) }
                // Compared by digest, read in chunks: a probe page as large as scope.max-body is never held whole.
                guard let digest = response.bodyDigest() else { return nil }
                return (response.status, digest)
            })
    }

    // MARK: - Taking URLs in

    /// Considers a raw URL met somewhere; queues it, records it, or counts why not.
    ///
    /// A URL left out of scope is not claimed, so the same URL met later in a role the scope admits
    /// (a requisite from another host, say) is still fetched.
    func offer(
        _ raw: String, role: CrawlScope.Role, depth: Int, referrer: String?, frontier: Frontier, chain: [String] = [], declared: Bool = false
    ) async {
        // Longer than any server takes (most refuse 8 KiB request lines): a hostile page's 30 MB href stays out of
        // the frontier, the keys and the reports.
        guard raw.utf8.count <= Self.maxURLLength else {
            if declared {
                state.fail(.init(url: String(raw.prefix(200)) + "…", reason: "longer than \(Self.maxURLLength) bytes", declared: true, referrer: referrer))
            }
            state.skip("URL longer than \(Self.maxURLLength) bytes")
            return
        }
        guard let key = canonicalizer.canonicalize(raw) else {
            if declared { state.fail(.init(url: raw, reason: "not a URL that can be fetched", declared: true, referrer: referrer)) }
            return
        }
        await admit(raw, key: key, role: role, depth: depth, referrer: referrer, frontier: frontier, chain: chain, declared: declared)
    }

    /// Offers what a page, a style sheet or a sitemap names, each URL absolute.
    ///
    /// Each URL is made a key once; then only the keys that can still change the crawl (not yet taken in, and not
    /// already left out in the same role) go on to the scope's decision, after one visit to the frontier for the
    /// whole page. A real page names the same site-wide links as every other page: deciding each again took more
    /// of a crawl's CPU than fetching it.
    private func offerFound(_ found: [(url: String, role: CrawlScope.Role, depth: Int)], referrer: String, frontier: Frontier) async {
        var candidates: [(url: String, key: String, role: CrawlScope.Role, depth: Int)] = []
        candidates.reserveCapacity(found.count)
        var unique = Set<String>(minimumCapacity: found.count)
        for item in found {
            guard item.url.utf8.count <= Self.maxURLLength else {
                state.skip("URL longer than \(Self.maxURLLength) bytes")
                continue
            }
            guard let key = canonicalizer.canonicalize(item.url), unique.insert(item.role.letter + key).inserted else { continue }
            candidates.append((item.url, key, item.role, item.depth))
        }
        let open = await frontier.unsettled(candidates.map { ($0.key, $0.role) })
        for i in open {
            let item = candidates[i]
            await admit(item.url, key: item.key, role: item.role, depth: item.depth, referrer: referrer, frontier: frontier)
        }
    }

    /// The scope's decision on a canonical key, and what follows from it.
    private func admit(
        _ raw: String, key: String, role: CrawlScope.Role, depth: Int, referrer: String?, frontier: Frontier, chain: [String] = [],
        declared: Bool = false
    ) async {
        guard let host = HTTPOrigin(key: key)?.host else {
            if declared { state.fail(.init(url: raw, reason: "not a URL that can be fetched", declared: true, referrer: referrer)) }
            return
        }
        // A declared request answered it already.
        if requestedKeys.contains(key) { return }
        // A URL that carries a secret from the environment (a link, a requisite, a redirect's target) is never taken
        // in: its key would be written to the index, the manifest and the reports. Counted, without the URL.
        if secretScan.found(in: key) || secretScan.found(in: raw) {
            if declared {
                state.fail(
                    .init(url: secretScan.redacted(key), reason: "carries a secret from the environment; not fetched", declared: true, referrer: referrer))
            }
            state.skip("carries a secret from the environment: \(secretScan.redacted(key))")
            return
        }
        let decision = scope.decide(key, role: role, named: declared && chain.isEmpty)
        if case .outOfScope(let reason) = decision {
            if declared && chain.isEmpty {
                state.fail(.init(url: key, reason: "not fetched: \(reason)", declared: true, referrer: referrer))
            } else if let from = chain.last {
                // A redirect out of scope: the redirect is recorded as it is; its target is named with the reason.
                if await frontier.noteSkipped(key, role: role) { state.skip("redirect target \(key) (from \(from)): \(reason)") }
            } else if await !frontier.isSeen(key), await frontier.noteSkipped(key, role: role) {
                state.skip(reason)
            }
            return
        }
        // A resource is taken before the key is claimed: past scope.max-resources a key costs no entry in the frontier's
        // set of keys taken in (a hostile page naming endless URLs cannot grow it), only one in the bounded set of
        // keys left out.
        if case .fetch = decision {
            guard state.reserveResource() else {
                if await frontier.noteSkipped(key, role: role) { state.skip("scope.max-resources reached") }
                state.limit("scope.max-resources (\(declaration.scope.maxResources)) reached: the crawl stopped taking new URLs")
                if declared { state.fail(.init(url: key, reason: "not fetched: scope.max-resources reached", declared: true, referrer: referrer)) }
                return
            }
            guard await frontier.claim(key) else {
                state.unreserveResource()
                return
            }
            let url = Self.withoutDroppedParameters(raw, key: key)
            await frontier.enqueue(
                .init(url: url, key: key, host: host, role: role, depth: depth, referrer: referrer, redirectChain: chain, declared: declared))
            return
        }
        guard await frontier.claim(key) else { return }
        switch decision {
        case .block:
            state.add(RecordedExchange(url: key, status: 204, kind: .blocked), kind: .blocked)
        case .substitute(let file, let declaredFile):
            await substitute(key: key, file: file, declared: declaredFile, role: role, depth: depth, referrer: referrer, frontier: frontier)
        case .outOfScope, .fetch:
            break
        }
    }

    /// The URL to request: as written, unless parameters were dropped from its key, in which case the key
    /// (the server then sees the same request every variant stands for).
    static func withoutDroppedParameters(_ raw: String, key: String) -> String {
        guard let written = URLComponents(string: raw), let canonical = URLComponents(string: key) else { return key }
        let writtenNames = Set((written.queryItems ?? []).map(\.name))
        let keptNames = Set((canonical.queryItems ?? []).map(\.name))
        return writtenNames == keptNames ? raw : key
    }

    /// Every declared substitution goes into the bundle, met by the crawl or not: each `{url, file}`, and each file
    /// of a `{prefix, folder}` (names starting with a dot left out), with the folder's URL for each `index.html`. A
    /// missing file or folder fails the build, named.
    private func offerSubstitutions(frontier: Frontier) async {
        for substitution in declaration.substitutions {
            switch substitution.match {
            case .url(let url, _):
                await offer(url, role: .requisite, depth: 0, referrer: nil, frontier: frontier, declared: true)
            case .prefix(let prefix, let folder):
                let root = declaration.resolve(folder)
                var isFolder: ObjCBool = false
                guard FileManager.default.fileExists(atPath: root, isDirectory: &isFolder), isFolder.boolValue,
                    let walker = FileManager.default.enumerator(atPath: root)
                else {
                    state.fail(.init(url: prefix, reason: "the substitution folder \(folder) does not exist or is not a folder", declared: true, referrer: nil))
                    continue
                }
                let base = prefix.hasSuffix("/") ? prefix : prefix + "/"
                var files: [String] = []
                while let relative = walker.nextObject() as? String {
                    let name = (relative as NSString).lastPathComponent
                    if name.hasPrefix(".") {
                        if walker.fileAttributes?[.type] as? FileAttributeType == .typeDirectory { walker.skipDescendants() }
                        continue
                    }
                    if walker.fileAttributes?[.type] as? FileAttributeType == .typeRegular { files.append(relative) }
                }
                for relative in files.sorted() {
                    await offer(
                        base + SubstitutionPath.urlPath(forRelativePath: relative), role: .requisite, depth: 0, referrer: nil, frontier: frontier,
                        declared: true)
                    if (relative as NSString).lastPathComponent == "index.html" {
                        let folderPath = String(relative.dropLast("index.html".count))
                        await offer(
                            base + SubstitutionPath.urlPath(forRelativePath: folderPath), role: .requisite, depth: 0, referrer: nil, frontier: frontier,
                            declared: true)
                    }
                }
            }
        }
    }

    private func substitute(key: String, file: String, declared: String, role: CrawlScope.Role, depth: Int, referrer: String?, frontier: Frontier) async {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: file), attributes[.type] as? FileAttributeType == .typeRegular else {
            state.fail(.init(url: key, reason: "the substitution file \(declared) does not exist or is not a file", declared: true, referrer: referrer))
            return
        }
        let contentType = SubstitutionPath.contentType(forPath: file)
        let entry = RecordedExchange(
            url: key, status: 200, kind: .substituted, headers: [("content-type", contentType)], body: .file(file), source: declared,
            synthesizeETag: true)
        let index = state.add(entry, kind: .substituted)
        defer { pipeline?.submit(.init(index: index, entry: entry, ownsFile: false, budgeted: false)) }
        // A substituted page or style sheet still names requisites that must be in the bundle.
        let size = (attributes[.size] as? NSNumber)?.int64Value ?? 0
        let local = Fetcher.Response(status: 200, headers: [], body: .file(file), bodySize: size, fetchedAt: Date(), attempts: 0)
        await discover(in: local, mediaType: MediaTypes.mediaType(forPath: file), url: key, role: role, depth: depth, frontier: frontier)
    }

    // MARK: - Fetching

    func process(_ job: Frontier.Job, frontier: Frontier) async {
        if declaration.respectRobots {
            let rules = await robots.rules(for: job.key, fetcher: fetcher, spool: spool, scope: scope)
            if let rules, !rules.allows(Self.pathAndQuery(job.key)) {
                // robots.txt could not be fetched because no connection to the origin could be made: the page is not
                // disallowed, it is unreachable, and is reported as such.
                if rules.unavailable != nil, let origin = HTTPOrigin(key: job.key), let down = fetcher.downHosts.reason(origin) {
                    state.unreserveResource()
                    state.fail(.init(url: job.key, reason: "not fetched: \(down)", declared: job.declared, referrer: job.referrer))
                    return
                }
                state.skip(rules.unavailable == nil ? "disallowed by robots.txt" : "robots.txt could not be fetched")
                state.unreserveResource()
                if job.declared {
                    // A TLS failure means the server answered: it is not down, and robots.txt is not the problem to fix.
                    let reason =
                        rules.unavailable.map { problem in
                            problem.code == .tls || problem.code == .local
                                ? problem.message
                                : "\(problem.message), so RFC 9309 counts the whole site as disallowed; is it down? (set 'robots: false' to crawl anyway)"
                        }
                        ?? "robots.txt disallows it (set 'robots: false' to crawl anyway)"
                    state.fail(.init(url: job.key, reason: reason, declared: true, referrer: job.referrer))
                }
                return
            }
        }
        let path = spool.newFile(state.nextSpoolNumber())
        let state = self.state
        let reservation = ByteReservation(state: state)
        let maxBody = declaration.scope.maxBody
        // A response an interrupted build of this declaration stored: taken as if fetched now, within the same byte
        // limits (past them it is fetched, and refused, as in a build that was not interrupted).
        var kept = journal?.replay(job.key, spoolPath: path, memory: memory)
        if let response = kept, !(response.bodySize <= maxBody && reservation.grow(to: response.bodySize)) {
            response.discard(returningTo: memory)
            kept = nil
        }
        let outcome: Swift.Result<Fetcher.Response, FetchError>
        if let kept {
            outcome = .success(kept)
            state.noteResumed(bytes: kept.bodySize)
        } else {
            outcome = await fetcher.fetch(
                job.url, spoolPath: path, memory: memory, withinBudget: { $0 <= maxBody && reservation.grow(to: $0) },
                limitName: "the declared byte limits (scope.max-body: \(maxBody) bytes in one body; scope.max-bytes in all)")
        }
        defer { reservation.release() }
        switch outcome {
        case .failure(let failure):
            var recorded = BuildReport.Failure(
                url: job.key, reason: failure.message, status: failure.status, attempts: failure.attempts, declared: job.declared, referrer: job.referrer)
            if failure.code == .local { recorded.local = true }
            state.fail(recorded)
        case .success(let response) where RetryLoop.retryable(status: response.status):
            // Still failing after the retries: a transient answer, not content to ship.
            response.discard(returningTo: memory)
            state.fail(
                .init(
                    url: job.key, reason: "HTTP \(response.status)", status: response.status, attempts: response.attempts,
                    declared: job.declared, referrer: job.referrer))
        case .success(let response):
            state.commitBytes(response.bodySize)
            var entry = recordedEntry(job.key, response)
            // A page that echoes the token or the cookie it was fetched with is not stored (the secret would be in the
            // bundle); its links are still followed, each judged as any link is.
            let carriesSecret = !secretScan.isEmpty && Self.bodyCarriesSecret(response.body, scan: secretScan)
            if carriesSecret {
                state.fail(.init(url: job.key, reason: Self.bodySecretReason, declared: job.declared, referrer: job.referrer))
            } else {
                switch credentialed(job.url, responseHeaders: response.headers) {
                case .none: break
                case .success(let request)?: entry.request = request
                case .failure(let problem)?:
                    response.discard(returningTo: memory)
                    state.fail(.init(url: job.key, reason: problem.message, declared: job.declared, referrer: job.referrer))
                    return
                }
            }
            let index = carriesSecret ? nil : state.add(entry, kind: .fetched, httpVersion: response.httpVersion)
            // Kept for a build that resumes this one, before the pipeline may delete its spool file.
            if index != nil, kept == nil { journal?.record(key: job.key, response: response) }
            // Handed over once discovery below has read it (the pipeline may delete its spool file); a body not stored is
            // given back.
            defer {
                if let index, entry.body != nil {
                    let owned: Bool
                    if case .file = response.body { owned = true } else { owned = false }
                    pipeline?.submit(.init(index: index, entry: entry, ownsFile: owned, budgeted: !owned))
                } else if carriesSecret {
                    response.discard(returningTo: memory)
                }
            }
            if response.status >= 400 {
                state.fail(
                    .init(
                        url: job.key, reason: "HTTP \(response.status)", status: response.status, attempts: response.attempts, declared: job.declared,
                        referrer: job.referrer, recorded: true))
            }
            if (300...399).contains(response.status), let location = response.headers.first(where: { $0.name == "location" })?.value {
                await followRedirect(from: job, location: location, frontier: frontier)
                return
            }
            guard (200...299).contains(response.status), response.bodySize > 0 else { return }
            let type = response.headers.first { $0.name == "content-type" }.map { MediaTypes.essence(of: $0.value) } ?? ""
            queryProbe.note(key: job.key, status: response.status, mediaType: type)
            // Bodies that still carry a coding (stored as sent, or one the client does not decode) are read decoded.
            let coding = response.headers.first { $0.name == "content-encoding" }.map { String(Substring($0.value.lowercased()).trimmingWhitespace()) }
            let clientDecoded: Set<String> = ["gzip", "deflate", "identity"]
            let encoding = coding.flatMap { declaration.contentEncoding == .encoded || !clientDecoded.contains($0) ? $0 : nil }
            await discover(
                in: response, mediaType: type, url: job.key, role: job.role, depth: job.depth, frontier: frontier, encoding: encoding)
        }
    }

    private func followRedirect(from job: Frontier.Job, location: String, frontier: Frontier) async {
        // A Location that carries a secret from the environment (in any form: see SecretScan) would make the secret a
        // request key, written to the bundle and to every report: it is not followed, and the stored redirect keeps no
        // Location.
        if secretScan.found(in: location) {
            state.fail(
                .init(
                    url: job.key, reason: "redirects to a URL that carries a secret from the environment; not followed", declared: job.declared,
                    referrer: job.referrer))
            return
        }
        guard let target = URLReference.resolve(location, against: job.key), let targetKey = canonicalizer.canonicalize(target) else {
            state.fail(
                .init(url: job.key, reason: "redirects to '\(location)', which is not an http or https URL", declared: job.declared, referrer: job.referrer))
            return
        }
        let chain = job.redirectChain + [job.key]
        if chain.contains(targetKey) {
            let loop = (chain + [targetKey]).joined(separator: " -> ")
            state.fail(.init(url: chain[0], reason: "redirect loop: \(loop)", declared: job.declared, referrer: job.referrer))
            return
        }
        if chain.count > Self.maxRedirects {
            state.fail(.init(url: chain[0], reason: "more than \(Self.maxRedirects) redirects in a row", declared: job.declared, referrer: job.referrer))
            return
        }
        await offer(target, role: job.role, depth: job.depth, referrer: job.referrer, frontier: frontier, chain: chain, declared: job.declared)
    }

    // MARK: - Discovery

    private func discover(
        in response: Fetcher.Response, mediaType: String, url: String, role: CrawlScope.Role, depth: Int, frontier: Frontier, encoding: String? = nil
    ) async {
        let isHTML = mediaType == "text/html" || mediaType == "application/xhtml+xml"
        let isCSS = mediaType == "text/css"
        let isSitemap = role == .sitemap
        guard role != .declared, isHTML || isCSS || isSitemap, response.bodySize <= Self.parseLimit else { return }
        var bytes = response.bodyBytes()
        // Bodies stored as sent are still read decoded.
        if let encoding, let decoded = ContentDecoding.decode(bytes, encoding: encoding, limit: Int(Self.parseLimit)) { bytes = decoded }
        var found: [(url: String, role: CrawlScope.Role, depth: Int)] = []
        func add(_ raws: [String], against base: String, role: CrawlScope.Role, depth: Int) {
            // A fragment never changes the key (the first '#' starts it, in RFC 3986 and WHATWG alike), and a page links
            // to another's anchors many times: each target is resolved once (python3.11-doc: 108,133 links to
            // 29,404 targets without their fragments).
            var targets = Set<Substring>()
            for raw in raws {
                let target = raw.utf8.firstIndex(of: UInt8(ascii: "#")).map { raw[..<$0] } ?? raw[...]
                guard targets.insert(target).inserted, let absolute = URLReference.resolve(String(target), against: base) else { continue }
                found.append((absolute, role, depth))
            }
        }
        if isSitemap {
            let sitemap = LinkExtractor.sitemap(bytes)
            add(sitemap.pages, against: url, role: .link, depth: 0)
            add(sitemap.sitemaps, against: url, role: .sitemap, depth: 0)
        } else if isCSS {
            add(LinkExtractor.css(bytes), against: url, role: .requisite, depth: depth)
        } else {
            let links = LinkExtractor.html(bytes)
            let base = links.baseHref.flatMap { URLReference.resolve($0, against: url) } ?? url
            add(links.requisites, against: base, role: .requisite, depth: depth)
            // Links are followed from pages reached as seeds or links, within the depth limit; a requisite (an iframe)
            // only brings its own requisites.
            let maxDepth = declaration.scope.maxDepth
            if role == .seed || role == .link, maxDepth.map({ depth < $0 }) ?? true {
                add(links.links, against: base, role: .link, depth: depth + 1)
            }
        }
        if isHTML, let browser, declaration.browser.everyPage || renderedScripts.isNew(Self.scriptSignature(found)) {
            found += await rendered(url, in: browser, role: role, depth: depth)
        }
        await offerFound(found, referrer: url, frontier: frontier)
    }

    /// The scripts a page loads, as found in its HTML (resolved, without their queries): pages with the same set load
    /// the same things when their scripts run.
    static func scriptSignature(_ found: [(url: String, role: CrawlScope.Role, depth: Int)]) -> String {
        let scripts = found.filter { $0.role == .requisite }.map { $0.url.prefix { $0 != "?" && $0 != "#" } }.filter {
            $0.hasSuffix(".js") || $0.hasSuffix(".mjs")
        }
        return Set(scripts).sorted().joined(separator: "\n")
    }

    // MARK: - Helpers

    /// Headers worth keeping: what a client needs to use the response and what verify compares. Credentials, cookies and
    /// anything carrying a secret from the environment are never kept.
    func storedHeaders(_ headers: [(name: String, value: String)]) -> [(name: String, value: String)] {
        Recorder.storedHeaders(headers, policy: declaration.contentEncoding, secrets: secretScan)
    }

    /// A fetched response as the bundle records it (``Recorder/entry(url:response:policy:secrets:)``), by the
    /// declaration's content-encoding policy and secrets.
    func recordedEntry(_ url: String, _ response: Fetcher.Response) -> RecordedExchange {
        Recorder.entry(url: url, response: response, policy: declaration.contentEncoding, secrets: secretScan)
    }

    /// The path and query robots.txt rules are matched against.
    static func pathAndQuery(_ key: String) -> String {
        guard let url = URL(string: key) else { return "/" }
        let path = url.path.isEmpty ? "/" : (URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? url.path)
        return url.query.map { path + "?" + $0 } ?? path
    }
}

/// Strings seen, safe from any thread.
final class SeenSet: Sendable {
    private let seen = NIOLockedValueBox(Set<String>())

    /// Whether `value` is new (and remembers it).
    func isNew(_ value: String) -> Bool { seen.withLockedValue { $0.insert(value).inserted } }

    func contains(_ value: String) -> Bool { seen.withLockedValue { $0.contains(value) } }
}
