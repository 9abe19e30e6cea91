#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Values of a fixed size by position, held in memory up to a limit and past it in a temporary file (unlinked as soon
/// as it is made), of which a few pages are held: the tables a writer or an import keeps a value in for every entry
/// (where each record lies, each body's digest and sizes, a hash table of request keys), so that what they hold in
/// memory stops growing with the entries. Without a folder it stays in memory.
///
/// A position never set reads as zero bits, which must be a value of `Element` (integers, tuples and structures of
/// them). A reference: copies share the values. Not thread-safe: one owner, or one lock, at a time.
package struct ScratchArray<Element: BitwiseCopyable> {
    @usableFromInline let records: ScratchRecords

    /// An empty array that goes to a file in `folder` once it holds more than `memoryLimit` bytes. `pageBytes`: how much
    /// of the file is read or written at once (values read in order, or near each other); 0: each value is read and
    /// written on its own, and none is held (a hash table, read and written at random places).
    package init(folder: String?, memoryLimit: Int, pageBytes: Int = 4096) {
        records = ScratchRecords(size: MemoryLayout<Element>.stride, folder: folder, memoryLimit: memoryLimit, pageBytes: pageBytes)
    }

    /// `count` values of zero bits.
    package init(zeros count: Int, folder: String?, memoryLimit: Int, pageBytes: Int = 4096) throws {
        self.init(folder: folder, memoryLimit: memoryLimit, pageBytes: pageBytes)
        try records.extend(to: count)
    }

    /// How many values there are.
    package var count: Int { records.count }

    /// Whether the values went to a file.
    package var spilled: Bool { records.spilled }

    /// The value at `index`.
    @inlinable
    package func value(at index: Int) throws -> Element {
        try withUnsafeTemporaryAllocation(of: Element.self, capacity: 1) { buffer in
            let raw = UnsafeMutableRawPointer(buffer.baseAddress!)
            try records.read(index, into: raw)
            return raw.load(as: Element.self)
        }
    }

    /// Sets the value at `index`.
    @inlinable
    package func set(_ value: Element, at index: Int) throws {
        try Self.withStride(value) { try records.write(index, from: $0) }
    }

    /// Calls `body` with `value` in memory of its stride (what a record holds), the padding past its size zero: the
    /// value's own bytes are only its size.
    @inlinable
    static func withStride<T>(_ value: Element, _ body: (UnsafeRawPointer) throws -> T) rethrows -> T {
        try withUnsafeTemporaryAllocation(byteCount: MemoryLayout<Element>.stride, alignment: MemoryLayout<Element>.alignment) { raw in
            raw.initializeMemory(as: UInt8.self, repeating: 0)
            raw.storeBytes(of: value, as: Element.self)
            return try body(UnsafeRawPointer(raw.baseAddress!))
        }
    }

    /// The values in `range`, read at once.
    @inlinable
    package func values(in range: Range<Int>) throws -> [Element] {
        try [Element](unsafeUninitializedCapacity: range.count) { buffer, initialized in
            try records.read(range, into: UnsafeMutableRawPointer(buffer.baseAddress!))
            initialized = range.count
        }
    }

    /// Adds `value` after the others.
    @inlinable
    package func append(_ value: Element) throws {
        try Self.withStride(value) { try records.append(from: $0) }
    }
}

