import Foundation
import OfflineBundle

/// Decides, for each URL the crawl meets, whether it is blocked, substituted, fetched or left out, and why.
struct CrawlScope: Sendable {
    /// What to do with a URL.
    enum Decision: Sendable, Equatable {
        case fetch
        /// Answered with an empty response, never fetched; the pattern that matched.
        case block(String)
        /// Answered from a local file (an absolute path), never fetched.
        case substitute(file: String, declared: String)
        /// Not part of this crawl, and why.
        case outOfScope(String)
    }

    /// Why a URL is wanted: the rules differ for each.
    enum Role: Sendable, Equatable {
        /// Given in `seeds` or found in a sitemap: its links are followed.
        case seed
        /// Given in `urls`: fetched as is, nothing followed.
        case declared
        /// Needed to render a page (image, style sheet, script): fetched whatever the depth.
        case requisite
        /// A link from a page: fetched within the depth limit, its links followed.
        case link
        /// A sitemap file: its <loc> entries become seeds.
        case sitemap
    }

    let hosts: [String]
    let include: [[UInt8]]
    let exclude: [[UInt8]]
    let block: [(pattern: String, bytes: [UInt8])]
    let substitutions: [Declaration.Substitution]
    let requisitesFromAnyHost: Bool
    let declaration: Declaration

    init(_ declaration: Declaration) {
        self.declaration = declaration
        var hosts = declaration.scope.hosts
        if hosts.isEmpty {
            // The default scope: every host the declaration names a URL on.
            for text in declaration.seeds + declaration.urls + declaration.sitemaps {
                if let host = URL(string: text)?.host?.lowercased(), !hosts.contains(host) { hosts.append(host) }
            }
        }
        self.hosts = hosts
        include = declaration.scope.include.map { Array($0.lowercased().utf8) }
        exclude = declaration.scope.exclude.map { Array($0.lowercased().utf8) }
        block = declaration.block.map { ($0, Array($0.lowercased().utf8)) }
        substitutions = declaration.substitutions
        requisitesFromAnyHost = declaration.scope.requisitesFromAnyHost
    }

    /// Whether `host` is one the crawl may fetch from (`*.example.com` covers its subdomains and itself).
    func allows(host: String) -> Bool {
        let host = host.lowercased()
        return hosts.contains { pattern in
            if pattern.hasPrefix("*.") {
                let suffix = pattern.dropFirst(1)
                return host.hasSuffix(suffix) || host == pattern.dropFirst(2)
            }
            return host == pattern
        }
    }

    /// What to do with `key` (a canonical URL) met in `role`.
    func decide(_ key: String, role: Role) -> Decision {
        let bytes = Array(key.lowercased().utf8)
        // Block and substitution rules apply to every URL, whatever its host: that is what they are for.
        if let rule = block.first(where: { globMatch($0.bytes[...], bytes[...]) }) { return .block(rule.pattern) }
        if let substitution = substitute(key) { return substitution }
        // Declared URLs were asked for by name.
        if role == .declared || role == .seed || role == .sitemap { return .fetch }
        guard let host = URL(string: key)?.host else { return .outOfScope("no host") }
        if !(role == .requisite && requisitesFromAnyHost) && !allows(host: host) {
            return .outOfScope("host \(host) is not in scope.hosts")
        }
        if let pattern = exclude.first(where: { globMatch($0[...], bytes[...]) }) {
            return .outOfScope("matches scope.exclude '\(String(decoding: pattern, as: UTF8.self))'")
        }
        if role == .link, !include.isEmpty, !include.contains(where: { globMatch($0[...], bytes[...]) }) {
            return .outOfScope("matches no scope.include pattern")
        }
        return .fetch
    }

    /// The local file a substitution answers `key` with.
    private func substitute(_ key: String) -> Decision? {
        for substitution in substitutions {
            switch substitution.match {
            case .url(let url, let file):
                if RequestKeyCanonicalizer(dropQueryParameters: declaration.dropQueryParameters).canonicalize(url) == key {
                    return .substitute(file: declaration.resolve(file), declared: file)
                }
            case .prefix(let prefix, let folder):
                guard let canonicalPrefix = RequestKeyCanonicalizer().canonicalize(prefix), key.hasPrefix(canonicalPrefix) else { continue }
                var rest = String(key.dropFirst(canonicalPrefix.count))
                if let query = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = String(rest[..<query]) }
                rest = rest.removingPercentEncoding ?? rest
                if rest.isEmpty || rest.hasSuffix("/") { rest += "index.html" }
                // The rest of the path must stay inside the folder.
                let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
                if parts.contains("..") || rest.hasPrefix("/") { continue }
                let declared = (folder as NSString).appendingPathComponent(rest)
                return .substitute(file: declaration.resolve(declared), declared: declared)
            }
        }
        return nil
    }
}
