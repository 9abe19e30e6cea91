import Foundation
import NIOConcurrencyHelpers
import OfflineBundle

/// Learns which origins ignore the query for stored files, as static servers do (docs/FORMAT.md §4.6): for each
/// origin, the first HTML page it answered without a query is asked for again, with and without a query no link
/// carries; the same answer both times (status 200, the same bytes) means the origin ignores it, and the bundle gets an
/// ignore-query rule for the origin. A page that changes between two requests (a time, a token) teaches nothing, so
/// the rule is left out: a query the bundle cannot answer then stays a miss, never a wrong answer.
final class QueryProbe: Sendable {
    /// The first HTML page without a query each origin answered with 200.
    private let candidates = NIOLockedValueBox<[String: String]>([:])

    /// Notes a page the crawl stored: the first per origin is the one probed.
    func note(key: String, status: Int, mediaType: String) {
        guard status == 200, mediaType == "text/html" || mediaType == "application/xhtml+xml", !key.utf8.contains(UInt8(ascii: "?")),
            let origin = keyOrigin(key).map({ String($0.origin) })
        else { return }
        candidates.withLockedValue { if $0[origin] == nil { $0[origin] = key } }
    }

    /// The ignore-query patterns learned (`ORIGIN/*`), in origin order. `allowed` says whether robots.txt lets a URL be
    /// fetched; `fetch` gets a URL's status and the SHA-256 of its body (nil when it fails).
    func learn(allowed: (String) async -> Bool, fetch: (String) async -> (status: Int, digest: [UInt8])?) async -> [String] {
        var patterns: [String] = []
        for (origin, key) in candidates.withLockedValue({ $0 }).sorted(by: { $0.key < $1.key }) {
            let token = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let probe = key + "?packager-query-probe=" + token
            guard await allowed(probe), let plain = await fetch(key), plain.status == 200, let queried = await fetch(probe), queried.status == 200,
                plain.digest == queried.digest
            else { continue }
            patterns.append(origin + "/*")
        }
        return patterns
    }
}