/// The bytes of a ``ScratchArray``: records of `size` bytes, in memory, or in a file with a few pages of it held.
@usableFromInline
package final class ScratchRecords {
    private let size: Int
    /// Where the temporary file goes; nil: memory only.
    private let folder: String?
    private let memoryLimit: Int
    /// Every record, while in memory.
    private var memory: [UInt8] = []
    private var fd: Int32 = -1
    package private(set) var count = 0
    /// The pages of the file held, each with when it was last used; a page changed here is written back when it leaves.
    private var pages: [Page] = []
    /// The page used last: records read in order, or near each other, find it first.
    private var last = 0
    private var clock = 0
    /// Records a page; 0: each record is read and written on its own, none held.
    private let pageRecords: Int

    private struct Page {
        var number: Int
        var bytes: [UInt8]
        var dirty: Bool
        var used: Int
    }

    /// Pages held once spilled.
    private static let pagesHeld = 16

    init(size: Int, folder: String?, memoryLimit: Int, pageBytes: Int) {
        self.size = size
        self.folder = folder
        self.memoryLimit = memoryLimit
        pageRecords = pageBytes == 0 ? 0 : max(1, pageBytes / max(1, size))
    }

    deinit { if fd >= 0 { close(fd) } }

    var spilled: Bool { fd >= 0 }

    /// Records of zeros up to `count`.
    func extend(to newCount: Int) throws {
        precondition(newCount >= count)
        if fd < 0, let folder, newCount * size > memoryLimit { try spill(in: folder) }
        if fd < 0 {
            memory.append(contentsOf: repeatElement(0, count: (newCount - count) * size))
        } else {
            // A file extended reads as zeros; the pages held past the old end are zeros already.
            guard ftruncate(fd, off_t(newCount * size)) == 0 else { throw Self.failure(errno) }
        }
        count = newCount
    }

    @usableFromInline
    func read(_ index: Int, into destination: UnsafeMutableRawPointer) throws {
        precondition(index >= 0 && index < count, "position \(index) of \(count)")
        if fd < 0 {
            memory.withUnsafeBytes { destination.copyMemory(from: $0.baseAddress! + index * size, byteCount: size) }
            return
        }
        if pageRecords == 0 {
            let outcome = FileIO.read(fd, into: UnsafeMutableRawBufferPointer(start: destination, count: size), at: UInt64(index * size))
            switch outcome {
            case .failed(let error): throw Self.failure(error)
            // Past the end of the file: never written, zeros.
            case .done(let n): if n < size { (destination + n).initializeMemory(as: UInt8.self, repeating: 0, count: size - n) }
            }
            return
        }
        let slot = try page(holding: index)
        let at = (index % pageRecords) * size
        pages[slot].bytes.withUnsafeBytes { destination.copyMemory(from: $0.baseAddress! + at, byteCount: size) }
    }

    /// The records in `range`, one after the other: read from the file at once (the pages held that changed are
    /// written back first).
    @usableFromInline
    func read(_ range: Range<Int>, into destination: UnsafeMutableRawPointer) throws {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "positions \(range) of \(count)")
        let bytes = range.count * size
        guard bytes > 0 else { return }
        if fd < 0 {
            memory.withUnsafeBytes { destination.copyMemory(from: $0.baseAddress! + range.lowerBound * size, byteCount: bytes) }
            return
        }
        for slot in pages.indices { try writeBack(slot) }
        let outcome = FileIO.read(fd, into: UnsafeMutableRawBufferPointer(start: destination, count: bytes), at: UInt64(range.lowerBound * size))
        switch outcome {
        case .failed(let error): throw Self.failure(error)
        case .done(let n): if n < bytes { (destination + n).initializeMemory(as: UInt8.self, repeating: 0, count: bytes - n) }
        }
    }

    @usableFromInline
    func write(_ index: Int, from source: UnsafeRawPointer) throws {
        precondition(index >= 0 && index < count, "position \(index) of \(count)")
        if fd < 0 {
            let size = size
            memory.withUnsafeMutableBytes { ($0.baseAddress! + index * size).copyMemory(from: source, byteCount: size) }
            return
        }
        if pageRecords == 0 {
            if let failure = FileIO.write(fd, UnsafeRawBufferPointer(start: source, count: size), at: UInt64(index * size)) { throw Self.failure(failure) }
            return
        }
        let slot = try page(holding: index)
        let (at, size) = ((index % pageRecords) * size, size)
        pages[slot].bytes.withUnsafeMutableBytes { ($0.baseAddress! + at).copyMemory(from: source, byteCount: size) }
        pages[slot].dirty = true
    }

    @usableFromInline
    func append(from source: UnsafeRawPointer) throws {
        if fd < 0 {
            memory.append(contentsOf: UnsafeRawBufferPointer(start: source, count: size))
            count += 1
            if let folder, memory.count > memoryLimit { try spill(in: folder) }
            return
        }
        count += 1
        try write(count - 1, from: source)
    }

    /// The position among ``pages`` of the page that holds `index`, read in when it is not held (the page used longest
    /// ago leaves, written back if it changed).
    private func page(holding index: Int) throws -> Int {
        let number = index / pageRecords
        clock &+= 1
        if last < pages.count, pages[last].number == number {
            pages[last].used = clock
            return last
        }
        var oldest = 0
        for i in pages.indices {
            if pages[i].number == number {
                pages[i].used = clock
                last = i
                return i
            }
            if pages[i].used < pages[oldest].used { oldest = i }
        }
        var bytes = [UInt8](repeating: 0, count: pageRecords * size)
        // Short past the end of the file: the rest is zeros (never written).
        let outcome = bytes.withUnsafeMutableBytes { FileIO.read(fd, into: $0, at: UInt64(number * $0.count)) }
        if case .failed(let error) = outcome { throw Self.failure(error) }
        let page = Page(number: number, bytes: bytes, dirty: false, used: clock)
        if pages.count < Self.pagesHeld {
            pages.append(page)
            last = pages.count - 1
        } else {
            try writeBack(oldest)
            pages[oldest] = page
            last = oldest
        }
        return last
    }

    private func writeBack(_ slot: Int) throws {
        guard pages[slot].dirty else { return }
        let number = pages[slot].number
        let failure = pages[slot].bytes.withUnsafeBytes { FileIO.write(fd, $0, at: UInt64(number * $0.count)) }
        if let failure { throw Self.failure(failure) }
        pages[slot].dirty = false
    }

    /// Makes the temporary file, unlinked at once, and moves the records held in memory into it.
    private func spill(in folder: String) throws {
        let made = FileIO.unlinkedFile(in: folder, prefix: "table")
        guard made >= 0 else { throw Self.failure(errno) }
        if let failure = memory.withUnsafeBytes({ FileIO.write(made, $0, at: 0) }) {
            close(made)
            throw Self.failure(failure)
        }
        fd = made
        memory = []
    }

    private static func failure(_ code: Int32) -> BundleError {
        BundleError(.io, "cannot keep a table in a temporary file", underlying: SystemCallError(code))
    }
}
