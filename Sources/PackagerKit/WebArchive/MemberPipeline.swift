import Foundation

/// Gzip members compressed and written on a thread of their own, in the order they are given, while the caller reads,
/// checks and digests the next records: on two cores a WARC export took about half the time so (compression is about
/// as much work as the rest).
///
/// A record held whole is queued (``submit(_:indexed:)``); at most ``ahead`` wait, within ``aheadBytes``. A record
/// too large to hold is streamed by the caller (``exclusive(indexed:_:)``), once the queue is written. An index record
/// given with a member gets that member's offset and length; ``takeWritten()`` hands over those written so far, in
/// order (and ``finish()`` the rest), so the caller holds them no longer than the queue does.
final class MemberPipeline: @unchecked Sendable {
    // Unchecked: `members` is used by the worker while members are queued, and by the caller only in `exclusive`, which
    // first waits until the queue is written and the worker waits; everything else is behind `condition`.
    private let members: GzipMembers
    private let condition = NSCondition()
    private var queue: [(bytes: [UInt8], indexed: WARCExporter.IndexedRecord?)] = []
    private var head = 0
    private var writing = false
    private var closed = false
    private var failure: (any Error)?
    private var written: [WARCExporter.IndexedRecord] = []
    /// Signalled when the thread ends; it holds the pipeline until then, so ``stop()`` (or ``finish()``) must be called.
    private let ended = DispatchSemaphore(value: 0)
    private var stopped = false

    /// At most this many members wait to be compressed, and at most ``aheadBytes`` (unless one alone is larger).
    static let ahead = 16
    static let aheadBytes = 8 << 20
    private var queuedBytes = 0

    init(members: GzipMembers) {
        self.members = members
        let thread = Thread { [self] in
            run()
            ended.signal()
        }
        thread.name = "packager WARC writer"
        thread.start()
    }

    /// Queues `bytes` as one member, and `indexed` to be told its offset and length; waits while ``ahead`` are queued.
    ///
    /// - Throws: what writing an earlier member threw.
    func submit(_ bytes: [UInt8], indexed: WARCExporter.IndexedRecord? = nil) throws {
        condition.lock()
        defer { condition.unlock() }
        while queue.count - head >= Self.ahead || (queuedBytes > 0 && queuedBytes + bytes.count > Self.aheadBytes), failure == nil {
            condition.wait()
        }
        if let failure { throw failure }
        queue.append((bytes, indexed))
        queuedBytes += bytes.count
        condition.broadcast()
    }

    /// Runs `write` with the members once every queued one is written (it writes a member of its own, streamed), and
    /// tells `indexed`, when given, the offset and length of what it wrote.
    func exclusive(indexed: WARCExporter.IndexedRecord?, _ write: (GzipMembers) throws -> Void) throws {
        condition.lock()
        while (head < queue.count || writing) && failure == nil { condition.wait() }
        let failed = failure
        condition.unlock()
        if let failed { throw failed }
        let start = members.offset
        try write(members)
        guard var indexed else { return }
        indexed.offset = start
        indexed.length = members.offset - start
        condition.lock()
        written.append(indexed)
        condition.unlock()
    }

    /// The index records of the members written since the last call, in order.
    func takeWritten() -> [WARCExporter.IndexedRecord] {
        condition.lock()
        defer { condition.unlock() }
        let records = written
        written.removeAll(keepingCapacity: true)
        return records
    }

    /// Writes what is queued, stops the thread, and returns the index records not yet taken, in the order of their
    /// members.
    ///
    /// - Throws: what writing a member threw.
    func finish() throws -> (records: [WARCExporter.IndexedRecord], members: GzipMembers) {
        stop()
        if let failure { throw failure }
        return (written, members)
    }

    /// Stops taking members and waits for the thread to end (what is queued is written first, unless a write failed).
    func stop() {
        condition.lock()
        let first = !stopped
        stopped = true
        closed = true
        condition.broadcast()
        condition.unlock()
        if first { ended.wait() }
    }

    private func run() {
        while true {
            condition.lock()
            while head == queue.count && !closed { condition.wait() }
            guard head < queue.count else {
                condition.unlock()
                return
            }
            let (bytes, indexed) = queue[head]
            queue[head].bytes = []
            queuedBytes -= bytes.count
            head += 1
            if head >= 64 {
                queue.removeFirst(head)
                head = 0
            }
            writing = failure == nil
            let skip = failure != nil
            condition.broadcast()
            condition.unlock()
            guard !skip else { continue }
            var outcome: Result<WARCExporter.IndexedRecord?, any Error>
            do {
                let start = members.offset
                let length = try members.write(member: bytes)
                var record = indexed
                record?.offset = start
                record?.length = length
                outcome = .success(record)
            } catch {
                outcome = .failure(error)
            }
            condition.lock()
            switch outcome {
            case .success(let record): if let record { written.append(record) }
            case .failure(let error): failure = error
            }
            writing = false
            condition.broadcast()
            condition.unlock()
        }
    }
}
