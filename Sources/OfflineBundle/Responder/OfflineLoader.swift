import Foundation
import HTTPTypes
import Logging
import Metrics

/// When to answer from the bundle and when from the network.
public enum OfflinePolicy: Sendable, Equatable {
    /// Offline: only the bundle answers; a miss is an error.
    case bundleOnly
    /// The bundle answers what it has (substitutions included); the network answers the rest.
    case bundleFirst
    /// The network answers; the bundle answers when the network fails, answers 5xx, or takes longer than `timeout`.
    case networkFirst(timeout: Duration)
}

/// A policy for the URLs that match a host or a URL pattern.
public struct PolicyOverride: Sendable {
    /// What an override matches.
    public enum Match: Sendable, Equatable {
        /// Requests to this host (`api.example.com`), or to a domain and its subdomains (`*.example.com`).
        case host(String)
        /// Request URLs matching this pattern, where `*` matches any run of characters (`https://*/api/*`).
        case url(glob: String)
    }

    public var match: Match
    public var policy: OfflinePolicy

    /// An override of `policy` for what `match` matches.
    public init(_ match: Match, policy: OfflinePolicy) {
        self.match = match
        self.policy = policy
    }

    func matches(_ url: String, host: String) -> Bool {
        switch match {
        case .host(let pattern):
            return HTTPRules.hostMatches(pattern: pattern, host: host)
        case .url(let glob):
            return globMatch(Array(glob.lowercased().utf8)[...], Array(url.lowercased().utf8)[...])
        }
    }
}

/// How the policies treat age, statuses, and what the network answered.
public struct LoaderOptions: Sendable {
    /// The age past which a bundle entry (or a last-seen response) counts as a miss under bundle-first and
    /// network-first while the network answers; it is still served when the network cannot (stale-if-error).
    /// nil: any age is served.
    public var maxAge: Duration?
    /// Statuses besides 5xx on which the loader's fallback answers instead of the network (404, 429): under
    /// network-first, and under bundle-first when an entry past ``maxAge`` or a non-2xx entry sent the request out.
    public var fallbackStatuses: Set<Int>
    /// Bundle-first: answer only entries whose recorded status is 2xx (blocked entries are 204), and ask the
    /// network for the rest (redirects, 404s the crawl recorded); the entry still answers when the network cannot.
    public var bundleFirstAnswersOnlySuccess: Bool
    /// Where what the network answers is kept, to answer after a restart offline; nil keeps nothing.
    public var lastSeen: LastSeenCache?

    public init(
        maxAge: Duration? = nil, fallbackStatuses: Set<Int> = [], bundleFirstAnswersOnlySuccess: Bool = false, lastSeen: LastSeenCache? = nil
    ) {
        self.maxAge = maxAge
        self.fallbackStatuses = fallbackStatuses
        self.bundleFirstAnswersOnlySuccess = bundleFirstAnswersOnlySuccess
        self.lastSeen = lastSeen
    }
}

/// What services configure at launch: mounted bundles, rules, a policy, and where the network's answers are kept.
///
/// The URLSession protocol, the AsyncHTTPClient wrapper and the Hummingbird middleware all ask a loader, so the
/// same request gets the same answer through each. A request is answered, in this order:
///
/// 1. by a runtime rule (``adding(_:)``): a block pattern answers 204 with no body, a substitution its content;
/// 2. by the last-seen cache, when it holds a response newer than the bundles' entry for the URL;
/// 3. by the bundles, in order: the first with an entry answers; a bundle's block patterns answer 204 for URLs it
///    has no entry for; a URL under a bundle's substitution prefix that no bundle has is answered 404;
/// 4. by the network, as the policy for the URL says (runtime rules' overrides first, then the loader's).
///
/// Nothing in 1 and 3's rules ever reaches the network, under any policy. Responses from a bundle carry `Age`
/// from the recorded fetch time (RFC 9111 §4.2.3). Lookups are counted through swift-metrics
/// (`offline_bundle_lookups`, dimensions `result`: hit, miss or error, and `source`: the bundle's label, `rules` or
/// `last-seen`; `none` for misses and errors) and logged at debug level through swift-log with the same `source`. A
/// bundle-only miss, which no network answers, is logged at notice level with the nearest recorded request and what
/// differed (``explainMiss(_:)``), and counted as `offline_bundle_misses` by `kind` (``MissExplanation/Kind``).
///
/// A loader is an immutable value: ``adding(_:)`` returns a new one.
public final class OfflineLoader: Sendable {
    public let bundles: [MountedBundle]
    public let policy: OfflinePolicy
    public let overrides: [PolicyOverride]
    /// The rules added at runtime.
    public let rules: OfflineRules
    public let options: LoaderOptions
    let logger: Logger
    private let compiled: CompiledRules
    /// The origins the bundles record: the last-seen cache keeps only their URLs.
    private let origins: Set<String>
    private let hits: [String: Counter]
    private let misses = Counter(label: "offline_bundle_lookups", dimensions: [("result", "miss"), ("source", "none")])
    /// Bundle-only misses by what differed from the nearest recorded request (``MissExplanation/Kind``).
    private let missesByKind = Dictionary(
        uniqueKeysWithValues: MissExplanation.Kind.allCases.map { ($0, Counter(label: "offline_bundle_misses", dimensions: [("kind", $0.rawValue)])) })
    private let errors = Counter(label: "offline_bundle_lookups", dimensions: [("result", "error"), ("source", "none")])

