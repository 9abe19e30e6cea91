import OfflineBundle

/// A web origin (RFC 6454): scheme, host and port, with the scheme's default port filled in.
///
/// Scope, header targeting and the "host is down" memory all work on origins,
/// so `http://a` and `https://a`, or `a:80` and `a:6379`, are different servers.
struct HTTPOrigin: Hashable, Sendable, CustomStringConvertible {
    /// `http` or `https`.
    var scheme: String
    /// Lowercased; an IPv6 literal keeps its brackets.
    var host: String
    var port: Int

    init(scheme: String, host: String, port: Int) {
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    /// The origin of an absolute http or https URL; nil for anything else (other schemes, no host, a bad port).
    init?(url: String) {
        guard let key = RequestKeyCanonicalizer().canonicalize(url) else { return nil }
        self.init(key: key)
    }

    /// The origin of a canonical request key (lowercase scheme and host, default port dropped).
    init?(key: String) {
        guard let (_, authority) = keyOrigin(key) else { return nil }
        let scheme: String
        if key.hasPrefix("https://") {
            scheme = "https"
        } else if key.hasPrefix("http://") {
            scheme = "http"
        } else {
            return nil
        }
        guard let (host, port) = Self.split(authority: authority) else { return nil }
        self.init(scheme: scheme, host: host, port: port ?? Self.defaultPort(scheme))
    }

    static func defaultPort(_ scheme: String) -> Int { scheme == "https" ? 443 : 80 }

    /// `host` and the port, if one is written, of `host[:port]` (IPv6 literals in brackets); nil when the port is not a number.
    static func split<S: StringProtocol>(authority: S) -> (host: String, port: Int?)? {
        // On bytes: this runs for every URL a crawl takes in.
        let bytes = Array(authority.utf8)
        var hostEnd = bytes.count
        var port: Int?
        if let colon = bytes.lastIndex(of: UInt8(ascii: ":")), !bytes[colon...].contains(UInt8(ascii: "]")) {
            let digits = bytes[(colon + 1)...]
            guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
            let value = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            guard value <= 65535 else { return nil }
            hostEnd = colon
            port = value
        }
        guard hostEnd > 0 else { return nil }
        return (String(decoding: bytes[..<hostEnd], as: UTF8.self).lowercased(), port)
    }

    var isSecure: Bool { scheme == "https" }

    /// `scheme://host[:port]`, the port written only when it is not the default.
    var description: String {
        port == Self.defaultPort(scheme) ? "\(scheme)://\(host)" : "\(scheme)://\(host):\(port)"
    }
}

/// A pattern over origins, as `scope.hosts` and a header's `origins` write them.
///
/// | written | matches |
/// |---|---|
/// | `https://docs.example.com:8443` | exactly that origin |
/// | `https://docs.example.com` | that scheme and host on the default port (443) |
/// | `docs.example.com` | that host on the default port of https, and of http when the declaration's own URLs use http on it; also any port those URLs name on it |
/// | `docs.example.com:8080` | that host and port, by the same scheme rule |
/// | `*.example.com` | example.com and every subdomain, by the same port and scheme rules |
struct OriginPattern: Hashable, Sendable, CustomStringConvertible {
    /// nil: https, and http where the declaration itself uses http on the host (see ``CrawlScope``).
    var scheme: String?
    /// A host, or `*.suffix` for a domain and its subdomains.
    var host: String
    /// nil: the scheme's default port.
    var port: Int?

    /// The exact pattern of one origin.
    init(_ origin: HTTPOrigin) {
        scheme = origin.scheme
        host = origin.host
        port = origin.port
    }

    /// Parses a pattern; nil with a reason when it is not one.
    static func parse(_ text: String) -> Result<OriginPattern, PatternError> {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces).lowercased())
        var scheme: String?
        if let range = rest.range(of: "://") {
            let written = String(rest[..<range.lowerBound])
            guard written == "http" || written == "https" else { return .failure(.init("the scheme must be http or https")) }
            scheme = written
            rest = rest[range.upperBound...]
            if rest.hasSuffix("/") { rest = rest.dropLast() }
        }
        guard !rest.isEmpty else { return .failure(.init("it names no host")) }
        guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#"), !rest.contains("@") else {
            return .failure(.init("an origin has no path, query or user name (write https://host[:port] or a host name)"))
        }
        guard let (host, port) = HTTPOrigin.split(authority: rest) else { return .failure(.init("the port must be a number from 1 to 65535")) }
        var name = Substring(host)
        if name.hasPrefix("*.") { name = name.dropFirst(2) }
        let isIPv6 = name.hasPrefix("[") && name.hasSuffix("]")
        guard !name.isEmpty, isIPv6 || name.utf8.allSatisfy({ Self.isHostByte($0) }) else {
            return .failure(.init("'\(host)' is not a host name"))
        }
        if host.dropFirst(2).contains("*") || (host.contains("*") && !host.hasPrefix("*.")) {
            return .failure(.init("'*' may only start a host, as in *.example.com"))
        }
        return .success(OriginPattern(scheme: scheme, host: host, port: port))
    }

    struct PatternError: Error, Sendable {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }

    private init(scheme: String?, host: String, port: Int?) {
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    private static func isHostByte(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-")
            || c == UInt8(ascii: ".") || c == UInt8(ascii: "_")
    }

    /// Whether `host` is this pattern's host (or, for `*.suffix`, the suffix or one of its subdomains).
    func matches(host other: String) -> Bool { HTTPRules.hostMatches(pattern: host, host: other) }

    /// Whether `origin` matches.
    ///
    /// - Parameters:
    ///   - plainHTTPAllowed: whether a pattern without a scheme admits http on the origin's host (the declaration's
    ///     own URLs use http there).
    ///   - declared: whether the declaration's own URLs name exactly this origin; a pattern without a port then admits
    ///     its port too (`hosts: [127.0.0.1]` with seeds on `http://127.0.0.1:8480/` means that server).
    func matches(_ origin: HTTPOrigin, plainHTTPAllowed: Bool, declared: Bool = false) -> Bool {
        guard matches(host: origin.host) else { return false }
        if let scheme {
            guard origin.scheme == scheme else { return false }
        } else if !origin.isSecure && !plainHTTPAllowed {
            return false
        }
        if port == nil && declared { return true }
        return origin.port == (port ?? HTTPOrigin.defaultPort(origin.scheme))
    }

    /// The same pattern for another host (a normalized form of its own).
    func withHost(_ other: String) -> OriginPattern {
        OriginPattern(scheme: scheme, host: other, port: port)
    }

    var description: String {
        let authority = port.map { "\(host):\($0)" } ?? host
        return scheme.map { "\($0)://\(authority)" } ?? authority
    }
}

extension Character {
    fileprivate var isASCIINumber: Bool { isASCII && isNumber }
}
