import HTTPTypes

/// Which response header fields a bundle keeps and which an answer carries: one policy, read by the crawl (what it
/// records), the writer (what it never stores), every answer (what it never replays), the last-seen cache and
/// `check`. Names are lowercase; compare a field's `canonicalName` lowercased, or use ``isReplayed(_:)``.
package enum HeaderPolicy {
    /// What a crawl records of an origin's response: what a client needs to use it, and what verify compares.
    /// Credentials, cookies and connection state are not among them. APIs' clients also read paging (`link`,
    /// `next-page`, the total counts), `retry-after`, `allow` and `www-authenticate` (on the 405 and 401 fixtures),
    /// CORS answers, and an API's lifecycle (`deprecation`, `sunset`); rate-limit counters, which change on every
    /// answer and describe the live server's state, are not kept.
    package static let recorded: Set<String> = [
        "content-type", "content-language", "content-encoding", "content-disposition", "etag", "last-modified", "cache-control", "expires", "vary",
        "location", "link", "access-control-allow-origin", "content-security-policy", "x-content-type-options", "refresh",
        "next-page", "total-records", "x-total-count", "x-total", "x-total-pages", "x-next-page", "x-page", "x-per-page", "retry-after", "allow",
        "www-authenticate", "access-control-expose-headers", "access-control-allow-methods", "access-control-allow-headers",
        "access-control-allow-credentials", "access-control-max-age", "deprecation", "sunset", "content-location",
    ]

    /// Never written into a bundle, whoever adds the entry (a crawl, `pack`, the writer's API): credentials, and
    /// hop-by-hop fields that describe one connection. Content-Length is the body's, computed when answering.
    package static let neverStored: Set<String> = [
        "authorization", "proxy-authorization", "cookie", "set-cookie", "set-cookie2",
        "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection",
        "content-length",
    ]

    /// Request fields the sending client writes itself, from the URL (Host), the body (Content-Length, Expect) and its
    /// connection (the hop-by-hop fields): an imported recording's are not kept with its request, and one a bundle
    /// recorded by its name alone (older imports) is not a secret verify and refresh miss; one recorded with a value (a
    /// declaration's Host for a virtual host) is sent as recorded.
    package static let writtenBySender: Set<String> = [
        "host", "content-length", "expect", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection",
    ]

    /// Stored fields an answer never carries (a bundle written by another tool may hold them): framing, cookies,
    /// and state a browser keeps for the serving origin (transport security, reporting endpoints, client hints, a
    /// service worker's scope), which a recorded answer must not set for this server.
    package static let neverReplayed: Set<String> = [
        "content-length", "set-cookie", "set-cookie2", "strict-transport-security", "public-key-pins", "alt-svc", "clear-site-data",
        "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade", "proxy-connection",
        "nel", "report-to", "reporting-endpoints", "accept-ch", "critical-ch", "service-worker-allowed",
    ]

    /// Whether an answer carries a stored field of this name.
    package static func isReplayed(_ name: HTTPField.Name) -> Bool { !neverReplayed.contains(name.canonicalName.lowercased()) }
}