    /// Creates a loader over already mounted bundles.
    public convenience init(
        bundles: [MountedBundle], policy: OfflinePolicy = .bundleOnly, overrides: [PolicyOverride] = [], options: LoaderOptions = LoaderOptions(),
        logger: Logger = Logger(label: "offline-bundle")
    ) {
        self.init(bundles: bundles, policy: policy, overrides: overrides, rules: OfflineRules(), compiled: CompiledRules(), options: options, logger: logger)
    }

    private init(
        bundles: [MountedBundle], policy: OfflinePolicy, overrides: [PolicyOverride], rules: OfflineRules, compiled: CompiledRules,
        options: LoaderOptions, logger: Logger
    ) {
        self.bundles = bundles
        self.policy = policy
        self.overrides = overrides
        self.rules = rules
        self.compiled = compiled
        self.options = options
        self.logger = logger
        self.origins = Set(bundles.flatMap(\.origins))
        var hits: [String: Counter] = [:]
        for source in bundles.map({ BundleResponse.Source.bundle($0.label) }) + [.rule, .lastSeen] {
            hits[source.description] = Counter(label: "offline_bundle_lookups", dimensions: [("result", "hit"), ("source", source.description)])
        }
        self.hits = hits
    }

    /// Mounts the bundle at `path` (requiring a signature by `publicKey` when given) and creates a loader over it.
    ///
    /// - Throws: ``BundleError`` when the bundle is missing, corrupt, or not signed by the key.
    public convenience init(
        path: String, publicKey: [UInt8]? = nil, policy: OfflinePolicy = .bundleOnly, overrides: [PolicyOverride] = [],
        options: LoaderOptions = LoaderOptions()
    ) throws {
        try self.init(
            bundles: [MountedBundle(path: path, options: .init(requiredPublicKey: publicKey))], policy: policy, overrides: overrides, options: options)
    }

    /// A new loader that checks `rules` first, then this loader's rules, then its bundles; this loader is unchanged.
    ///
    /// - Throws: ``BundleError`` with code `.invalidArgument` when a rule's URL is not an http or https URL, or
    ///   when a substituted file or folder does not exist.
    public func adding(_ rules: OfflineRules) throws -> OfflineLoader {
        let all = rules.followed(by: self.rules)
        return OfflineLoader(
            bundles: bundles, policy: policy, overrides: overrides, rules: all, compiled: try CompiledRules(all), options: options, logger: logger)
    }

    /// The same loader answering from `bundles`, with the same rules and options (a hotfix bundle first, say).
    public func replacingBundles(with bundles: [MountedBundle]) -> OfflineLoader {
        OfflineLoader(bundles: bundles, policy: policy, overrides: overrides, rules: rules, compiled: compiled, options: options, logger: logger)
    }

    /// The policy for `url`: the first matching override (runtime rules' first), else the default.
    public func policy(for url: String) -> OfflinePolicy {
        guard !overrides.isEmpty || !rules.overrides.isEmpty else { return policy }
        let host = keyOrigin(url).flatMap { HTTPRules.host(ofAuthority: $0.authority) } ?? ""
        return (rules.overrides + overrides).first { $0.matches(url, host: host) }?.policy ?? policy
    }

    // MARK: - Answering

    /// What to do with a request.
    public enum Plan: Sendable {
        /// Answer with this; the network is not asked.
        case answer(BundleResponse)
        /// Ask the network, within `timeout` when there is one. When it cannot answer, or answers a status
        /// ``fallsBack(onStatus:)`` names, answer ``fallback(for:networkAnswered:)`` instead when there is one.
        case network(timeout: Duration?)
        /// Bundle-only, and nothing here answers: a miss, and the network is not asked.
        case miss
    }

