import Foundation
import NIOConcurrencyHelpers
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

        /// One bit per role, for sets of roles.
        var bit: UInt8 {
            switch self {
            case .seed: 1
            case .declared: 2
            case .requisite: 4
            case .link: 8
            case .sitemap: 16
            }
        }

        /// The role whose ``bit`` this is.
        init?(bit: UInt8) {
            guard let role = [Self.seed, .declared, .requisite, .link, .sitemap].first(where: { $0.bit == bit }) else { return nil }
            self = role
        }

        /// One letter per role, for keys that pair a role with a URL.
        var letter: String {
            switch self {
            case .seed: "s"
            case .declared: "d"
            case .requisite: "r"
            case .link: "l"
            case .sitemap: "m"
            }
        }
    }

    /// The origins the crawl may fetch from: `scope.hosts`, or the origins of the declaration's own URLs.
    let origins: [OriginPattern]
    /// Hosts the declaration's own URLs reach over plain http: only there may a scheme-less pattern admit http.
    let plainHTTPHosts: Set<String>
    /// The origins of the declaration's own URLs.
    let declaredOrigins: Set<HTTPOrigin>
    /// Which addresses may be fetched (the same policy as verify's and refresh's).
    let addresses: AddressPolicy
    let include: [[UInt8]]
    let exclude: [[UInt8]]
    /// With `no-parent`, the folders of the seeds: a followed link must stay below one of them.
    let parentFolders: [String]
    let block: [(pattern: String, bytes: [UInt8])]
    let substitutions: [Declaration.Substitution]
    /// The canonical keys and prefixes of ``substitutions``, in the same order (nil where one has none).
    let substitutionKeys: [String?]
    let requisitesFromAnyHost: Bool
    let declaration: Declaration
    /// What ``decide(_:role:named:)`` found about each origin: the same for every URL of it, so judged once (the
    /// address checks parsed the host for every link of every page: 14% of a real crawl's CPU).
    private let originVerdicts = NIOLockedValueBox([HTTPOrigin: OriginVerdict]())

    private struct OriginVerdict {
        var addressRefusal: String?
        var allowed: Bool
        /// Asked only for an origin that is otherwise fetched (it resolves the name): nil until then.
        var resolvedRefusal: String??
    }

    init(_ declaration: Declaration) {
        self.declaration = declaration
        let declared = declaration.declaredOrigins
        let explicit = declaration.scope.hosts.compactMap { try? OriginPattern.parse($0).get() }
        origins = explicit.isEmpty ? declared.map(OriginPattern.init) : explicit
        plainHTTPHosts = Set(declared.filter { !$0.isSecure }.map(\.host))
        declaredOrigins = Set(declared)
        addresses = AddressPolicy(declaration)
        include = declaration.scope.include.map { Array($0.lowercased().utf8) }
        exclude = declaration.scope.exclude.map { Array($0.lowercased().utf8) }
        let canonicalizer = RequestKeyCanonicalizer(dropQueryParameters: declaration.dropQueryParameters)
        parentFolders =
            declaration.scope.noParent
            ? declaration.seeds.compactMap(canonicalizer.canonicalize).map { key in
                let end = key.firstIndex { $0 == "?" } ?? key.endIndex
                return String(key[..<end].prefix(through: key[..<end].lastIndex(of: "/")!))
            } : []
        block = declaration.block.map { ($0, Array($0.lowercased().utf8)) }
        substitutions = declaration.substitutions
        substitutionKeys = declaration.substitutions.map { substitution in
            switch substitution.match {
            case .url(let url, _): return canonicalizer.canonicalize(url)
            case .prefix(let prefix, _): return RequestKeyCanonicalizer().canonicalize(prefix)
            }
        }
        requisitesFromAnyHost = declaration.scope.requisitesFromAnyHost
    }

    /// Why `origin` may not be fetched at all, judged from its host as written (``AddressPolicy``); nil when it may.
    func addressRefusal(_ origin: HTTPOrigin) -> String? { addresses.refusal(origin) }

    /// ``addressRefusal(_:)`` for what an unnamed host name resolves to.
    func resolvedAddressRefusal(_ origin: HTTPOrigin) -> String? { addresses.resolvedRefusal(origin) }

    /// Whether `origin` is one the crawl may fetch from.
    func allows(_ origin: HTTPOrigin) -> Bool {
        let plain = plainHTTPHosts.contains(origin.host)
        let declared = declaredOrigins.contains(origin)
        return origins.contains { $0.matches(origin, plainHTTPAllowed: plain, declared: declared) }
    }

    /// What to do with `key` (a canonical URL) met in `role`.
    ///
    /// - Parameter named: the URL is itself written in the declaration (a seed, URL or sitemap as given, not a
    ///   redirect's target or a sitemap's entry): it is fetched whatever the scope, as it was asked for by name.
    func decide(_ key: String, role: Role, named: Bool = false) -> Decision {
        let bytes = Array(key.lowercased().utf8)
        // Block and substitution rules apply to every URL, whatever its host: that is what they are for.
        if let rule = block.first(where: { globMatch($0.bytes[...], bytes[...]) }) { return .block(rule.pattern) }
        if let substitution = substitute(key) { return substitution }
        guard let origin = HTTPOrigin(key: key) else { return .outOfScope("not an http or https URL") }
        let verdict = self.verdict(for: origin)
        if let refusal = verdict.addressRefusal { return .outOfScope(refusal) }
        if named { return .fetch }
        if !(role == .requisite && requisitesFromAnyHost) && !verdict.allowed {
            return .outOfScope("origin \(origin) is not in scope")
        }
        if let refusal = resolvedRefusal(origin, verdict) { return .outOfScope(refusal) }
        if role == .declared || role == .seed || role == .sitemap { return .fetch }
        if let pattern = exclude.first(where: { globMatch($0[...], bytes[...]) }) {
            return .outOfScope("matches scope.exclude '\(String(decoding: pattern, as: UTF8.self))'")
        }
        if role == .link, !include.isEmpty, !include.contains(where: { globMatch($0[...], bytes[...]) }) {
            return .outOfScope("matches no scope.include pattern")
        }
        if role == .link, !parentFolders.isEmpty, !parentFolders.contains(where: { key.hasPrefix($0) }) {
            return .outOfScope("above the seeds' folders (no-parent)")
        }
        return .fetch
    }

    /// The origin-level part of a decision, judged once per origin.
    private func verdict(for origin: HTTPOrigin) -> OriginVerdict {
        if let known = originVerdicts.withLockedValue({ $0[origin] }) { return known }
        let verdict = OriginVerdict(addressRefusal: addressRefusal(origin), allowed: allows(origin))
        originVerdicts.withLockedValue { $0[origin] = verdict }
        return verdict
    }

    /// ``resolvedAddressRefusal(_:)``, resolved once per origin, and only for one that would otherwise be fetched.
    private func resolvedRefusal(_ origin: HTTPOrigin, _ verdict: OriginVerdict) -> String? {
        if let known = verdict.resolvedRefusal { return known }
        let refusal = resolvedAddressRefusal(origin)
        originVerdicts.withLockedValue { $0[origin]?.resolvedRefusal = .some(refusal) }
        return refusal
    }

    /// The local file a substitution answers `key` with.
    private func substitute(_ key: String) -> Decision? {
        for (substitution, canonical) in zip(substitutions, substitutionKeys) {
            guard let canonical else { continue }
            switch substitution.match {
            case .url(_, let file):
                if canonical == key {
                    return .substitute(file: declaration.resolve(file), declared: file)
                }
            case .prefix(_, let folder):
                // A prefix names a folder: `…/fonts` covers `…/fonts/…`, not `…/fonts-old/…`.
                let canonicalPrefix = canonical.hasSuffix("/") ? canonical : canonical + "/"
                guard key.hasPrefix(canonicalPrefix) else { continue }
                // The rest of the path must stay inside the folder.
                guard let rest = SubstitutionPath.relativePath(forRest: key.dropFirst(canonicalPrefix.count)) else { continue }
                let declared = (folder as NSString).appendingPathComponent(rest)
                return .substitute(file: declaration.resolve(declared), declared: declared)
            }
        }
        return nil
    }
}
