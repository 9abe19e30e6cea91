import Foundation
import NIOHTTP1
import OfflineBundle

/// The declaration's `requests:`: each sent as declared (method, headers, body), its answer kept under its request's
/// key whatever its status when the status was expected, the pages of a paged answer followed to the last one.
extension Crawler {
    /// Sends every declared request, at most `concurrency.total` at once, before the crawl proper; their plain keys
    /// are then not fetched again by the crawl.
    func runDeclaredRequests() async {
        let requests = declaration.requests
        guard !requests.isEmpty else { return }
        await withTaskGroup(of: Void.self) { group in
            var next = 0
            func start() {
                guard next < requests.count else { return }
                let request = requests[next]
                next += 1
                group.addTask { await self.send(request) }
            }
            for _ in 0..<min(max(1, declaration.concurrency.total), Declaration.maxConcurrency) { start() }
            for await _ in group { start() }
        }
    }

    /// One declared request and the pages that follow it.
    private func send(_ declared: Declaration.Request) async {
        var url = declared.url
        var seen: [String] = []
        var page = 1
        let origin = HTTPOrigin(url: declared.url)
        while true {
            let label = page == 1 ? "\(declared.method) \(url)" : "page \(page) of \(declared.method) \(declared.url): \(url)"
            func fail(_ reason: String, status: Int? = nil, attempts: Int = 1, recorded: Bool = false) {
                // A next page's URL may carry a secret: the report names it redacted, as the crawl does.
                state.fail(
                    .init(
                        url: secretScan.redacted(url), reason: reason + " (requests, line \(declared.line))", status: status, attempts: attempts,
                        declared: true, referrer: page == 1 ? nil : secretScan.redacted(declared.url), recorded: recorded))
            }
            guard let key = canonicalizer.canonicalize(url), HTTPOrigin(key: key) != nil else {
                fail("not a URL that can be fetched")
                return
            }
            guard !seen.contains(key) else {
                fail("pagination loop: page \(page) is \(key) again, after \(seen.count) pages")
                return
            }
            seen.append(key)
            guard !(secretScan.found(in: key) || secretScan.found(in: url)) else {
                fail("carries a secret from the environment; not fetched")
                return
            }
            // The next pages of an API stay on its origin: a link elsewhere is not followed with its headers.
            if page > 1, HTTPOrigin(key: key) != origin {
                fail("the next page is on another origin than the request; not followed")
                return
            }
            if declaration.respectRobots, let rules = await robots.rules(for: key, fetcher: fetcher, spool: spool, scope: scope),
                !rules.allows(Self.pathAndQuery(key))
            {
                fail(
                    rules.unavailable.map { "robots.txt could not be fetched: \($0.message)" }
                        ?? "robots.txt disallows it (set 'robots: false' to fetch anyway)")
                return
            }
            // Later pages are GETs of the next URL, with the same headers.
            let method = page == 1 ? declared.method : "GET"
            let body = page == 1 ? declared.body : nil
            let originHeaders: [(name: String, value: String)] = (origin.map(fetcher.settings.headerRules.headers(for:)) ?? []).map { ($0.name, $0.value) }
            let sentHeaders =
                originHeaders.filter { header in !declared.headers.contains { $0.name.lowercased() == header.name.lowercased() } }
                + declared.headers.map { (name: $0.name, value: $0.value) }
            let path = spool.newFile(state.nextSpoolNumber())
            let reservation = ByteReservation(state: state)
            let maxBody = declaration.scope.maxBody
            let outcome = await fetcher.fetch(
                url, method: HTTPMethod(rawValue: method), headers: declared.headers.map { ($0.name, $0.value) }, body: body, spoolPath: path,
                memory: memory, withinBudget: { $0 <= maxBody && reservation.grow(to: $0) })
            defer { reservation.release() }
            let response: Fetcher.Response
            switch outcome {
            case .failure(let failure):
                fail(failure.message, status: failure.status, attempts: failure.attempts)
                return
            case .success(let answered) where RetryLoop.retryable(status: answered.status) && declared.status != answered.status:
                answered.discard(returningTo: memory)
                fail("HTTP \(answered.status)", status: answered.status, attempts: answered.attempts)
                return
            case .success(let answered):
                response = answered
            }
            state.commitBytes(response.bodySize)
            if !secretScan.isEmpty, Self.bodyCarriesSecret(response.body, scan: secretScan) {
                response.discard(returningTo: memory)
                fail(Self.bodySecretReason, status: response.status, attempts: response.attempts)
                return
            }
            let bytes = Data(response.bodyBytes())
            var entry = recordedEntry(key, response)
            switch Recorder.request(
                method: method, body: body, sent: sentHeaders, vary: declared.vary, responseHeaders: response.headers,
                secret: { name in (declared.headers + declaration.headers).contains { $0.name.lowercased() == name && $0.secret } }, scan: secretScan)
            {
            case .success(let request): entry.request = request
            case .failure(let problem):
                response.discard(returningTo: memory)
                fail(problem.message)
                return
            }
            entry.request?.paginate = declared.paginate.word
            // A body that holds a secret is kept as its digest alone (the key's b=); verify takes it from the declaration.
            entry.request?.bodySecret = page == 1 && declared.bodySecret
            if !declared.volatile.isEmpty {
                entry.volatile = declared.volatile
                entry.stableSHA256 = StableJSON.digest(of: bytes, volatile: declared.volatile)
            }
            let fullKey = key + (entry.request?.qualifiers.keySuffix ?? "")
            let taken = declaredKeys.withLockedValue { keys -> Int? in
                if let line = keys[fullKey] { return line }
                keys[fullKey] = declared.line
                return nil
            }
            if let line = taken {
                response.discard(returningTo: memory)
                fail(
                    "its answer would be kept under the same key as the answer to the request on line \(line): the response does not vary on "
                        + "the headers that tell the two apart; name them in 'vary' (e.g. vary: [Accept-Language])")
                return
            }
            // The crawl does not fetch again what a declared GET without a body recorded with at most the credentials the
            // crawl itself would send: its fetch would be the same request, answered under the same key.
            if let request = entry.request, request.method == "GET", request.body == nil, request.withheldBodyDigest == nil,
                request.keyHeaders.allSatisfy({ RequestQualifiers.credentialHeaders.contains($0.name) })
            {
                _ = requestedKeys.isNew(key)
            }
            let index = state.add(entry, kind: .fetched, httpVersion: response.httpVersion)
            if entry.body != nil {
                let owned: Bool
                if case .file = response.body { owned = true } else { owned = false }
                pipeline?.submit(.init(index: index, entry: entry, ownsFile: owned, budgeted: !owned))
            }
            // The status expected, or else a success or a redirect: otherwise the build fails (the answer is recorded).
            if let expected = declared.status, page == 1 {
                if response.status != expected {
                    fail("HTTP \(response.status), where the declaration expects \(expected)", status: response.status, recorded: true)
                    return
                }
            } else if response.status >= 400 {
                fail("HTTP \(response.status)", status: response.status, attempts: response.attempts, recorded: true)
                return
            }
            guard (200...299).contains(response.status), let next = Recorder.nextPage(of: response.headers, body: bytes, pagination: declared.paginate) else {
                return
            }
            guard let target = URLReference.resolve(next, against: url) else {
                fail("the next page '\(next)' is not a URL")
                return
            }
            guard page < declared.maxPages else {
                state.limit("\(label): stopped after \(declared.maxPages) pages (paginate.max-pages); the last page kept names a next page the bundle lacks")
                return
            }
            url = target
            page += 1
        }
    }
}
