import NIOHTTP1

extension BundleChannelHandler {
    /// What of a request's header fields decides its answer, and so the key its whole answer is kept under; read from
    /// HTTP/1 heads here and from HTTP/2 header blocks by ``HTTP2Connection``, so both find the same answers.
    struct Asked {
        var host: String?
        /// How many Host fields the request has (RFC 9112 §3.2: one, in HTTP/1.1).
        var hosts = 0
        var acceptEncoding: String?
        private var encodings = 0
        private var conditional = false
        /// No If-None-Match, If-Modified-Since or Range, and one Accept-Encoding at most: the answer is the same for
        /// every such request with the same Host, target and Accept-Encoding.
        var plain: Bool { !conditional && encodings <= 1 }

        init() {}

        init(_ headers: HTTPHeaders) {
            for (name, value) in headers { read(name, value) }
        }

        /// Takes one header field into account (its name in any case).
        mutating func read(_ name: String, _ value: String) {
            switch name.utf8.count {
            case 4 where Self.named(name, "host"):
                if host == nil { host = value }
                hosts += 1
            case 15 where Self.named(name, "accept-encoding"):
                acceptEncoding = value
                encodings += 1
            case 5 where Self.named(name, "range"): conditional = true
            case 13 where Self.named(name, "if-none-match"): conditional = true
            case 17 where Self.named(name, "if-modified-since"): conditional = true
            default: break
            }
        }

        /// The key a plain GET of `target` with these fields is kept under.
        func key(for target: String) -> ResponseCache.Key { .init(host: host, target: target, acceptEncoding: acceptEncoding) }

        /// Whether `name` is `lowercase` in any case (ASCII).
        static func named(_ name: String, _ lowercase: StaticString) -> Bool {
            lowercase.withUTF8Buffer { wanted in
                name.utf8.elementsEqual(wanted) { byte, want in (byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) == want }
            }
        }
    }
}
