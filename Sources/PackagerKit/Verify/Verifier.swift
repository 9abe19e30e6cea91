import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import OfflineBundle

/// `packager verify`: asks the live servers, as cheaply as each entry allows, whether its content moved on.
///
/// - An entry with an ETag or Last-Modified gets a conditional GET; 304 means fresh.
/// - One without gets a HEAD (a GET whose body is not read when the server
///   refuses HEAD); with `deep`, a full GET whose SHA-256 is compared.
/// - Recorded redirects are asked again without following, and their target compared.
/// - Substituted and blocked entries are reported, not probed.
///
/// Requests run with bounded concurrency, a per-host limit and an optional
/// rate limit; connection errors, 429 and 5xx are retried with backoff,
/// honouring Retry-After. Request headers (from a declaration) are sent and
/// never printed.
public struct Verifier: Sendable {
    /// How to verify.
    public struct Options: Sendable {
        /// Download and hash bodies of entries without validators.
        public var deep = false
        public var concurrency = 16
        public var perHost = 8
        /// Requests per second in all; nil for no limit.
        public var rate: Double?
        public var retries = Declaration.Retries()
        public var timeouts = Declaration.Timeouts()
        /// Which declared headers go to which origin (from ``init(declaration:)``; none otherwise).
        var headerRules = RequestHeaderRules.none
        /// The values from the environment in the declared headers: never written into a refreshed bundle.
        var secrets: [String] = []
        public var userAgent = "packager/\(PackagerVersion.string)"
        public var failOn = Verdict.failingByDefault

        public init() {}

        /// Takes headers, retries, timeouts, user agent and concurrency from a declaration.
        public init(declaration: Declaration) {
            headerRules = RequestHeaderRules(declaration)
            secrets = declaration.secrets
            retries = declaration.retries
            timeouts = declaration.timeouts
            userAgent = declaration.userAgent
            concurrency = declaration.concurrency.total
            perHost = declaration.concurrency.perHost
        }
    }

    public var options: Options

    public init(options: Options = Options()) { self.options = options }

    /// Verifies every entry of the bundle at `path`.
    ///
    /// - Parameter progress: called after each entry with the number done and the total.
    /// - Throws: `BundleError` when the bundle cannot be mounted.
    public func verify(bundleAt path: String, progress: (@Sendable (Int, Int) -> Void)? = nil) async throws -> VerifyReport {
        let bundle = try MountedBundle(path: path)
        let started = Date()
        let entries = bundle.entries
        let client = HTTPTransport.makeClient(timeouts: options.timeouts, perHost: options.perHost, decompress: false)
        // A fixed set of workers pulls entries in order: no task per entry. The per-host limiter is consulted only
        // when it can bind (per-host below the total); hosts found unreachable are remembered either way.
        let limiter = options.perHost < options.concurrency ? HostLimiter(total: options.concurrency, perHost: options.perHost) : nil
        let downHosts = DownHosts()
        let pacer = options.rate.map { Pacer(perSecond: $0) }
        let done = Counter()
        let dispenser = Counter()
        let probe = Probe(options: options, client: client, pacer: pacer, retryLoop: RetryLoop(retries: options.retries, downHosts: downHosts))
        let order = limiter == nil ? Array(entries.indices) : Self.interleavedByHost(entries)
        let results = await withTaskGroup(of: [EntryVerification].self) { group in
            for _ in 0..<max(1, min(options.concurrency, entries.count)) {
                group.addTask {
                    var mine: [EntryVerification] = []
                    while case let n = dispenser.increment() - 1, n < order.count {
                        let record = Recorded(entry: entries[order[n]])
                        // Scheme and authority: http://a and https://a are different servers. Mounting checked the
                        // shape of every key; one without an origin all the same is not probed.
                        guard let origin = HTTPOrigin(key: record.url) else {
                            mine.append(
                                EntryVerification(
                                    url: record.url, verdict: .unreachable, recordedStatus: record.status, liveStatus: nil, method: "not probed",
                                    changes: [], error: "not an http or https URL with a host and port", attempts: 0))
                            progress?(done.increment(), entries.count)
                            continue
                        }
                        let host = origin.description
                        let down = record.kind == .recorded ? downHosts.reason(origin) : nil
                        if let limiter, down == nil { await limiter.acquire(host) }
                        if let down {
                            // A host no connection could be made to, after every retry, is not asked again for each of its entries.
                            mine.append(
                                EntryVerification(
                                    url: record.url, verdict: .unreachable, recordedStatus: record.status, liveStatus: nil, method: "not probed",
                                    changes: [], error: "not tried: \(down)", attempts: 0))
                        } else {
                            let (probed, cannotConnect) = await probe.verify(record)
                            if cannotConnect, let error = probed.error { downHosts.mark(origin, because: "\(host) could not be reached (\(error))") }
                            mine.append(probed)
                        }
                        if let limiter, down == nil { await limiter.release(host) }
                        progress?(done.increment(), entries.count)
                    }
                    return mine
                }
            }
            var collected: [EntryVerification] = []
            collected.reserveCapacity(entries.count)
            for await part in group { collected += part }
            return collected
        }
        try? await client.shutdown()
        return VerifyReport(bundle: path, checkedAt: started, seconds: Date().timeIntervalSince(started), entries: results, failOn: options.failOn)
    }
}

