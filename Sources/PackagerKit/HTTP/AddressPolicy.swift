import NIOConcurrencyHelpers

/// Which network addresses the project's requests may reach: one policy for the crawl (`build`), `verify` and
/// `refresh`, so a bundle or a page can make none of them reach what the others refuse.
///
/// - Link-local and cloud-metadata addresses (and 0.0.0.0, which reaches the local host) are never fetched.
/// - Loopback and private addresses are fetched only on an origin the declaration names (host and port: naming
///   `localhost:8080` does not open `localhost:6379`), or on any origin when ``allowPrivate`` says so
///   (`--allow-private-addresses`, for a bundle of a service on this machine or network).
/// - A host name is judged as written, then by what it resolves to (`getaddrinfo`, once per name), unless the
///   declaration names it.
struct AddressPolicy: Sendable {
    /// The origins the declaration names (its URLs, `scope.hosts` and header origins, hosts in dotted-quad form).
    let namedOrigins: [OriginPattern]
    /// The origins of the declaration's own URLs.
    let declaredOrigins: Set<HTTPOrigin>
    /// Loopback and private addresses allowed on every origin.
    let allowPrivate: Bool
    /// What names resolve to.
    let resolver: HostResolver
    /// ``refusal(forURL:)``'s verdicts by origin, which they depend on alone (a name resolves once per resolver):
    /// verify asks once per entry, mostly of one origin.
    private let verdicts = NIOLockedValueBox<[HTTPOrigin: Refusal?]>([:])

    init(namedOrigins: [OriginPattern] = [], declaredOrigins: Set<HTTPOrigin> = [], allowPrivate: Bool = false, resolver: HostResolver = HostResolver()) {
        self.namedOrigins = namedOrigins.map { $0.withHost(Self.normalizedHost($0.host)) }
        self.declaredOrigins = declaredOrigins
        self.allowPrivate = allowPrivate
        self.resolver = resolver
    }

    /// The policy of a declaration: the origins it names may be loopback or private.
    init(_ declaration: Declaration, allowPrivate: Bool = false) {
        let declared = declaration.declaredOrigins
        let explicit = declaration.scope.hosts.compactMap { try? OriginPattern.parse($0).get() }
        let headerPatterns = declaration.headers.flatMap(\.origins).compactMap { try? OriginPattern.parse($0).get() }
        self.init(
            namedOrigins: declared.map(OriginPattern.init) + explicit + headerPatterns, declaredOrigins: Set(declared), allowPrivate: allowPrivate)
    }

    /// A host as compared for naming: IPv4 literals in dotted-quad form, a trailing dot dropped.
    static func normalizedHost(_ host: String) -> String {
        let host = host.hasSuffix(".") ? String(host.dropLast()) : host
        return AddressClass.normalizedIPv4(host) ?? host
    }

    /// Whether the declaration names `origin` (any scheme; a pattern without a port admits the default ports and
    /// the ports the declaration's own URLs use).
    func names(_ origin: HTTPOrigin) -> Bool {
        var normalized = origin
        normalized.host = Self.normalizedHost(origin.host)
        let declared = declaredOrigins.contains(origin)
        return namedOrigins.contains { $0.matches(normalized, plainHTTPAllowed: true, declared: declared) }
    }

    /// Why an address may not be fetched.
    struct Refusal: Sendable, Equatable, CustomStringConvertible {
        var reason: String
        /// Whether naming the origin in a declaration, or allowing private addresses, would let it be fetched (false for
        /// link-local and metadata addresses, which never are).
        var allowable: Bool
        var description: String { reason }
    }

    /// Why `origin` may not be fetched at all, judged from its host as written; nil when it may.
    func refusal(_ origin: HTTPOrigin) -> String? {
        refusal(for: AddressClass(host: origin.host), origin: origin, via: nil)?.reason
    }

    /// ``refusal(_:)`` for what an unnamed host name resolves to (through DNS or `/etc/hosts`).
    func resolvedRefusal(_ origin: HTTPOrigin) -> String? { resolved(origin)?.reason }

    private func resolved(_ origin: HTTPOrigin) -> Refusal? {
        let host = origin.host.hasSuffix(".") ? String(origin.host.dropLast()) : origin.host
        // Literals were judged as written; names the declaration gives are trusted as given.
        guard !host.hasPrefix("["), AddressClass.ipv4(host) == nil, !names(origin) else { return nil }
        return resolver.classes(of: host).lazy.compactMap { refusal(for: $0, origin: origin, via: host) }.first
    }

    /// Both: as written, then as resolved (for a request made once, as verify and refresh make them).
    func refusal(forURL url: String) -> Refusal? {
        guard let origin = HTTPOrigin(key: url) else { return Refusal(reason: "not an http or https URL", allowable: false) }
        if let known = verdicts.withLockedValue({ $0[origin] }) { return known }
        let verdict = refusal(for: AddressClass(host: origin.host), origin: origin, via: nil) ?? resolved(origin)
        verdicts.withLockedValue { $0[origin] = verdict }
        return verdict
    }

    private func refusal(for address: AddressClass, origin: HTTPOrigin, via name: String?) -> Refusal? {
        let what = name.map { "\($0) resolves to a" } ?? "\(origin.host) is a"
        switch address {
        case .linkLocal:
            return Refusal(reason: "\(what) link-local or cloud-metadata address, which is never fetched", allowable: false)
        case .loopback where !allowPrivate && !names(origin):
            return Refusal(reason: "\(what) loopback address on an origin no declaration names (\(origin))", allowable: true)
        case .privateNetwork where !allowPrivate && !names(origin):
            return Refusal(reason: "\(what) private address on an origin no declaration names (\(origin))", allowable: true)
        default:
            return nil
        }
    }
}
