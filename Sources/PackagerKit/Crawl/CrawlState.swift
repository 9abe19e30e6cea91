import Foundation

/// Counts of a crawl in progress, for the live progress line and the summary.
public struct CrawlProgress: Sendable, Equatable {
    /// Responses received and recorded (any status).
    public var done = 0
    /// URLs waiting for a worker.
    public var queued = 0
    /// URLs that failed after their retries, or answered 4xx/5xx.
    public var failed = 0
    /// Body bytes received.
    public var bytes: Int64 = 0
    /// Entries answered by a block rule.
    public var blocked = 0
    /// Entries answered by a local file.
    public var substituted = 0
    /// URLs left out (scope, robots.txt, limits).
    public var skipped = 0
    /// Seconds since the crawl started.
    public var elapsed: Double = 0
}

/// The crawl's shared, lock-protected record: entries, failures, counts and limits.
final class CrawlState: @unchecked Sendable {
    enum EntryKind { case fetched, blocked, substituted }

    private let lock = NSLock()
    private var entries: [BundleWriter.Entry] = []
    private var failures: [BuildReport.Failure] = []
    private var skipped: [String: Int] = [:]
    private var limits: [String] = []
    private var counts = CrawlProgress()
    private var reservedResources = 0
    private var committedBytes: Int64 = 0
    private var reservedBytes: Int64 = 0
    private var spoolCounter = 0
    private let started = Date()
    let maxResources: Int
    let maxBytes: Int64

    init(maxResources: Int, maxBytes: Int64) {
        self.maxResources = maxResources
        self.maxBytes = maxBytes
    }

    func add(_ entry: BundleWriter.Entry, kind: EntryKind) {
        lock.withLock {
            entries.append(entry)
            switch kind {
            case .fetched: counts.done += 1
            case .blocked: counts.blocked += 1
            case .substituted: counts.substituted += 1
            }
        }
    }

    func fail(_ failure: BuildReport.Failure) {
        lock.withLock {
            failures.append(failure)
            counts.failed += 1
        }
    }

    func skip(_ reason: String) {
        lock.withLock {
            skipped[reason, default: 0] += 1
            counts.skipped += 1
        }
    }

    func limit(_ message: String) {
        lock.withLock { if !limits.contains(message) { limits.append(message) } }
    }

    /// Takes one of the resources scope.max-resources allows; false when none is left.
    func reserveResource() -> Bool {
        lock.withLock {
            guard reservedResources < maxResources else { return false }
            reservedResources += 1
            return true
        }
    }

    func unreserveResource() { lock.withLock { reservedResources -= 1 } }

    /// Reserves `delta` more bytes for a body being received; false when that would pass scope.max-bytes,
    /// counting the bodies still in flight, so concurrent downloads cannot overshoot the limit together.
    func reserveBytes(_ delta: Int64) -> Bool {
        let fits = lock.withLock {
            guard committedBytes + reservedBytes + delta <= maxBytes else { return false }
            reservedBytes += delta
            return true
        }
        if !fits { limit("scope.max-bytes (\(maxBytes) bytes) reached: larger bodies were not stored") }
        return fits
    }

    func releaseBytes(_ n: Int64) { lock.withLock { reservedBytes -= n } }

    func commitBytes(_ n: Int64) {
        lock.withLock {
            committedBytes += n
            counts.bytes += n
        }
    }

    func nextSpoolNumber() -> Int {
        lock.withLock {
            spoolCounter += 1
            return spoolCounter
        }
    }

    func snapshot(queued: Int) -> CrawlProgress {
        lock.withLock {
            var copy = counts
            copy.queued = queued
            copy.elapsed = Date().timeIntervalSince(started)
            return copy
        }
    }

    func result() -> Crawler.Result {
        lock.withLock {
            var stats = counts
            stats.elapsed = Date().timeIntervalSince(started)
            let sortedFailures = failures.sorted { ($0.declared ? 0 : 1, $0.url) < ($1.declared ? 0 : 1, $1.url) }
            return .init(entries: entries, failures: sortedFailures, skipped: skipped, limitsReached: limits, stats: stats)
        }
    }
}

/// The bytes one body in flight holds against scope.max-bytes.
final class ByteReservation: @unchecked Sendable {
    private let state: CrawlState
    private let lock = NSLock()
    private var held: Int64 = 0

    init(state: CrawlState) { self.state = state }

    /// Grows the reservation to `total` bytes received; false when the limit does not allow it.
    func grow(to total: Int64) -> Bool {
        lock.withLock {
            guard total > held else { return true }
            guard state.reserveBytes(total - held) else { return false }
            held = total
            return true
        }
    }

    /// Gives the reservation back (the body was either committed or discarded).
    func release() {
        lock.withLock {
            state.releaseBytes(held)
            held = 0
        }
    }
}