extension Verifier {
    /// Entry positions taking each host in turn, so that workers waiting on one host's limit do not hold back the others.
    static func interleavedByHost(_ entries: [BundleEntry]) -> [Int] {
        var buckets: [String: [Int]] = [:]
        var hosts: [String] = []
        for (i, entry) in entries.enumerated() {
            let host = keyOrigin(entry.key).map { String($0.origin) } ?? entry.key
            if buckets[host] == nil { hosts.append(host) }
            buckets[host, default: []].append(i)
        }
        var order: [Int] = []
        order.reserveCapacity(entries.count)
        var round = 0
        while order.count < entries.count {
            for host in hosts where round < buckets[host]!.count { order.append(buckets[host]![round]) }
            round += 1
        }
        return order
    }
}

/// What the bundle recorded for one entry, copied out so probes need not touch the bundle.
struct Recorded: Sendable {
    var url: String
    var kind: EntryKind
    var status: Int
    var etag: String?
    var lastModified: String?
    var contentType: String?
    var location: String?
    var size: UInt64?
    var sha256: String?

    init(entry: BundleEntry) {
        url = entry.key
        kind = entry.kind
        status = entry.status
        // One decode of the headers, not one per field.
        let headers = entry.headers
        func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
        etag = header("etag")
        lastModified = header("last-modified")
        contentType = header("content-type")
        location = header("location")
        size = entry.body?.size
        sha256 = entry.body?.sha256
    }
}

/// One entry's requests and the comparison of their answers.
struct Probe: Sendable {
    let options: Verifier.Options
    let client: HTTPClient
    let pacer: Pacer?
    let retryLoop: RetryLoop

