import Foundation
import OfflineBundle

/// robots.txt, fetched once per origin the first time a URL on it is about to be fetched.
///
/// Following RFC 9309: a 4xx answer means no rules; a robots.txt that cannot
/// be fetched (5xx or unreachable after retries) means everything is
/// disallowed; its body is read up to 500 KiB.
actor RobotsCache {
    private var tasks: [String: Task<RobotsRules?, Never>] = [:]

    /// The rules for the origin of `key`, or nil when none apply.
    ///
    /// A redirect of robots.txt is followed only to an origin the crawl may fetch from (`scope`); one that leaves
    /// it counts as no robots.txt, as RFC 9309 §2.3.1.2 allows for redirects that cannot be followed.
    func rules(for key: String, fetcher: Fetcher, spool: ScratchFolder, scope: CrawlScope) async -> RobotsRules? {
        guard let origin = keyOrigin(key).map({ String($0.origin) }) else { return nil }
        if let task = tasks[origin] { return await task.value }
        let task = Task<RobotsRules?, Never> {
            let path = spool.newFile(Int.random(in: 1_000_000_000...Int.max))
            defer { unlink(path) }
            var target = origin + "/robots.txt"
            // RFC 9309 asks crawlers to follow at least five redirects for robots.txt.
            var redirects = 0
            var problem = FetchError(.other, "no answer")
            hops: for _ in 0..<6 {
                let response: Fetcher.Response
                switch await fetcher.fetch(target, spoolPath: path, withinBudget: { $0 <= 8 << 20 }) {
                case .success(let answer): response = answer
                case .failure(let failure):
                    problem = failure
                    break hops
                }
                switch response.status {
                case 200...299:
                    // RFC 9309 §2.5: at least the first 500 KiB are parsed; the rest may be ignored.
                    var bytes = response.bodyBytes()
                    if let encoding = response.headers.first(where: { $0.name == "content-encoding" })?.value,
                        let decoded = ContentDecoding.decode(bytes, encoding: encoding, limit: 500 * 1024)
                    {
                        bytes = decoded
                    }
                    let text = String(decoding: bytes.prefix(500 * 1024), as: UTF8.self)
                    return RobotsRules(parsing: text, userAgent: Self.productToken(fetcher.settings.userAgent))
                case 300...399:
                    guard let location = response.headers.first(where: { $0.name == "location" })?.value,
                        let next = URLReference.resolve(location, against: target), let nextOrigin = HTTPOrigin(url: next),
                        scope.addressRefusal(nextOrigin) == nil, scope.allows(nextOrigin), scope.resolvedAddressRefusal(nextOrigin) == nil
                    else { return nil }
                    target = next
                    redirects += 1
                    continue
                case 400...499:
                    return nil
                default:
                    problem = FetchError(.status, "HTTP \(response.status)", status: response.status)
                }
                break
            }
            // Too many redirects: robots.txt is unavailable, so no rules apply. Otherwise it was unreachable
            // (5xx or no connection after the retries), and RFC 9309 §2.3.1.4 says to assume everything is disallowed.
            if redirects == 6 { return nil }
            var rules = RobotsRules(parsing: "User-agent: *\nDisallow: /\n", userAgent: "*")
            problem.message =
                problem.code == .local
                ? "\(target) could not be kept on this machine (\(problem.message))" : "\(target) could not be fetched (\(problem.message))"
            rules.unavailable = problem
            return rules
        }
        tasks[origin] = task
        return await task.value
    }

    /// The product token of a User-Agent (`packager` in `packager/0.1.0`), as robots.txt groups name crawlers.
    static func productToken(_ userAgent: String) -> String {
        String(userAgent.prefix { $0 != "/" && $0 != " " })
    }
}