    /// What the policy for the request's URL says to do with it.
    public func plan(for request: BundleRequest) -> Plan { plan(for: request, followingRedirects: 0).plan }

    /// Like ``plan(for:)``, with the redirects of an answer followed here, at most `maxRedirects` hops (see
    /// ``response(for:followingRedirects:)``), and the URL the answer is for.
    package func plan(for request: BundleRequest, followingRedirects maxRedirects: Int) -> (plan: Plan, url: String) {
        let policy = policy(for: request.url)
        guard let found = find(request, followingRedirects: maxRedirects) else {
            misses.increment()
            if case .networkFirst(let timeout) = policy { return (.network(timeout: timeout), request.url) }
            guard policy == .bundleOnly else {
                logger.debug("offline miss", metadata: ["url": "\(request.url)"])
                return (.network(timeout: nil), request.url)
            }
            // Bundle-only: the miss is final, and said with the nearest recorded request and what differed.
            let why = explainMiss(request)
            if let why { missesByKind[why.kind]?.increment() }
            logger.notice(
                "offline miss",
                metadata: [
                    "url": "\(request.url)", "method": "\(request.method)", "nearest": "\(why?.nearestRequest ?? "none")",
                    "differences": "\(why?.differences.joined(separator: "; ") ?? "")",
                ])
            return (.miss, request.url)
        }
        let ask: Plan
        switch policy {
        case .bundleOnly:
            return (answered(found), found.url)
        case .bundleFirst:
            if found.fixed { return (answered(found), found.url) }
            if options.bundleFirstAnswersOnlySuccess && !(200...299).contains(found.response.status) {
                ask = .network(timeout: nil)
            } else if tooOld(found.response) {
                ask = .network(timeout: nil)
            } else {
                return (answered(found), found.url)
            }
        case .networkFirst(let timeout):
            // A rule's answer never goes to the network.
            if found.fixed { return (answered(found), found.url) }
            ask = .network(timeout: timeout)
        }
        return (ask, request.url)
    }

    /// Whether the bundle answers instead of the network when the network answers `status` (network-first).
    public func fallsBack(onStatus status: Int) -> Bool { status >= 500 || options.fallbackStatuses.contains(status) }

    /// What answers `request` when the network cannot (`networkAnswered` false: a transport error or a timeout) or
    /// answered a status the policy falls back on (`networkAnswered` true, when entries past ``LoaderOptions/maxAge``
    /// count as misses).
    public func fallback(for request: BundleRequest, networkAnswered: Bool) -> BundleResponse? {
        fallback(for: request, networkAnswered: networkAnswered, followingRedirects: 0)?.response
    }

    /// ``fallback(for:networkAnswered:)`` with the redirects of the answer followed here, and the URL it is for.
    package func fallback(for request: BundleRequest, networkAnswered: Bool, followingRedirects maxRedirects: Int) -> (
        response: BundleResponse, url: String
    )? {
        guard let found = find(request, followingRedirects: maxRedirects) else { return nil }
        if networkAnswered && tooOld(found.response) { return nil }
        return (counted(found), found.url)
    }

    /// The answer to `request` without the network (rules, the last-seen cache, the bundles), whatever the
    /// policy and age, or nil on a miss.
    public func response(for request: BundleRequest) -> BundleResponse? {
        guard let found = find(request, followingRedirects: 0) else {
            misses.increment()
            logger.debug("offline miss", metadata: ["url": "\(request.url)"])
            return nil
        }
        return counted(found)
    }

    /// The answer to `request` without the network, as a client that follows redirects sees it: recorded
    /// redirects are followed here, at most `maxRedirects` hops.
    ///
    /// - Returns: the final response and the URL it answers, or nil when nothing answers the request itself. A
    ///   redirect whose target nothing here answers is returned as recorded.
    package func response(for request: BundleRequest, followingRedirects maxRedirects: Int) -> (response: BundleResponse, url: String)? {
        guard let found = find(request, followingRedirects: maxRedirects) else {
            misses.increment()
            return nil
        }
        return (counted(found), found.url)
    }

    /// Whether any bundle recorded request variants for `url` (``MountedBundle/variesByRequest(url:)``): an answer to a
    /// GET of it may then depend on the request's headers, and a server's cache of whole answers does not keep it.
    public func variesByRequest(url: String) -> Bool { bundles.contains { $0.variesByRequest(url: url) } }

