import Foundation
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

/// What services configure at launch: mounted bundles, a policy, overrides, and counters.
///
/// The URLSession protocol, the AsyncHTTPClient wrapper and the Hummingbird
/// middleware all ask a loader. Lookups try each bundle in order. Hits, misses
/// and errors are counted through swift-metrics (`offline_bundle_lookups`,
/// dimension `result`) and logged at debug level through swift-log.
public final class OfflineLoader: Sendable {
    public let bundles: [MountedBundle]
    public let policy: OfflinePolicy
    public let overrides: [PolicyOverride]
    let logger: Logger
    let hits = Counter(label: "offline_bundle_lookups", dimensions: [("result", "hit")])
    let misses = Counter(label: "offline_bundle_lookups", dimensions: [("result", "miss")])
    let errors = Counter(label: "offline_bundle_lookups", dimensions: [("result", "error")])

    /// Creates a loader over already mounted bundles.
    public init(
        bundles: [MountedBundle], policy: OfflinePolicy = .bundleOnly, overrides: [PolicyOverride] = [], logger: Logger = Logger(label: "offline-bundle")
    ) {
        self.bundles = bundles
        self.policy = policy
        self.overrides = overrides
        self.logger = logger
    }

    /// Mounts the bundle at `path` (requiring a signature by `publicKey` when given) and creates a loader over it.
    ///
    /// - Throws: ``BundleError`` when the bundle is missing, corrupt, or not signed by the key.
    public convenience init(path: String, publicKey: [UInt8]? = nil, policy: OfflinePolicy = .bundleOnly, overrides: [PolicyOverride] = []) throws {
        try self.init(bundles: [MountedBundle(path: path, options: .init(requiredPublicKey: publicKey))], policy: policy, overrides: overrides)
    }

    /// The policy for `url`: the first matching override, else the default.
    public func policy(for url: String) -> OfflinePolicy {
        guard !overrides.isEmpty else { return policy }
        let host = keyOrigin(url).flatMap { HTTPRules.host(ofAuthority: $0.authority) } ?? ""
        return overrides.first { $0.matches(url, host: host) }?.policy ?? policy
    }

    /// The bundle's response to `request`, or nil on a miss.
    public func response(for request: BundleRequest) -> BundleResponse? {
        if let response = lookup(request) {
            hits.increment()
            logger.debug("bundle hit", metadata: ["url": "\(request.url)", "status": "\(response.status)"])
            return response
        }
        misses.increment()
        logger.debug("bundle miss", metadata: ["url": "\(request.url)"])
        return nil
    }

    /// The bundle's response to `request` as a client that follows redirects sees it: recorded redirects are
    /// followed inside the bundle, at most `maxRedirects` hops.
    ///
    /// - Returns: the final response and the URL it answers, or nil when the bundle has no entry for the
    ///   request itself. A redirect whose target the bundle lacks is returned as recorded.
    package func response(for request: BundleRequest, followingRedirects maxRedirects: Int) -> (response: BundleResponse, url: String)? {
        guard var answer = response(for: request) else { return nil }
        var url = request.url
        var hops = 0
        while hops < maxRedirects, (300...399).contains(answer.status), answer.status != 304, let location = answer.header("location"),
            let target = URL(string: location, relativeTo: URL(string: url))?.absoluteURL.absoluteString
        {
            var next = request
            next.url = target
            // Hops are not counted as lookups of their own: the client asked once.
            guard let followed = lookup(next) else { break }
            answer = followed
            url = target
            hops += 1
        }
        return (answer, url)
    }

    /// Whether a bundle has an entry for `url` (no lookup is counted).
    package func hasEntry(for url: String) -> Bool { bundles.contains { $0.entry(for: url) != nil } }

    private func lookup(_ request: BundleRequest) -> BundleResponse? {
        for bundle in bundles {
            if let response = BundleResponder(bundle: bundle).respond(to: request) { return response }
        }
        return nil
    }

    /// Counts a body that failed its checks while being served.
    package func recordError(_ error: any Error, url: String) {
        errors.increment()
        logger.error("bundle body failed its checks", metadata: ["url": "\(url)", "error": "\(error)"])
    }
}
