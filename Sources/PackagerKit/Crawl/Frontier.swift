/// The crawl's queue: every request key once, handed out breadth-first within per-host and total limits.
///
/// Workers call ``next()`` until it returns nil, which happens only when
/// nothing is queued and nothing is in flight, so a response still being
/// processed can add more work before the crawl is declared done.
actor Frontier {
    /// One URL to fetch, and why.
    struct Job: Sendable {
        /// The URL as written (absolute, without its fragment): what is fetched.
        var url: String
        /// The canonical request key: what is deduplicated and stored.
        var key: String
        var host: String
        var role: CrawlScope.Role
        /// Links followed from a seed to reach this URL.
        var depth: Int
        /// The page that linked here, for reports.
        var referrer: String?
        /// Keys of earlier hops when this URL is a redirect target.
        var redirectChain: [String] = []
        /// Whether the declaration named this URL (or it is a redirect target of one): its failure fails the build.
        var declared: Bool
    }

    private var seen: Set<String> = []
    /// Keys left out, with the roles they were left out in (``CrawlScope/Role/bit``).
    private var skipped: [String: UInt8] = [:]
    private var queues: [String: FIFO] = [:]
    private var hostOrder: [String] = []
    private var cursor = 0
    private var inFlight: [String: Int] = [:]
    private var totalInFlight = 0
    private(set) var queued = 0
    private var waiters: [CheckedContinuation<Job?, Never>] = []
    let perHost: Int

    init(perHost: Int) { self.perHost = perHost }

    /// Whether `key` was already taken in; marks it seen.
    func claim(_ key: String) -> Bool { seen.insert(key).inserted }

    /// Notes `key` left out in `role`; true when it is the first time it is left out at all (so it is counted once).
    func noteSkipped(_ key: String, role: CrawlScope.Role) -> Bool {
        let before = skipped[key]
        skipped[key] = (before ?? 0) | role.bit
        return before == nil
    }

    /// The positions of the keys that can still change the crawl: not claimed, and not left out before in the same
    /// role (the scope decides the same way for the same key and role, so a repeat changes nothing).
    func unsettled(_ candidates: [(key: String, role: CrawlScope.Role)]) -> [Int] {
        candidates.indices.filter { i in
            let (key, role) = candidates[i]
            return !seen.contains(key) && (skipped[key] ?? 0) & role.bit == 0
        }
    }

    /// Whether `key` has been claimed.
    func isSeen(_ key: String) -> Bool { seen.contains(key) }

    /// Queues a job whose key was claimed.
    func enqueue(_ job: Job) {
        if queues[job.host] == nil {
            queues[job.host] = FIFO()
            hostOrder.append(job.host)
        }
        queues[job.host]!.push(job)
        queued += 1
        dispatch()
    }

    /// The next job, waiting while every queued host is at its limit; nil when the crawl is done.
    func next() async -> Job? {
        if let job = take() { return job }
        if finished { return nil }
        return await withCheckedContinuation { waiters.append($0) }
    }

    /// Marks a job finished; call after its discoveries were enqueued.
    func finish(_ job: Job) {
        inFlight[job.host, default: 1] -= 1
        totalInFlight -= 1
        dispatch()
    }

    private var finished: Bool { queued == 0 && totalInFlight == 0 }

    private func dispatch() {
        while !waiters.isEmpty, let job = take() { waiters.removeFirst().resume(returning: job) }
        if finished {
            let all = waiters
            waiters = []
            for waiter in all { waiter.resume(returning: nil) }
        }
    }

    /// The next job from the first host, round robin, that is under its limit.
    private func take() -> Job? {
        guard queued > 0, !hostOrder.isEmpty else { return nil }
        for step in 0..<hostOrder.count {
            let host = hostOrder[(cursor + step) % hostOrder.count]
            guard inFlight[host, default: 0] < perHost, let job = queues[host]?.pop() else { continue }
            cursor = (cursor + step + 1) % hostOrder.count
            inFlight[host, default: 0] += 1
            totalInFlight += 1
            queued -= 1
            return job
        }
        return nil
    }

    /// A first-in first-out queue without the cost of removing from an array's front.
    private struct FIFO {
        var items: [Job] = []
        var head = 0
        mutating func push(_ job: Job) { items.append(job) }
        mutating func pop() -> Job? {
            guard head < items.count else { return nil }
            let job = items[head]
            head += 1
            if head > 1024 && head * 2 > items.count {
                items.removeFirst(head)
                head = 0
            }
            return job
        }
    }
}