    /// Whether a request's body takes part in matching `method` at `url` in any bundle
    /// (``MountedBundle/matchesBody(method:url:)``): the integrations collect a request's body only then.
    public func matchesBody(method: String, url: String) -> Bool { bundles.contains { $0.matchesBody(method: method, url: url) } }

    /// Whether a rule, the last-seen cache or a bundle answers `request` (nothing is counted).
    package func hasEntry(for request: BundleRequest) -> Bool { find(request, followingRedirects: 0) != nil }

    /// Counts a body that failed its checks while being served.
    package func recordError(_ error: any Error, url: String) {
        switch (error as? BundleError)?.code {
        case .changed?:
            // A remote bundle replaced under the read: not a damaged body; its reloader mounts the new one.
            logger.debug("remote bundle replaced under a read", metadata: ["url": "\(url)", "error": "\(error)"])
        case .remote?:
            errors.increment()
            logger.error("a remote bundle's body could not be fetched", metadata: ["url": "\(url)", "error": "\(error)"])
        default:
            errors.increment()
            logger.error("offline body failed its checks", metadata: ["url": "\(url)", "error": "\(error)"])
        }
    }

    // MARK: - The last-seen cache

    /// Keeps what the network answered `request` in the last-seen cache, when there is one and the response may be
    /// kept (see ``LastSeenCache``); only URLs of the bundles' origins are kept.
    ///
    /// - Returns: whether it was kept.
    @discardableResult
    public func remember(_ request: BundleRequest, status: Int, headers: HTTPFields, body: Data) -> Bool {
        guard let lastSeen = options.lastSeen, let key = RequestKeyCanonicalizer().canonicalize(request.url),
            let origin = keyOrigin(key)?.origin, origins.contains(String(origin))
        else { return false }
        return lastSeen.store(key: key, request: request, status: status, headers: headers, body: body)
    }

    /// Whether ``remember(_:status:headers:body:)`` could keep a response to `request` (checked before a body is
    /// collected).
    public func mayRemember(_ request: BundleRequest) -> Bool {
        guard let lastSeen = options.lastSeen, lastSeen.mayStore(request), let key = RequestKeyCanonicalizer().canonicalize(request.url),
            let origin = keyOrigin(key)?.origin
        else { return false }
        return origins.contains(String(origin))
    }

    // MARK: - Finding

    private struct Found {
        var response: BundleResponse
        /// The URL the response answers (after redirects followed).
        var url: String
        /// Answered by a rule: never sent to the network, whatever the policy.
        var fixed: Bool
    }

    private func answered(_ found: Found) -> Plan { .answer(counted(found)) }

    private func counted(_ found: Found) -> BundleResponse {
        hits[found.response.source.description]?.increment()
        logger.debug(
            "offline hit", metadata: ["url": "\(found.url)", "status": "\(found.response.status)", "source": "\(found.response.source)"])
        return found.response
    }

    private func tooOld(_ response: BundleResponse) -> Bool {
        guard let maxAge = options.maxAge, let age = response.headers[.age].flatMap({ Int64($0) }) else { return false }
        return Duration.seconds(age) > maxAge
    }

    private func find(_ request: BundleRequest, followingRedirects maxRedirects: Int) -> Found? {
        let method = request.method.uppercased()
        // A block rule answers every method (a tracker's POST beacon too); the rest answers GET and HEAD only, but
        // in bundles that recorded requests of other methods (request variants).
        guard method == "GET" || method == "HEAD" || bundles.contains(where: \.hasRequestVariants) else {
            return blocked(request).map { Found(response: $0, url: request.url, fixed: true) }
        }
        if method != "GET" && method != "HEAD", let answer = blocked(request) { return Found(response: answer, url: request.url, fixed: true) }
        guard var found = lookup(request, head: method == "HEAD") else { return nil }
        var hops = 0
        var next = request
        while hops < maxRedirects, (300...399).contains(found.response.status), found.response.status != 304,
            let location = found.response.header("location"),
            let target = URLReference.resolve(location, against: found.url)
        {
            next.url = target
            // As clients follow them (RFC 9110 §15.4): a 303 is followed by a GET, and so is a 301 or 302 after a POST.
            let status = found.response.status
            if (status == 303 && next.method.uppercased() != "HEAD") || ((status == 301 || status == 302) && next.method.uppercased() == "POST") {
                next.method = "GET"
                next.body = nil
            }
            guard var followed = lookup(next, head: next.method.uppercased() == "HEAD") else { break }
            // Chosen by the request at any hop, the end of the chain is too.
            followed.response.variesByRequest = followed.response.variesByRequest || found.response.variesByRequest
            found = followed
            hops += 1
        }
        return found
    }

