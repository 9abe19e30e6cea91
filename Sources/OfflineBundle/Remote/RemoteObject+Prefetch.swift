import Dispatch
import Foundation
import Logging
import Synchronization
import Tracing

/// A remote object's prefetches, and its reads bound in time and traced: a body's range is fetched before it is read,
/// a read waits for the server at most the read's deadline (the fetch goes on, for the cache), and each is a span.
extension RemoteObject {
    /// Fetches what `range` lacks (at most ``maxRequestBytes`` of it, widened to whole bodies) in one request, so that
    /// the reads that follow are local; a no-op when it is held. Fails as a read would.
    ///
    /// `whole` asks for the range in one request however long (a mount's index).
    package func prefetch(_ range: Range<UInt64>, whole: Bool = false) throws {
        let clamped = range.lowerBound..<min(range.upperBound, whole ? size : range.lowerBound + Self.maxRequestBytes, size)
        guard !clamped.isEmpty else { return }
        if whole {
            try fill(clamped, maxSpan: UInt64(clamped.count), readAhead: false)
        } else {
            let body = state.withLock { $0.check }.flatMap { checkHeldOnce(range, check: $0) }
            // A reader's first read of a body: bound by the read's deadline, traced with whether the cache held it.
            _ = try traced(clamped, cacheHit: store.holds(clamped)) {
                try withinDeadline(clamped) { try self.fill(clamped, maxSpan: Self.maxRequestBytes, readAhead: false) }
            }
            // Held now, by a fetch of this process (checked as it came): not checked again.
            if let body, store.holds(body) { state.withLock { _ = $0.checkedHeld.insert(body.lowerBound) } }
        }
    }

    /// The first read in this process of a body the cache folder held already (from an earlier process) checks it
    /// there (its local header and SHA-256 against the index) before it is read: a body damaged on disk is forgotten
    /// and fetched again within the same read, never failed once or sent. Returns the body's extent when `range` is
    /// one body's.
    private func checkHeldOnce(_ range: Range<UInt64>, check: RemoteBodyCheck) -> Range<UInt64>? {
        let touched = check.bodies(touching: range)
        guard touched.count == 1, let i = touched.first else { return nil }
        let record = check.record(i)
        let extent = RemoteBodyCheck.extent(record)
        guard extent == range else { return nil }
        guard store.holds(extent), state.withLock({ !$0.checkedHeld.contains(extent.lowerBound) }) else { return extent }
        do {
            let body = try StreamedBodyCheck(record: record, check: check)
            try store.pieces(extent) { piece, _ in try body.feed(piece) }
            try body.finish()
            state.withLock { _ = $0.checkedHeld.insert(extent.lowerBound) }
        } catch {
            store.forget(extent)
            Self.cacheDamaged.increment()
            logger.warning(
                "a body in the cache failed its check; it is fetched again",
                metadata: ["url": "\(shownURL)", "body": "\(check.name(record))", "reason": "\(error)"])
        }
        return extent
    }

    /// `work`, which reads `range` (fetching what the cache lacks), as one span (``RemoteOptions/readSpanName``).
    func traced<T>(_ range: Range<UInt64>, cacheHit: Bool, _ work: () throws -> T) throws -> T {
        try (options.tracer ?? InstrumentationSystem.tracer).withSpan(RemoteOptions.readSpanName) { span in
            if span.isRecording {
                span.attributes["offline_bundle.url"] = shownURL
                span.attributes["offline_bundle.range"] = "bytes=\(range.lowerBound)-\(range.upperBound - 1)"
                span.attributes["offline_bundle.bytes"] = range.count
                span.attributes["offline_bundle.cache_hit"] = cacheHit
            }
            return try work()
        }
    }

    /// `fill` (which fetches `range`) on a thread of its own, waited for at most ``RemoteOptions/readDeadline``:
    /// past it the read fails, and the fetch goes on for the cache (the next read of it finds it there).
    func withinDeadline(_ range: Range<UInt64>, _ fill: @escaping @Sendable () throws -> [UInt8]?) throws -> [UInt8]? {
        let deadline = options.readDeadline.seconds
        guard deadline.isFinite, deadline > 0 else { return try fill() }
        let outcome = Mutex<Result<[UInt8]?, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        // The fetch runs in the read's trace, on the thread it goes to.
        let context = ServiceContext.current ?? .topLevel
        DispatchQueue.global().async {
            let result = ServiceContext.$current.withValue(context) { Result { try fill() } }
            outcome.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + deadline) == .success, let result = outcome.withLock({ $0 }) else {
            Self.deadlinesMissed.increment()
            throw BundleError(
                .remote,
                "\(shownURL) did not send \(range.count) bytes at \(range.lowerBound) within the read's deadline of \(Self.seconds(deadline)); the fetch goes on for the cache"
            )
        }
        return try result.get()
    }

    /// `deadline` as said in messages: "10 s", "0.5 s".
    static func seconds(_ deadline: Double) -> String {
        deadline == deadline.rounded() ? "\(Int(deadline)) s" : "\(deadline) s"
    }
}

extension Duration {
    /// The duration in seconds, as a `Double` (for a `DispatchTime`, a message, a NIO `TimeAmount`).
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
