import Foundation
import NIOConcurrencyHelpers

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
    /// Responses by the protocol they came over (`HTTP/2`, `HTTP/1.1`).
    public var protocols: [String: Int] = [:]
    /// Of ``done``: responses an interrupted build stored, taken from its journal instead of the network.
    public var resumed = 0
    /// Of ``bytes``: their body bytes.
    public var bytesResumed: Int64 = 0
}

/// The crawl's shared record: entries, failures, counts and limits, behind one lock.
final class CrawlState: Sendable {
    enum EntryKind { case fetched, blocked, substituted }

    private struct State {
        var failures: [BuildReport.Failure] = []
        var skipped: [String: Int] = [:]
        var browserProblems: [BuildReport.PageProblem] = []
        var searchSweeps: [SearchSweep] = []
        var limits: [String] = []
        var counts = CrawlProgress()
        var reservedResources = 0
        var committedBytes: Int64 = 0
        var reservedBytes: Int64 = 0
        var spoolCounter = 0
    }

    private let state = NIOLockedValueBox(State())
    private let started = Date()
    let maxResources: Int
    let maxBytes: Int64
    /// The entries recorded, kept in a scratch file.
    let entries: EntryStore

    init(maxResources: Int, maxBytes: Int64, entriesPath: String) {
        self.maxResources = maxResources
        self.maxBytes = maxBytes
        entries = EntryStore(path: entriesPath)
    }

    /// Records an entry; returns its index among the entries.
    @discardableResult
    func add(_ entry: RecordedExchange, kind: EntryKind, httpVersion: String? = nil) -> Int {
        let index = entries.append(entry)
        state.withLockedValue { state in
            if let httpVersion { state.counts.protocols[httpVersion, default: 0] += 1 }
            switch kind {
            case .fetched: state.counts.done += 1
            case .blocked: state.counts.blocked += 1
            case .substituted: state.counts.substituted += 1
            }
        }
        return index
    }

    /// The body of the entry at `index` was hashed and compressed: the entry now holds that, and no longer the body
    /// as received.
    func setPrepared(_ index: Int, _ prepared: PreparedBody) {
        entries.setPrepared(index, prepared)
    }

    func fail(_ failure: BuildReport.Failure) {
        state.withLockedValue { state in
            state.failures.append(failure)
            state.counts.failed += 1
        }
    }

    func skip(_ reason: String) {
        state.withLockedValue { state in
            state.skipped[reason, default: 0] += 1
            state.counts.skipped += 1
        }
    }

    func browserProblem(page: String, reason: String) {
        state.withLockedValue { $0.browserProblems.append(.init(page: page, reason: reason)) }
    }

    func searchSwept(_ sweep: SearchSweep) { state.withLockedValue { $0.searchSweeps.append(sweep) } }

    func limit(_ message: String) {
        state.withLockedValue { state in if !state.limits.contains(message) { state.limits.append(message) } }
    }

    /// Takes one of the resources scope.max-resources allows; false when none is left.
    func reserveResource() -> Bool {
        let maxResources = self.maxResources
        return state.withLockedValue { state in
            guard state.reservedResources < maxResources else { return false }
            state.reservedResources += 1
            return true
        }
    }

    func unreserveResource() { state.withLockedValue { $0.reservedResources -= 1 } }

    /// Reserves `delta` more bytes for a body being received; false when that would pass scope.max-bytes,
    /// counting the bodies still in flight, so concurrent downloads cannot overshoot the limit together.
    func reserveBytes(_ delta: Int64) -> Bool {
        let maxBytes = self.maxBytes
        let fits = state.withLockedValue { state in
            guard state.committedBytes + state.reservedBytes + delta <= maxBytes else { return false }
            state.reservedBytes += delta
            return true
        }
        if !fits { limit("scope.max-bytes (\(maxBytes) bytes) reached: larger bodies were not stored") }
        return fits
    }

    func releaseBytes(_ n: Int64) { state.withLockedValue { $0.reservedBytes -= n } }

    /// A response taken from an interrupted build's journal (``BuildJournal``), not fetched.
    func noteResumed(bytes: Int64) {
        state.withLockedValue { state in
            state.counts.resumed += 1
            state.counts.bytesResumed += bytes
        }
    }

    func commitBytes(_ n: Int64) {
        state.withLockedValue { state in
            state.committedBytes += n
            state.counts.bytes += n
        }
    }

    func nextSpoolNumber() -> Int {
        state.withLockedValue { state in
            state.spoolCounter += 1
            return state.spoolCounter
        }
    }

    func snapshot(queued: Int) -> CrawlProgress {
        var copy = state.withLockedValue { $0.counts }
        copy.queued = queued
        copy.elapsed = Date().timeIntervalSince(started)
        return copy
    }

    func result() -> Crawler.Result {
        let state = self.state.withLockedValue { $0 }
        var stats = state.counts
        stats.elapsed = Date().timeIntervalSince(started)
        let sortedFailures = state.failures.sorted { ($0.declared ? 0 : 1, $0.url) < ($1.declared ? 0 : 1, $1.url) }
        return .init(
            store: entries, failures: sortedFailures, skipped: state.skipped, limitsReached: state.limits, stats: stats,
            browserProblems: state.browserProblems.sorted { $0.page < $1.page }, searchSweeps: state.searchSweeps.sorted { $0.page < $1.page })
    }
}

/// The bytes one body in flight holds against scope.max-bytes.
final class ByteReservation: Sendable {
    private let state: CrawlState
    private let held = NIOLockedValueBox<Int64>(0)

    init(state: CrawlState) { self.state = state }

    /// Grows the reservation to `total` bytes received; false when the limit does not allow it.
    func grow(to total: Int64) -> Bool {
        held.withLockedValue { held in
            guard total > held else { return true }
            guard state.reserveBytes(total - held) else { return false }
            held = total
            return true
        }
    }

    /// Gives the reservation back (the body was either committed or discarded).
    func release() {
        held.withLockedValue { held in
            state.releaseBytes(held)
            held = 0
        }
    }
}
