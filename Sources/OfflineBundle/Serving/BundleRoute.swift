/// Which requests a server answers from a bundle, and for which origin: by Host, then by path prefix. Every
/// transport (``BundleServing``, and through it the Hummingbird middleware and the channel server) routes with it.
public struct BundleRoute: Sendable {
    /// Requests whose Host is this (without port), or any Host when nil.
    public var host: String?
    /// Requests whose path starts with this prefix; it is removed before the origin is prepended.
    public var pathPrefix: String
    /// The origin the bundle recorded, like `https://docs.example.com`.
    public var origin: String

    public init(host: String? = nil, pathPrefix: String = "/", origin: String) {
        self.host = host?.lowercased()
        self.pathPrefix = pathPrefix.hasSuffix("/") ? pathPrefix : pathPrefix + "/"
        self.origin = origin.hasSuffix("/") ? String(origin.dropLast()) : origin
    }

    /// A Location value as this server serves it: the origin's absolute URLs, and its absolute paths, under the prefix.
    public func localize(_ location: String) -> String {
        if location.lowercased().hasPrefix(origin.lowercased() + "/") { return pathPrefix + location.dropFirst(origin.count + 1) }
        if location.lowercased() == origin.lowercased() { return pathPrefix }
        if location.hasPrefix("/") && !location.hasPrefix("//") { return pathPrefix + location.dropFirst() }
        return location
    }

    /// The absolute URL a request target stands for under the first route that takes it (by Host, then path prefix).
    /// A target that is not an absolute path (`*`, or an HTTP/2 `:path` such as `@other-host/x`, which appended to the
    /// origin would name another authority) is taken by none.
    package static func key(target: String, host: String?, in routes: [BundleRoute]) -> (String, BundleRoute)? {
        guard target.utf8.first == UInt8(ascii: "/") else { return nil }
        for route in routes {
            if let wanted = route.host, wanted != host { continue }
            if route.pathPrefix == "/" { return (route.origin + target, route) }
            if target.hasPrefix(route.pathPrefix) { return (route.origin + "/" + target.dropFirst(route.pathPrefix.count), route) }
            if target == String(route.pathPrefix.dropLast()) { return (route.origin + "/", route) }
        }
        return nil
    }

    /// A request target in origin form (`/path?query`), and the authority an absolute-form target named (RFC 9112
    /// §3.2.2: a request in absolute form, as a client sends to a proxy, names its host in the target, and the Host
    /// field is ignored), when it was one.
    package static func originForm(_ target: String) -> (target: String, authority: String?) {
        guard !target.hasPrefix("/") else { return (target, nil) }
        let lowered = target.prefix(8).lowercased()
        let scheme = lowered.hasPrefix("http://") ? 7 : lowered.hasPrefix("https://") ? 8 : 0
        guard scheme > 0 else { return (target, nil) }
        let rest = target.dropFirst(scheme)
        let end = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let path = rest[end...]
        return (path.hasPrefix("/") ? String(path) : "/" + path, String(rest[..<end]))
    }
}
