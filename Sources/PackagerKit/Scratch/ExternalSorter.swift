import OfflineBundle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Records of bytes put in order in bounded memory: they are gathered up to `memoryLimit` bytes, sorted, and written
/// as a run to a temporary file of the scratch folder (unlinked as soon as it is made); ``sorted()`` merges the runs.
/// Records that fit in one run are sorted in memory and never written. The writer sorts its entries' keys, and their
/// bodies by digest, this way: an array of them held about a hundred bytes an entry.
final class ExternalSorter {
    /// Whether the first record comes before the second.
    typealias Order = (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> Bool

    private let folder: String?
    private let memoryLimit: Int
    private let order: Order
    /// The records of the run being gathered, one after the other, and where each lies among them.
    private var bytes: [UInt8] = []
    private var spans: [Span] = []
    private var fd: Int32 = -1
    /// The runs written, each a stretch of the file of records as a 32-bit length and their bytes.
    private var runs: [Range<UInt64>] = []
    private var written: UInt64 = 0
    private var sealed = false
    /// How many records were added.
    private(set) var count = 0

    private struct Span {
        var start: Int
        var count: Int
    }

    /// A sorter whose runs go to `folder` past `memoryLimit` bytes (nil: one run in memory, whatever its size).
    init(folder: String?, memoryLimit: Int, by order: @escaping Order) {
        self.folder = folder
        self.memoryLimit = memoryLimit
        self.order = order
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Whether records went to a file.
    var spilled: Bool { fd >= 0 }

    /// How many runs were written (merged ones not counted off).
    private(set) var runCount = 0

    /// Adds a record.
    func append(_ record: UnsafeRawBufferPointer) throws {
        precondition(!sealed, "a record added after the sort")
        precondition(record.count <= Int(UInt32.max), "a record of 4 GiB")
        spans.append(Span(start: bytes.count, count: record.count))
        bytes.append(contentsOf: record)
        count += 1
        if folder != nil, bytes.count + spans.count * MemoryLayout<Span>.stride > memoryLimit { try writeRun() }
    }

    /// Adds a record.
    func append(_ record: [UInt8]) throws { try record.withUnsafeBytes { try append($0) } }

    /// How many runs one merge reads at once (a 32 KiB buffer each): past it, runs are merged into longer ones first.
    static let fanIn = 64

    /// The records in order (records equal in the order come in no given order). No record may be added after.
    func sorted() throws -> SortedRecords {
        if !sealed {
            sealed = true
            if runs.isEmpty {
                sortRun()
            } else if !spans.isEmpty {
                try writeRun()
            }
            // Runs merged a group at a time into one after the others, until one merge can read them all: the merge's
            // buffers stay within 64 of them, whatever the records' count.
            while runs.count > Self.fanIn {
                let group = try SortedRecords(runs: Array(runs.prefix(Self.fanIn)), fd: fd, order: order, owner: self)
                let start = written
                var out = [UInt8]()
                out.reserveCapacity(1 << 20)
                while try group.next({ (record: UnsafeRawBufferPointer) -> Void in
                    withUnsafeBytes(of: UInt32(record.count).littleEndian) { out.append(contentsOf: $0) }
                    out.append(contentsOf: record)
                }) != nil {
                    if out.count >= 1 << 20 { try write(&out) }
                }
                try write(&out)
                runs.removeFirst(Self.fanIn)
                runs.append(start..<written)
            }
        }
        return runs.isEmpty ? SortedRecords(memory: self) : try SortedRecords(runs: runs, fd: fd, order: order, owner: self)
    }

    /// Calls `body` with the `i`th record of the run in memory, in sorted order.
    fileprivate func withRecord<T>(_ i: Int, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        let span = spans[i]
        return try bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[span.start..<(span.start + span.count)])) }
    }

    fileprivate var recordsInMemory: Int { spans.count }

    /// Appends `out` to the file, and empties it.
    private func write(_ out: inout [UInt8]) throws {
        if let failure = out.withUnsafeBytes({ FileIO.write(fd, $0, at: written) }) {
            throw PackagerError(.io, "cannot write the records being sorted to a temporary file", cause: SystemCallError(failure))
        }
        written += UInt64(out.count)
        out.removeAll(keepingCapacity: true)
    }

    private func sortRun() {
        let order = self.order
        bytes.withUnsafeBytes { raw in
            spans.sort { a, b in
                order(
                    UnsafeRawBufferPointer(rebasing: raw[a.start..<(a.start + a.count)]), UnsafeRawBufferPointer(rebasing: raw[b.start..<(b.start + b.count)]))
            }
        }
    }

    /// Sorts the run gathered and writes it after the others, a megabyte at a time.
    private func writeRun() throws {
        sortRun()
        if fd < 0, let folder {
            let made = FileIO.unlinkedFile(in: folder, prefix: "sort")
            guard made >= 0 else { throw PackagerError(.io, "cannot make a temporary file in \(folder) to sort in", cause: SystemCallError(errno)) }
            fd = made
        }
        let start = written
        var out = [UInt8]()
        out.reserveCapacity(1 << 20)
        for span in spans {
            withUnsafeBytes(of: UInt32(span.count).littleEndian) { out.append(contentsOf: $0) }
            out.append(contentsOf: bytes[span.start..<(span.start + span.count)])
            if out.count >= 1 << 20 { try write(&out) }
        }
        try write(&out)
        runs.append(start..<written)
        runCount += 1
        bytes.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
    }
}

