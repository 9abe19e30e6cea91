import Foundation

/// The crawl's browser: what a page asks for when it runs, and which connections the browser may open.
extension Crawler {
    /// What a page asks for in the browser, and the links of its rendered DOM, as URLs found on it: requests as
    /// requisites, links as links (within the depth limit, from pages that follow links). The browser itself reaches
    /// only origins the scope allows (other requests fail in it, and are offered to the scope like any URL found).
    func rendered(_ url: String, in browser: BrowserPool, role: CrawlScope.Role, depth: Int) async -> [(
        url: String, role: CrawlScope.Role, depth: Int
    )] {
        let scope = self.scope
        let anyHost = declaration.scope.requisitesFromAnyHost
        let headerRules = fetcher.settings.headerRules
        let (robots, fetcher, spool, obeysRobots) = (self.robots, self.fetcher, self.spool, declaration.respectRobots)
        let visit = await browser.visit(url) { request in
            guard let origin = HTTPOrigin(url: request.url), scope.addressRefusal(origin) == nil, anyHost || scope.allows(origin) else { return .fail }
            // robots.txt holds for what the browser asks as for what the crawl asks.
            if obeysRobots, let rules = await robots.rules(for: request.url, fetcher: fetcher, spool: spool, scope: scope),
                !rules.allows(Self.pathAndQuery(request.url))
            {
                return .fail
            }
            // The headers declared for the origin (a token, a cookie), as the crawl sends them, and to no other origin.
            return .proceed(headers: headerRules.headers(for: origin).map { ($0.name, $0.value) })
        }
        if let problem = visit.problem { state.browserProblem(page: url, reason: problem) }
        if let sweep = visit.sweep { state.searchSwept(sweep) }
        var found: [(url: String, role: CrawlScope.Role, depth: Int)] = []
        for (request, _) in visit.requests where request.method == "GET" && request.url != url {
            found.append((request.url, .requisite, depth))
            // A frame the page's script sent to an address with a query (a search box's results frame, `?word`): the
            // address without it too, which answers every other query of it offline where the origin ignores them (H2).
            if request.type == "Document", let mark = request.url.firstIndex(of: "?") { found.append((String(request.url[..<mark]), .requisite, depth)) }
        }
        // The addresses its scripts gave the page (a reload there asks for them).
        for address in visit.states where address != url { found.append((address, .requisite, depth)) }
        let maxDepth = declaration.scope.maxDepth
        if role == .seed || role == .link, maxDepth.map({ depth < $0 }) ?? true {
            for link in visit.links { found.append((link, .link, depth + 1)) }
        }
        return found
    }

    /// Which connections the browser may open (``BrowserProxy``): to an origin the scope allows (any host for
    /// requisites, where the declaration says so), at an address the crawl may fetch from, as written and as resolved.
    /// A tunnel (CONNECT) carries https, or a WebSocket of either scheme: it is judged as either origin.
    static func browserConnections(scope: CrawlScope, anyHost: Bool) -> BrowserProxy.Decide {
        { host, port, tunnel in
            let authority = (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
            let schemes = !tunnel ? ["http"] : port == 80 ? ["http"] : ["https", "http"]
            for scheme in schemes {
                guard let origin = HTTPOrigin(url: scheme + "://" + authority + "/"), anyHost || scope.allows(origin) else { continue }
                return scope.addressRefusal(origin) == nil && scope.resolvedAddressRefusal(origin) == nil
            }
            return false
        }
    }
}
