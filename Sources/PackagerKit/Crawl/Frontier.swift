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

    /// Keys taken in, by a 128-bit hash of their bytes: 16 bytes a key, where the key itself took about a hundred. Two of
    /// n keys share one with odds of about n²/2^129: below 2^-89 for a million keys (the bundle already relies on two
    /// bodies never sharing a SHA-256).
    private var seen: Set<KeyHash> = []
    /// Keys left out, with the roles they were left out in (``CrawlScope/Role/bit``).
    private var skipped: [KeyHash: UInt8] = [:]
    private var queues: [String: JobQueue] = [:]
    private var hostOrder: [String] = []
    private var cursor = 0
    private var inFlight: [String: Int] = [:]
    private var totalInFlight = 0
    private(set) var queued = 0
    private var waiters: [CheckedContinuation<Job?, Never>] = []
    let perHost: Int

    /// Where a host's queue keeps the jobs beyond those it holds in memory; nil keeps them all in memory.
    private let spill: ScratchFolder?
    private let jobsInMemory: Int

    /// - Parameters:
    ///   - spill: the scratch folder for each host's jobs beyond `jobsInMemory` (a file per host that needs one).
    init(perHost: Int, spill: ScratchFolder? = nil, jobsInMemory: Int = 2048) {
        self.perHost = perHost
        self.spill = spill
        self.jobsInMemory = jobsInMemory
    }

    /// Whether `key` was already taken in; marks it seen.
    func claim(_ key: String) -> Bool { seen.insert(KeyHash(key)).inserted }

    /// Keys left out remembered at most (17 bytes each, and more in the dictionary): past this, a key left out is
    /// not remembered, so a page naming endless URLs out of scope cannot grow the crawl's memory; it is then counted
    /// each time it is met, and decided again.
    static let maxSkipped = 1 << 20

    /// Notes `key` left out in `role`; true when it is the first time it is left out at all (so it is counted once).
    func noteSkipped(_ key: String, role: CrawlScope.Role) -> Bool {
        let hash = KeyHash(key)
        let before = skipped[hash]
        if before == nil && skipped.count >= Self.maxSkipped { return true }
        skipped[hash] = (before ?? 0) | role.bit
        return before == nil
    }

    /// The positions of the keys that can still change the crawl: not claimed, and not left out before in the same
    /// role (the scope decides the same way for the same key and role, so a repeat changes nothing).
    func unsettled(_ candidates: [(key: String, role: CrawlScope.Role)]) -> [Int] {
        candidates.indices.filter { i in
            let (key, role) = candidates[i]
            let hash = KeyHash(key)
            return !seen.contains(hash) && (skipped[hash] ?? 0) & role.bit == 0
        }
    }

    /// Whether `key` has been claimed.
    func isSeen(_ key: String) -> Bool { seen.contains(KeyHash(key)) }

    /// Queued jobs whose scratch file could not be read back, and so were never fetched.
    var lost: Int { queues.values.reduce(0) { $0 + $1.lost } }

    /// Queues a job whose key was claimed.
    func enqueue(_ job: Job) {
        if queues[job.host] == nil {
            queues[job.host] = JobQueue(path: spill?.path(for: "queue-\(hostOrder.count)"), memoryLimit: jobsInMemory)
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
            for host in hostOrder { queues[host]?.removeFile() }
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
            guard inFlight[host, default: 0] < perHost, let lostBefore = queues[host]?.lost else { continue }
            let job = queues[host]?.pop()
            // Jobs the queue could not read back are no longer queued.
            queued -= (queues[host]?.lost ?? lostBefore) - lostBefore
            guard let job else { continue }
            cursor = (cursor + step + 1) % hostOrder.count
            inFlight[host, default: 0] += 1
            totalInFlight += 1
            queued -= 1
            return job
        }
        return nil
    }
}

/// A request key's 128-bit hash: two 64-bit SipHash values of its bytes, each behind its own prefix.
struct KeyHash: Hashable, Sendable {
    private let a: UInt64
    private let b: UInt64

    init(_ key: String) {
        var key = key
        (a, b) = key.withUTF8 { bytes in
            func hash(_ prefix: UInt8) -> UInt64 {
                var hasher = Hasher()
                hasher.combine(prefix)
                hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
                return UInt64(bitPattern: Int64(hasher.finalize()))
            }
            return (hash(0), hash(1))
        }
    }
}
