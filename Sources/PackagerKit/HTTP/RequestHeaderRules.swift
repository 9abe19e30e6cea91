/// Which declared request headers go to which origin: the one place crawl, verify and refresh ask.
///
/// A header goes only to the origins it is declared for: those its `origins`
/// list names, or, when it names none, the origins of the declaration's
/// `seeds`, `urls` and `sitemaps`. A pattern without a scheme never admits
/// plain http on a host the declaration reaches over https, so a header meant
/// for an https origin never travels in clear.
struct RequestHeaderRules: Sendable {
    private struct Rule: Sendable {
        var header: Declaration.Header
        var targets: [OriginPattern]
    }

    private let rules: [Rule]
    /// Hosts the declaration's own URLs reach over plain http (a scheme-less pattern admits http only there).
    private let plainHTTPHosts: Set<String>
    /// The origins of the declaration's own URLs (a port-less pattern admits their ports).
    private let declared: Set<HTTPOrigin>

    /// No headers at all.
    static let none = RequestHeaderRules(rules: [], plainHTTPHosts: [], declared: [])

    private init(rules: [Rule], plainHTTPHosts: Set<String>, declared: Set<HTTPOrigin>) {
        self.rules = rules
        self.plainHTTPHosts = plainHTTPHosts
        self.declared = declared
    }

    /// The rules a declaration sets (its `origins` lists were checked when it was parsed).
    init(_ declaration: Declaration) {
        let declared = declaration.declaredOrigins
        let defaults = declared.map(OriginPattern.init)
        rules = declaration.headers.map { header in
            let targets = header.origins.compactMap { try? OriginPattern.parse($0).get() }
            return Rule(header: header, targets: header.origins.isEmpty ? defaults : targets)
        }
        plainHTTPHosts = Set(declared.filter { !$0.isSecure }.map(\.host))
        self.declared = Set(declared)
    }

    /// The headers to send to `origin`.
    func headers(for origin: HTTPOrigin) -> [Declaration.Header] {
        guard !rules.isEmpty else { return [] }
        let plain = plainHTTPHosts.contains(origin.host)
        let isDeclared = declared.contains(origin)
        return rules.filter { rule in rule.targets.contains { $0.matches(origin, plainHTTPAllowed: plain, declared: isDeclared) } }.map(\.header)
    }

    /// The headers to send with a request for `url` (none when it has no http or https origin).
    func headers(forURL url: String) -> [Declaration.Header] {
        guard !rules.isEmpty, let origin = HTTPOrigin(key: url) ?? HTTPOrigin(url: url) else { return [] }
        return headers(for: origin)
    }
}

extension Declaration {
    /// The origins of `seeds`, `urls`, `sitemaps` and `requests`, in order of first mention.
    var declaredOrigins: [HTTPOrigin] {
        var seen = Set<HTTPOrigin>()
        return (seeds + urls + sitemaps + requests.map(\.url)).compactMap(HTTPOrigin.init(url:)).filter { seen.insert($0).inserted }
    }
}
