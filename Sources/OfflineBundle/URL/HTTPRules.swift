import Foundation

/// Rules about URLs and validators that the runtime and the build side share, so they are decided in one place.
package enum HTTPRules {
    /// Whether `text` is an absolute http or https URL with a host that a request can be made to: it canonicalizes,
    /// and its key has the shape every canonical key has (see `isWellFormedKey`).
    package static func isFetchableURL(_ text: String) -> Bool {
        guard let key = RequestKeyCanonicalizer().canonicalize(text) else { return false }
        return isWellFormedKey(key)
    }

    /// Whether `host` is the host a pattern names: the same name, or for `*.example.com`, example.com or one of its
    /// subdomains. Both are compared lowercased.
    package static func hostMatches(pattern: String, host: String) -> Bool {
        let pattern = pattern.lowercased()
        let host = host.lowercased()
        if pattern.hasPrefix("*.") { return host.hasSuffix(pattern.dropFirst(1)) || host == pattern.dropFirst(2) }
        return host == pattern
    }

    /// The lowercased host of an authority or Host value (`name`, `name:port`, `[v6]`, `[v6]:port`, with or without
    /// user information), IPv6 brackets kept; nil when there is none.
    package static func host<S: StringProtocol>(ofAuthority authority: S) -> String? {
        var text = Substring(authority.lowercased())
        if let at = text.lastIndex(of: "@") { text = text[text.index(after: at)...] }
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            return String(text[...close])
        }
        if let colon = text.lastIndex(of: ":") { text = text[..<colon] }
        return text.isEmpty ? nil : String(text)
    }

    /// Weak comparison of two entity-tags (RFC 9110 §8.8.3.2): equal opaque tags, `W/` or not.
    package static func weaklyEqual(_ a: String, _ b: String) -> Bool {
        func opaque(_ tag: String) -> Substring {
            let trimmed = Substring(tag.trimmingCharacters(in: .whitespaces))
            return trimmed.hasPrefix("W/") ? trimmed.dropFirst(2) : trimmed
        }
        return opaque(a) == opaque(b)
    }
}