    /// The live answer's parts that matter.
    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var sha256: String?
        var attempts: Int
        func header(_ name: String) -> String? { headers.first(name: name) }
    }

    struct Unreachable: Error {
        var message: String
        var attempts: Int
        /// Whether no connection could be made at all (refused, connect timeout, no such host).
        var cannotConnect = false
    }

    /// The entry's verdict, and whether its host could not be connected to at all.
    func verify(_ recorded: Recorded) async -> (EntryVerification, cannotConnect: Bool) {
        var result = EntryVerification(
            url: recorded.url, verdict: .fresh, recordedStatus: recorded.status, liveStatus: nil, method: "", changes: [], error: nil, attempts: 0)
        switch recorded.kind {
        case .substituted:
            result.verdict = .substituted
            result.method = "not probed"
            return (result, false)
        case .blocked:
            result.verdict = .blocked
            result.method = "not probed"
            return (result, false)
        case .recorded:
            break
        }
        do {
            if (300...399).contains(recorded.status) {
                result.method = "GET"
                let answer = try await send(recorded.url, method: .GET, headers: [], body: .skip)
                judgeRedirect(recorded, answer, into: &result)
            } else if (400...499).contains(recorded.status) {
                // A recorded client error: fresh while the server still answers the same status.
                result.method = "GET"
                let answer = try await send(recorded.url, method: .GET, headers: [], body: .skip)
                result.liveStatus = answer.status
                result.attempts = answer.attempts
                if answer.status != recorded.status {
                    result.verdict = .stale
                    result.changes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
                }
            } else if recorded.etag != nil || recorded.lastModified != nil {
                result.method = "conditional GET"
                var conditions: [(String, String)] = []
                if let etag = recorded.etag { conditions.append(("If-None-Match", etag)) }
                if let lastModified = recorded.lastModified { conditions.append(("If-Modified-Since", lastModified)) }
                let answer = try await send(recorded.url, method: .GET, headers: conditions, body: .skip)
                judge(recorded, answer, into: &result, validated: true)
            } else {
                result.method = "HEAD"
                var answer = try await send(recorded.url, method: .HEAD, headers: [], body: .skip)
                if answer.status == 405 || answer.status == 501 {
                    result.method = "GET"
                    answer = try await send(recorded.url, method: .GET, headers: [], body: .skip)
                }
                if options.deep, (200...299).contains(answer.status) {
                    result.method = "deep GET"
                    // A body longer than the recorded one has changed: reading one byte past its size is enough.
                    answer = try await send(recorded.url, method: .GET, headers: [], body: .hash(limit: (recorded.size ?? 0) + 1))
                }
                judge(recorded, answer, into: &result, validated: false)
            }
        } catch let error as Unreachable {
            result.verdict = .unreachable
            result.error = error.message
            result.attempts = error.attempts
            return (result, error.cannotConnect)
        } catch {
            result.verdict = .unreachable
            result.error = "\(error)"
        }
        return (result, false)
    }

    /// Judges a content entry from the live answer.
    func judge(_ recorded: Recorded, _ answer: Answer, into result: inout EntryVerification, validated: Bool) {
        result.liveStatus = answer.status
        result.attempts = answer.attempts
        if answer.status == 304 && validated { return }
        if (answer.status == 404 || answer.status == 410) && recorded.status != answer.status {
            result.verdict = .gone
            result.changes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
            return
        }
        if (300...399).contains(answer.status) {
            result.verdict = .moved
            result.changes = [Change("location", recorded: nil, live: answer.header("location").map { Self.absolute($0, base: recorded.url) })]
            return
        }
        var changes: [Change] = []
        if answer.status != recorded.status { changes.append(Change("status", recorded: String(recorded.status), live: String(answer.status))) }
        let liveETag = answer.header("etag")
        if let etag = recorded.etag, let liveETag, !Self.sameETag(etag, liveETag) { changes.append(Change("etag", recorded: etag, live: liveETag)) }
        let liveModified = answer.header("last-modified")
        if let modified = recorded.lastModified, let liveModified, !Self.sameDate(modified, liveModified) {
            changes.append(Change("last-modified", recorded: modified, live: liveModified))
        }
        // Content-Length compares only identity bodies (verify asks for identity).
        if let size = recorded.size, let length = answer.header("content-length").flatMap(UInt64.init), answer.header("content-encoding") == nil,
            length != size
        {
            changes.append(Change("content-length", recorded: String(size), live: String(length)))
        }
        if let type = recorded.contentType, let liveType = answer.header("content-type"), Self.normalizedType(type) != Self.normalizedType(liveType) {
            changes.append(Change("content-type", recorded: type, live: liveType))
        }
        if let digest = answer.sha256, let recordedDigest = recorded.sha256 ?? (recorded.size == nil ? Self.emptyDigest : nil), digest != recordedDigest {
            changes.append(Change("sha256", recorded: recordedDigest, live: digest))
        }
        if !changes.isEmpty {
            result.verdict = .stale
            result.changes = changes
        } else if !validated && answer.sha256 == nil && liveETag == nil && liveModified == nil {
            // Nothing to compare but sizes and types, which matched: the content itself cannot be vouched for.
            result.verdict = .unverifiable
        } else if !validated && answer.sha256 == nil && recorded.etag == nil && recorded.lastModified == nil {
            result.verdict = .unverifiable
        }
    }

    /// Judges a recorded redirect: the same target is fresh; another is moved.
    func judgeRedirect(_ recorded: Recorded, _ answer: Answer, into result: inout EntryVerification) {
        result.liveStatus = answer.status
        result.attempts = answer.attempts
        let was = recorded.location.map { Self.absolute($0, base: recorded.url) }
        if (300...399).contains(answer.status) {
            let now = answer.header("location").map { Self.absolute($0, base: recorded.url) }
            if now != was {
                result.verdict = .moved
                result.changes = [Change("location", recorded: was, live: now)]
            } else if answer.status != recorded.status {
                result.verdict = .stale
                result.changes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
            }
            return
        }
        result.verdict = answer.status == 404 || answer.status == 410 ? .gone : .stale
        result.changes = [Change("status", recorded: String(recorded.status), live: String(answer.status))]
    }

    enum BodyHandling: Equatable {
        case skip
        /// SHA-256 of the body, reading at most `limit` bytes (an endless body is not hashed forever).
        case hash(limit: UInt64)
    }

    /// Sends one request with retries on connection errors, timeouts, 429 and 5xx (``RetryLoop``).
    func send(_ url: String, method: HTTPMethod, headers extra: [(String, String)], body: BodyHandling) async throws -> Answer {
        let outcome = await retryLoop.run(origin: HTTPOrigin(url: url)) { _ -> RetryLoop.Attempt<Answer> in
            if let pacer { await pacer.wait() }
            do {
                let answer = try await sendOnce(url, method: method, headers: extra, body: body)
                return .answered(answer, status: answer.status, retryAfter: answer.header("retry-after"))
            } catch {
                return .failed(
                    message: HTTPTransport.describe(error), retryable: HTTPTransport.isRetryable(error), cannotConnect: HTTPTransport.isConnectFailure(error))
            }
        }
        switch outcome {
        case .answered(var answer, let attempts):
            answer.attempts = attempts
            // Still 429 or 5xx after every retry: the server cannot say whether the entry changed.
            if RetryLoop.retryable(status: answer.status) {
                throw Unreachable(message: "HTTP \(answer.status) after \(attempts) attempts", attempts: attempts)
            }
            return answer
        case .failed(let failure):
            throw Unreachable(message: failure.message, attempts: failure.attempts, cannotConnect: failure.cannotConnect)
        }
    }

    /// One attempt: the request, and the body read as `body` asks.
    private func sendOnce(_ url: String, method: HTTPMethod, headers extra: [(String, String)], body: BodyHandling) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "User-Agent", value: options.userAgent)
        // Identity, so Content-Length and digests compare with the stored (decoded) body.
        request.headers.add(name: "Accept-Encoding", value: "identity")
        // Only the headers declared for this origin.
        for header in options.headerRules.headers(forURL: url) { request.headers.replaceOrAdd(name: header.name, value: header.value) }
        for (name, value) in extra { request.headers.replaceOrAdd(name: name, value: value) }
        let response = try await client.execute(request, timeout: .milliseconds(Int64(options.timeouts.request * 1000)))
        var digest: String?
        if case .hash(let limit) = body {
            var hasher = SHA256()
            var received: UInt64 = 0
            let deadline = NIODeadline.now() + .milliseconds(Int64(options.timeouts.request * 1000))
            for try await chunk in response.body {
                received += UInt64(chunk.readableBytes)
                if received > limit {
                    digest = "more than \(limit - 1) bytes"
                    break
                }
                guard NIODeadline.now() <= deadline else { throw HTTPClientError.deadlineExceeded }
                chunk.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
            }
            if digest == nil { digest = hexString(Array(hasher.finalize())) }
        } else {
            // The body is not needed: stop reading it (the connection is closed if it was not empty).
            for try await _ in response.body { break }
        }
        return Answer(status: Int(response.status.code), headers: response.headers, sha256: digest, attempts: 1)
    }

    static let emptyDigest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// Weak comparison (RFC 9110 §8.8.3.2): equal opaque tags, W/ or not.
    static func sameETag(_ a: String, _ b: String) -> Bool {
        func opaque(_ s: String) -> String {
            let t = s.trimmingCharacters(in: .whitespaces)
            return t.hasPrefix("W/") ? String(t.dropFirst(2)) : t
        }
        return opaque(a) == opaque(b)
    }

    static func sameDate(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        guard let x = HTTPDates.parse(a), let y = HTTPDates.parse(b) else { return false }
        return x == y
    }

    static func normalizedType(_ type: String) -> String { type.lowercased().replacingOccurrences(of: " ", with: "") }

    static func absolute(_ location: String, base: String) -> String {
        URL(string: location, relativeTo: URL(string: base))?.absoluteURL.absoluteString ?? location
    }
}

