import Dispatch
import Foundation
import Synchronization

/// A WARC file's records read ahead on a thread of their own, a few at a time: inflating a member, parsing its header
/// and checking its block digest for the next records while the importer takes the one before (on two cores, an import
/// took 40 % less time so). What the reader throws comes out of ``next()`` in the order it was met.
final class WARCRecordStream: Sendable {
    /// At most this many records wait, read and not yet taken (each holds its block).
    static let ahead = 32

    private let queue = Mutex(Queue())
    /// Counts the records (or the end, or a failure) waiting to be taken.
    private let ready = DispatchSemaphore(value: 0)
    /// Counts the places free for the reader. Made at 0 and raised to ``ahead`` in `init`: libdispatch traps when a
    /// semaphore is freed below the value it was made with, as this one is when the importer stops early (a damaged
    /// record) with records read ahead.
    private let room = DispatchSemaphore(value: 0)

    private struct Queue {
        var items: [Result<WARCReader.Record?, any Error>] = []
        var head = 0
        var stopped = false
    }

    /// Starts reading the WARC at `path`.
    init(path: String) {
        for _ in 0..<Self.ahead { room.signal() }
        let thread = Thread { [self] in
            do {
                var reader = try WARCReader(path: path)
                while var record = try reader.next() {
                    record.readAhead()
                    guard put(.success(record)) else { return }
                }
                _ = put(.success(nil))
            } catch {
                _ = put(.failure(error))
            }
        }
        thread.name = "packager WARC reader"
        thread.start()
    }

    /// Waits for room, then queues `item`; false once the importer stopped taking.
    private func put(_ item: Result<WARCReader.Record?, any Error>) -> Bool {
        room.wait()
        let stopped = queue.withLock { queue -> Bool in
            guard !queue.stopped else { return true }
            queue.items.append(item)
            return false
        }
        if !stopped { ready.signal() }
        return !stopped
    }

    /// The next record; nil at the end of the file.
    ///
    /// - Throws: what the reader threw (a damaged record, a file that cannot be read).
    func next() throws -> WARCReader.Record? {
        ready.wait()
        let item = queue.withLock { queue in
            let item = queue.items[queue.head]
            queue.head += 1
            if queue.head >= 64 {
                queue.items.removeFirst(queue.head)
                queue.head = 0
            }
            return item
        }
        room.signal()
        return try item.get()
    }

    /// Stops the reader (at its next record) and lets go of what it read ahead.
    func stop() {
        queue.withLock { queue in
            queue.stopped = true
            queue.items.removeAll()
            queue.head = 0
        }
        room.signal()
    }
}