/// The records of an ``ExternalSorter`` in order, one at a time: from the run in memory, or merged from the runs in
/// its file (at most ``ExternalSorter/fanIn`` of them), each read 32 KiB at a time.
final class SortedRecords {
    private let memory: ExternalSorter?
    /// The sorter whose file the runs are in: kept while they are read (its deinit closes the file).
    private let owner: ExternalSorter?
    private var next = 0
    private var cursors: [RunCursor] = []
    /// The cursors not at their end, as a heap: the one whose record comes first on top.
    private var heap: [Int] = []
    private let order: ExternalSorter.Order?

    fileprivate init(memory sorter: ExternalSorter) {
        memory = sorter
        owner = sorter
        order = nil
    }

    fileprivate init(runs: [Range<UInt64>], fd: Int32, order: @escaping ExternalSorter.Order, owner: ExternalSorter) throws {
        memory = nil
        self.owner = owner
        self.order = order
        for run in runs {
            let cursor = RunCursor(fd: fd, run: run)
            if try cursor.advance() {
                cursors.append(cursor)
                heap.append(cursors.count - 1)
                siftUp(heap.count - 1)
            }
        }
    }

    /// Calls `body` with the next record; nil (and `body` not called) past the last one.
    func next<T>(_ body: (UnsafeRawBufferPointer) throws -> T) throws -> T? {
        if let memory {
            guard next < memory.recordsInMemory else { return nil }
            defer { next += 1 }
            return try memory.withRecord(next, body)
        }
        guard let top = heap.first else { return nil }
        let result = try cursors[top].withRecord(body)
        if try cursors[top].advance() {
            siftDown(0)
        } else {
            heap[0] = heap[heap.count - 1]
            heap.removeLast()
            if !heap.isEmpty { siftDown(0) }
        }
        return result
    }

    private func precedes(_ a: Int, _ b: Int) -> Bool {
        cursors[heap[a]].withRecord { x in cursors[heap[b]].withRecord { y in order!(x, y) } }
    }

    private func siftUp(_ i: Int) {
        var i = i
        while i > 0, precedes(i, (i - 1) / 2) {
            heap.swapAt(i, (i - 1) / 2)
            i = (i - 1) / 2
        }
    }

    private func siftDown(_ i: Int) {
        var i = i
        while true {
            let (left, right) = (2 * i + 1, 2 * i + 2)
            var first = i
            if left < heap.count, precedes(left, first) { first = left }
            if right < heap.count, precedes(right, first) { first = right }
            guard first != i else { return }
            heap.swapAt(i, first)
            i = first
        }
    }
}

/// One run of an ``ExternalSorter``'s file, read in order through a buffer.
private final class RunCursor {
    private let fd: Int32
    private let run: Range<UInt64>
    private var buffer = [UInt8](repeating: 0, count: 32 << 10)
    /// Where the buffer's bytes start in the file, and how many it holds.
    private var bufferStart: UInt64
    private var filled = 0
    /// The current record, within the buffer.
    private var recordStart = 0
    private var recordCount = 0
    /// Where the next record starts in the file.
    private var nextOffset: UInt64

    init(fd: Int32, run: Range<UInt64>) {
        self.fd = fd
        self.run = run
        bufferStart = run.lowerBound
        nextOffset = run.lowerBound
    }

    func withRecord<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[recordStart..<(recordStart + recordCount)])) }
    }

    /// Moves to the next record; false at the end of the run.
    func advance() throws -> Bool {
        guard nextOffset < run.upperBound else { return false }
        var length: UInt32 = 0
        try ensure(nextOffset, 4)
        let at = Int(nextOffset - bufferStart)
        withUnsafeMutableBytes(of: &length) { $0.copyBytes(from: buffer[at..<(at + 4)]) }
        let count = Int(UInt32(littleEndian: length))
        try ensure(nextOffset + 4, count)
        recordStart = Int(nextOffset + 4 - bufferStart)
        recordCount = count
        nextOffset += 4 + UInt64(count)
        return true
    }

    /// Makes the buffer hold the `count` bytes at `offset` (read again from there when it does not).
    private func ensure(_ offset: UInt64, _ count: Int) throws {
        if offset >= bufferStart, offset + UInt64(count) <= bufferStart + UInt64(filled) { return }
        if count > buffer.count { buffer = [UInt8](repeating: 0, count: count) }
        let wanted = Int(min(UInt64(buffer.count), run.upperBound - offset))
        let outcome = buffer.withUnsafeMutableBytes { FileIO.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<wanted]), at: offset) }
        guard outcome == .done(wanted), wanted >= count else {
            throw PackagerError(.io, "cannot read back the records being sorted from their temporary file")
        }
        bufferStart = offset
        filled = wanted
    }
}