/// Total and per-host limits on requests in flight.
actor HostLimiter {
    let total: Int
    let perHost: Int
    private var inFlight = 0
    private var byHost: [String: Int] = [:]
    private var waiters: [(host: String, continuation: CheckedContinuation<Void, Never>)] = []

    init(total: Int, perHost: Int) {
        self.total = total
        self.perHost = perHost
    }

    /// Waits for a turn to send to `host`.
    func acquire(_ host: String) async {
        if inFlight < total && byHost[host, default: 0] < perHost {
            take(host)
            return
        }
        await withCheckedContinuation { waiters.append((host, $0)) }
    }

    func release(_ host: String) {
        inFlight -= 1
        byHost[host, default: 1] -= 1
        var index = 0
        while index < waiters.count && inFlight < total {
            let waiter = waiters[index]
            if byHost[waiter.host, default: 0] < perHost {
                waiters.remove(at: index)
                take(waiter.host)
                waiter.continuation.resume()
            } else {
                index += 1
            }
        }
    }

    private func take(_ host: String) {
        inFlight += 1
        byHost[host, default: 0] += 1
    }
}

/// Spaces requests evenly to stay under a rate.
actor Pacer {
    let interval: Double
    private var next = Date.distantPast

    init(perSecond: Double) { interval = 1 / max(perSecond, 0.001) }

    func wait() async {
        let now = Date()
        let slot = max(now, next)
        next = slot.addingTimeInterval(interval)
        let delay = slot.timeIntervalSince(now)
        if delay > 0 { try? await Task.sleep(nanoseconds: UInt64(delay * 1e9)) }
    }
}

/// A thread-safe count.
/// Hosts no connection could be made to, after every retry, and why.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func increment() -> Int {
        lock.withLock {
            value += 1
            return value
        }
    }
}
