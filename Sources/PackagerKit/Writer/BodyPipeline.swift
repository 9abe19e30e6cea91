import Dispatch
import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Hashes and compresses a crawl's bodies while it goes on, on every core, instead of after it.
///
/// The crawl hands each recorded body over once it has read it for links. A body received into memory gives its
/// bytes back to the run's budget as soon as it is compressed, so the crawl holds compressed bodies rather than
/// received ones, and a spool file the crawl wrote is deleted once its deflate stream is kept. A body that fails
/// here is left as it was, for the writer to prepare again and report.
final class BodyPipeline: Sendable {
    /// One body to prepare: the entry at `index` among the crawl's entries.
    struct Job: Sendable {
        var index: Int
        var entry: RecordedExchange
        /// The body is a spool file of this run (deleted once compressed), not a file the declaration names.
        var ownsFile: Bool
        /// The body's bytes were taken from the run's memory budget when it was received.
        var budgeted: Bool
    }

    private struct State {
        /// Jobs in order; a taken one is set to nil at once, so a body given back to the budget is not still held here.
        var pending: [Job?] = []
        var head = 0
        var running = 0
        var waiters: [@Sendable () -> Void] = []
    }

    private let state = NIOLockedValueBox(State())
    private let level: Int
    private let workers: Int
    private let memory: MemoryBudget
    private let kept: MemoryBudget
    private let overflow: OverflowFile
    private let deliver: @Sendable (Int, PreparedBody) -> Void

    /// - Parameters:
    ///   - memory: the budget received bodies were taken from; they give their bytes back once compressed.
    ///   - kept: the budget for compressed streams and small stored bodies kept in memory until the bundle is written;
    ///     beyond it they go to `overflow`. Separate from `memory`, so that the crawl's working memory does not fill up
    ///     with a large site's finished bodies.
    ///   - deliver: called with each prepared body, from a worker thread.
    init(
        level: Int, workers: Int = ProcessInfo.processInfo.activeProcessorCount, memory: MemoryBudget, kept: MemoryBudget, overflow: OverflowFile,
        deliver: @escaping @Sendable (Int, PreparedBody) -> Void
    ) {
        self.level = level
        self.workers = max(1, workers)
        self.memory = memory
        self.kept = kept
        self.overflow = overflow
        self.deliver = deliver
    }

    /// Queues a body; a worker starts when fewer than `workers` are running.
    func submit(_ job: Job) {
        let start = state.withLockedValue { state -> Bool in
            state.pending.append(job)
            guard state.running < workers else { return false }
            state.running += 1
            return true
        }
        if start { DispatchQueue.global().async { self.drain() } }
    }

    /// How many jobs the queue still holds (taken ones are not held).
    var held: Int { state.withLockedValue { state in state.pending.reduce(0) { $0 + ($1 == nil ? 0 : 1) } } }

    /// Returns once every submitted body is prepared (or failed).
    func finish() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            whenDone { continuation.resume() }
        }
    }

    /// Blocks the calling thread until every submitted body is prepared (or failed): for a caller outside Swift's
    /// concurrency pool or one that owns its thread (the workers run on Dispatch's, never on the caller's).
    func finishBlocking() {
        let done = DispatchSemaphore(value: 0)
        whenDone { done.signal() }
        done.wait()
    }

    /// Calls `action` once the queue is empty and no worker runs (at once, when that is so already).
    private func whenDone(_ action: @escaping @Sendable () -> Void) {
        let done = state.withLockedValue { state -> Bool in
            guard state.running > 0 || state.head < state.pending.count else { return true }
            state.waiters.append(action)
            return false
        }
        if done { action() }
    }

    private func drain() {
        // A compressor holds its tables: one per worker, for as long as there is work.
        let deflaters = try? Deflaters(level: level)
        while let job = take() {
            guard let deflaters, let source = job.entry.body,
                let prepared = try? BodyPreparer.prepare(
                    source, entry: job.entry, deflaters: deflaters, spool: overflow, memory: kept, copiesStoredFiles: false)
            else { continue }
            if job.budgeted, case .data(let data) = source, !prepared.readsSource { memory.give(data.count) }
            if job.ownsFile, case .file(let path) = source, prepared.compression == .deflate { unlink(path) }
            deliver(job.index, prepared)
        }
    }

    /// The next job, or nil after the worker counted itself out (waking `finish` when it was the last).
    private func take() -> Job? {
        let (job, waiters) = state.withLockedValue { state -> (Job?, [@Sendable () -> Void]) in
            if state.head < state.pending.count {
                let job = state.pending[state.head]
                state.pending[state.head] = nil
                state.head += 1
                if state.head > 1024 && state.head * 2 > state.pending.count {
                    state.pending.removeFirst(state.head)
                    state.head = 0
                }
                return (job, [])
            }
            state.running -= 1
            guard state.running == 0 else { return (nil, []) }
            let waiters = state.waiters
            state.waiters = []
            return (nil, waiters)
        }
        for waiter in waiters { waiter() }
        return job
    }
}