    /// The 204 a runtime block rule or a bundle's block pattern answers `request` with, or nil.
    private func blocked(_ request: BundleRequest) -> BundleResponse? {
        if let answer = compiled.blocked(request) { return answer }
        for bundle in bundles where !bundle.rules.block.isEmpty {
            if let key = bundle.canonicalizer.canonicalize(request.url), bundle.rules.blockPattern(matching: key) != nil {
                return BundleResponse(status: 204, headers: [:], body: .empty, source: .bundle(bundle.label))
            }
        }
        return nil
    }

    private func lookup(_ request: BundleRequest, head: Bool) -> Found? {
        let now = Date()
        if let answer = compiled.answer(request, head: head) { return Found(response: answer, url: request.url, fixed: true) }
        var entryAnswer: (BundleEntry, MountedBundle)?
        var blockedBy: MountedBundle?
        var underPrefix = false
        for bundle in bundles {
            if let entry = bundle.entry(for: request) {
                entryAnswer = (entry, bundle)
                break
            }
            guard !bundle.rules.block.isEmpty || !bundle.rules.substitutionPrefixes.isEmpty,
                let key = bundle.canonicalizer.canonicalize(request.url)
            else { continue }
            if bundle.rules.blockPattern(matching: key) != nil {
                blockedBy = bundle
                break
            }
            if bundle.rules.substitutionPrefix(containing: key) != nil { underPrefix = true }
        }
        // No entry for the URL itself: a bundle whose origin ignores the query for stored files answers with the
        // query-less entry (a search page asked for with its query, as a static server answers it).
        let plainMethod = head || request.method.uppercased() == "GET"
        if entryAnswer == nil, blockedBy == nil, plainMethod, request.url.utf8.contains(UInt8(ascii: "?")) {
            for bundle in bundles {
                if let entry = bundle.entryIgnoringQuery(for: request) {
                    entryAnswer = (entry, bundle)
                    break
                }
            }
        }
        // Whether what answers depends on more than the URL: request variants at the URL, or at the query-less URL
        // that answers it when the origin ignores queries (H19 chooses there by the request's headers too).
        let varies =
            bundles.contains { $0.variesByRequest(url: request.url) }
            || (plainMethod && request.url.utf8.contains(UInt8(ascii: "?")) && bundles.contains { $0.querylessVariesByRequest(url: request.url) })
        // The last-seen cache answers when it is newer than the entry that would (or when no entry would): it keeps
        // GETs, so it answers GET and HEAD of URLs whose answers do not depend on the request (no request variants).
        if blockedBy == nil, plainMethod, let lastSeen = options.lastSeen, let key = RequestKeyCanonicalizer().canonicalize(request.url),
            !varies, let record = lastSeen.record(forKey: key)
        {
            let entryTime = entryAnswer.flatMap { $0.0.fetchedAt ?? $0.1.createdAt }
            if entryTime.map({ record.storedAt > $0 }) ?? true {
                return Found(response: record.respond(to: request, head: head, now: now), url: request.url, fixed: false)
            }
        }
        if let (entry, bundle) = entryAnswer {
            var response = BundleResponder(bundle: bundle).respond(to: request, with: entry, head: head)
            response.variesByRequest = varies
            // From the response's own fields: the entry's headers are decoded once per request, not twice.
            if let age = BundleEntry.age(fetchedAt: entry.fetchedAt, originDate: entry.originDate, recordedAge: response.headers[.age], now: now),
                age.isFinite
            {
                response.headers[.age] = String(Int(min(age, Double(Int32.max))))
            }
            return Found(response: response, url: request.url, fixed: false)
        }
        if let bundle = blockedBy {
            // As the build's blocked entries: 204, no body.
            return Found(response: BundleResponse(status: 204, headers: [:], body: .empty, source: .bundle(bundle.label)), url: request.url, fixed: true)
        }
        if underPrefix {
            // A substitution prefix is answered from the bundle or not at all.
            return Found(response: BundleResponse(status: 404, headers: [.contentLength: "0"], body: .empty, source: .rule), url: request.url, fixed: true)
        }
        return nil
    }
}
