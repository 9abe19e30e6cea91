import Crypto
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Byte ranges held, sorted and apart (touching ranges are merged).
package struct HeldRanges: Sendable, Equatable {
    package private(set) var ranges: [Range<UInt64>] = []
    /// Bytes held (kept as ranges come and go: a store's budget is asked at every fetch).
    package private(set) var count: UInt64 = 0

    package init() {}

    /// The index of the first range that ends after `offset`.
    private func firstEnding(after offset: UInt64) -> Int {
        var low = 0
        var high = ranges.count
        while low < high {
            let mid = (low + high) / 2
            if ranges[mid].upperBound <= offset { low = mid + 1 } else { high = mid }
        }
        return low
    }

    package func contains(_ range: Range<UInt64>) -> Bool {
        if range.isEmpty { return true }
        let i = firstEnding(after: range.lowerBound)
        return i < ranges.count && ranges[i].lowerBound <= range.lowerBound && ranges[i].upperBound >= range.upperBound
    }

    /// The parts of `range` not held, in order.
    package func missing(in range: Range<UInt64>) -> [Range<UInt64>] {
        var gaps: [Range<UInt64>] = []
        var position = range.lowerBound
        var i = firstEnding(after: position)
        while position < range.upperBound {
            if i < ranges.count && ranges[i].lowerBound <= position {
                position = ranges[i].upperBound
                i += 1
                continue
            }
            let end = i < ranges.count ? min(ranges[i].lowerBound, range.upperBound) : range.upperBound
            gaps.append(position..<end)
            position = end
        }
        return gaps
    }

    /// Forgets `range` (what is held on either side of it stays).
    package mutating func remove(_ range: Range<UInt64>) {
        guard !range.isEmpty else { return }
        var kept: [Range<UInt64>] = []
        for held in ranges {
            guard held.overlaps(range) else {
                kept.append(held)
                continue
            }
            if held.lowerBound < range.lowerBound { kept.append(held.lowerBound..<range.lowerBound) }
            if held.upperBound > range.upperBound { kept.append(range.upperBound..<held.upperBound) }
        }
        ranges = kept
        count = kept.reduce(0) { $0 + UInt64($1.count) }
    }

    package mutating func insert(_ range: Range<UInt64>) {
        guard !range.isEmpty else { return }
        var lower = range.lowerBound
        var upper = range.upperBound
        // Every range that overlaps or touches the new one is merged into it.
        var first = firstEnding(after: lower)
        if first > 0 && ranges[first - 1].upperBound == lower { first -= 1 }
        var last = first
        var replaced: UInt64 = 0
        while last < ranges.count && ranges[last].lowerBound <= upper {
            lower = min(lower, ranges[last].lowerBound)
            upper = max(upper, ranges[last].upperBound)
            replaced += UInt64(ranges[last].count)
            last += 1
        }
        ranges.replaceSubrange(first..<last, with: [lower..<upper])
        count += UInt64((lower..<upper).count) - replaced
    }
}

/// Where a remote bundle's fetched bytes are kept: a sparse file the size of the object, and a log of the ranges
/// written to it. In a cache folder both are named by the bundle's digest and size, so they outlive the process and
/// are shared by every process on the host that mounts the same bundle (they write the same bytes, and append whole
/// 16-byte records to the log); without a folder the file is this process's own, unlinked at once.
///
/// Only checked bytes are kept: a body once it hashed to the SHA-256 the checked index names (``RemoteBodyCheck``), so
/// another URL that claims the same digest cannot put a forged body here. A range is logged only after its bytes are
/// written, so the log never claims bytes that were never written; what is read back is checked again as from any
/// file (CRC-32, and the index's digest at every mount), so a damaged cache is refused, never served. In a folder,
/// the files are made 0600 and never opened through a link.
package final class RangeStore: Sendable {
    /// The data file's descriptor (`sendfile` sends from it once a range is held).
    package let descriptor: Int32
    /// The log's descriptor, opened to append; -1 without a cache folder.
    private let log: Int32
    package let size: UInt64
    /// The data file's path; nil for a file of this process's own.
    package let path: String?
    /// The most bytes kept; past it, fetched bytes are handed to the reader and not kept.
    private let budget: UInt64
    private let held: Mutex<Holding>

    /// The ranges held, and the bytes of keeps under way (counted against the budget from before they write until they
    /// are held, so two at once cannot both pass it).
    private struct Holding {
        var ranges: HeldRanges
        var reserved: UInt64 = 0
    }

    private static let recordSize = 16
    private static let forgottenBit: UInt64 = 1 << 63

    /// Opens (or makes) the store of the bundle `digest` of `size` bytes in `folder`, reading its log; without a folder,
    /// a file of this process's own.
    package init(folder: String?, digest: String, size: UInt64, budget: UInt64) throws {
        self.size = size
        self.budget = budget
        guard let folder else {
            var template = Array((NSTemporaryDirectory() + "/packager-remote-XXXXXX").utf8CString)
            let fd = template.withUnsafeMutableBufferPointer { buffer -> Int32 in
                let fd = mkstemp(buffer.baseAddress!)
                if fd >= 0 { unlink(buffer.baseAddress!) }
                return fd
            }
            guard fd >= 0 else { throw BundleError(.io, "cannot make a file for a remote bundle's ranges", underlying: SystemCallError(errno)) }
            guard ftruncate(fd, off_t(size)) == 0 else {
                let error = SystemCallError(errno)
                close(fd)
                throw BundleError(.io, "cannot size the file for a remote bundle's ranges", underlying: error)
            }
            descriptor = fd
            log = -1
            path = nil
            held = Mutex(Holding(ranges: HeldRanges()))
            return
        }
        try Self.makeFolder(folder)
        let base = "\(folder)/\(digest)-\(size)"
        let dataPath = base + ".data"
        let fd = try Self.openOwn(dataPath, flags: O_RDWR, what: "the cache file")
        var info = stat()
        if fstat(fd, &info) != 0 || UInt64(info.st_size) != size {
            // New (or cut short by something else): sized now; a log of another size is not trusted.
            if UInt64(info.st_size) != size { unlink(base + ".ranges") }
            guard ftruncate(fd, off_t(size)) == 0 else {
                let error = SystemCallError(errno)
                close(fd)
                throw BundleError(.io, "cannot size the cache file \(dataPath)", underlying: error)
            }
        }
        let logFD: Int32
        do {
            logFD = try Self.openOwn(base + ".ranges", flags: O_RDWR | O_APPEND, what: "the cache log")
        } catch {
            close(fd)
            throw error
        }
        descriptor = fd
        log = logFD
        path = dataPath
        held = Mutex(Holding(ranges: Self.readLog(logFD, size: size)))
        // Marks the bundle as used now (the folder's least recently used go first).
        futimens(logFD, nil)
    }

    /// The store of another bundle of a cache folder, whose files are named `base`, as it is: never made, resized or
    /// marked used (what ``BodyDonors`` borrows from). Throws when its files are not there or not of its `size`.
    package init(existing base: String, size: UInt64) throws {
        let fd = open(base + ".data", O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { throw BundleError(.io, "cannot open \(base).data", underlying: SystemCallError(errno)) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == getuid(), UInt64(info.st_size) == size else {
            close(fd)
            throw BundleError(.io, "\(base).data is not a cache file of \(size) bytes of this user's")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        let logFD = open(base + ".ranges", O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard logFD >= 0, fstat(logFD, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == getuid() else {
            if logFD >= 0 { close(logFD) }
            close(fd)
            throw BundleError(.io, "\(base).ranges is not a cache log of this user's")
        }
        _ = fcntl(logFD, F_SETFL, fcntl(logFD, F_GETFL) & ~O_NONBLOCK)
        descriptor = fd
        log = logFD
        self.size = size
        budget = size
        path = base + ".data"
        held = Mutex(Holding(ranges: Self.readLog(logFD, size: size)))
    }

    /// A store of this process's own over `descriptor` (an unlinked file it now owns), holding its first `size` bytes.
    package init(adopting descriptor: Int32, size: UInt64) {
        self.descriptor = descriptor
        self.size = size
        budget = size
        log = -1
        path = nil
        var ranges = HeldRanges()
        ranges.insert(0..<size)
        held = Mutex(Holding(ranges: ranges))
    }

    deinit {
        close(descriptor)
        if log >= 0 { close(log) }
    }

    /// Makes the cache folder (mode 0700) when it is not there, and refuses one that another user owns or that
    /// others may write to: whoever can write in it could plant a link where a cache file goes, or a forged file.
    package static func makeFolder(_ folder: String) throws {
        var info = stat()
        if stat(folder, &info) != 0 {
            let parent = (folder as NSString).deletingLastPathComponent
            if !parent.isEmpty { try? FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true) }
            guard mkdir(folder, 0o700) == 0 || errno == EEXIST, stat(folder, &info) == 0 else {
                throw BundleError(.io, "cannot make the cache folder \(folder)", underlying: SystemCallError(errno))
            }
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { throw BundleError(.io, "the cache folder \(folder) is not a folder") }
        guard info.st_uid == getuid() else {
            throw BundleError(
                .io, "the cache folder \(folder) belongs to another user (uid \(info.st_uid)): give a folder of your own (--cache-dir)")
        }
        guard info.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
            throw BundleError(
                .io,
                "the cache folder \(folder) may be written by other users (mode \(String(info.st_mode & 0o7777, radix: 8))): make it yours alone (chmod 700), or give another (--cache-dir)"
            )
        }
    }

    /// Opens the file at `path` in a cache folder without following a link, making it (mode 0600, never over an
    /// existing file) when it is not there; refuses anything but a regular file.
    package static func openOwn(_ path: String, flags: Int32, what: String) throws -> Int32 {
        var fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        if fd < 0 && errno == ENOENT {
            fd = open(path, flags | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
            // Made by another process in between: opened as it made it.
            if fd < 0 && errno == EEXIST { fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK) }
        }
        guard fd >= 0 else {
            let error = errno
            if error == ELOOP { throw BundleError(.io, "\(what) \(path) is a symbolic link: refused (the cache folder's files are never links)") }
            throw BundleError(.io, "cannot open \(what) \(path)", underlying: SystemCallError(error))
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == getuid() else {
            close(fd)
            throw BundleError(.io, "\(what) \(path) is not a regular file of this user's: refused")
        }
        // Non-blocking only so that opening a planted pipe could not hang: the file is read and written as any other.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
    }

    /// The log's records, each checked to lie inside the object (a record cut short or out of bounds is skipped).
    private static func readLog(_ fd: Int32, size: UInt64) -> HeldRanges {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size > 0 else { return HeldRanges() }
        let length = Int(info.st_size) / recordSize * recordSize
        var bytes = [UInt8](repeating: 0, count: length)
        guard case .done(let read) = bytes.withUnsafeMutableBytes({ FileIO.read(fd, into: $0, at: 0) }), read == length else { return HeldRanges() }
        var ranges = HeldRanges()
        for start in stride(from: 0, to: length, by: recordSize) {
            let offset = bytes.u64(start)
            // The top bit of the length marks a range forgotten (its bytes failed a check).
            let forgotten = bytes.u64(start + 8) & Self.forgottenBit != 0
            let count = bytes.u64(start + 8) & ~Self.forgottenBit
            guard offset <= size, count <= size - offset else { continue }
            if forgotten { ranges.remove(offset..<(offset + count)) } else { ranges.insert(offset..<(offset + count)) }
        }
        return ranges
    }

    /// Whether every byte of `range` is held.
    package func holds(_ range: Range<UInt64>) -> Bool { held.withLock { $0.ranges.contains(range) } }

    /// The parts of `range` not held.
    package func missing(in range: Range<UInt64>) -> [Range<UInt64>] { held.withLock { $0.ranges.missing(in: range) } }

    /// The ranges held, in order.
    package var heldRanges: [Range<UInt64>] { held.withLock { $0.ranges.ranges } }

    /// Bytes held.
    package var heldBytes: UInt64 { held.withLock { $0.ranges.count } }

    /// Keeps `bytes`, fetched from `offset`, unless the budget is spent; says whether they were kept.
    @discardableResult
    package func keep(_ bytes: [UInt8], at offset: UInt64) -> Bool {
        guard !bytes.isEmpty, offset <= size, UInt64(bytes.count) <= size - offset else { return false }
        // What the store would hold after: bytes it holds already (a range read before the whole object came, say)
        // are not counted twice; bytes other keeps are writing are.
        let end = offset + UInt64(bytes.count)
        let reserved = held.withLock { holding -> UInt64? in
            let added = holding.ranges.missing(in: offset..<end).reduce(0) { $0 + UInt64($1.count) }
            guard holding.ranges.count + holding.reserved + added <= budget else { return nil }
            holding.reserved += added
            return added
        }
        guard let reserved else { return false }
        guard bytes.withUnsafeBytes({ FileIO.write(descriptor, $0, at: offset) }) == nil else {
            held.withLock { $0.reserved -= reserved }
            return false
        }
        if log >= 0 {
            var record = [UInt8]()
            record.reserveCapacity(Self.recordSize)
            record.appendLE(offset)
            record.appendLE(UInt64(bytes.count))
            // A failed append loses only the record: the bytes are fetched again by whoever mounts next.
            _ = record.withUnsafeBytes { FileIO.write(log, $0) }
        }
        // Held and no longer reserved at once: counted twice for a moment, another keep would be refused for room
        // that is there.
        held.withLock {
            $0.ranges.insert(offset..<(offset + UInt64(bytes.count)))
            $0.reserved -= reserved
        }
        return true
    }

    /// Forgets `range`, whose bytes failed a check (a damaged cache file): it is fetched again when next read, here and
    /// in the next process that opens the cache.
    package func forget(_ range: Range<UInt64>) {
        held.withLock { $0.ranges.remove(range) }
        if log >= 0 {
            var record = [UInt8]()
            record.reserveCapacity(Self.recordSize)
            record.appendLE(range.lowerBound)
            record.appendLE(UInt64(range.count) | Self.forgottenBit)
            _ = record.withUnsafeBytes { FileIO.write(log, $0) }
        }
    }

    /// Forgets every range (the cache's bytes failed a check): the log is emptied and the data refetched as asked.
    package func forgetAll() {
        held.withLock { $0.ranges = HeldRanges() }
        if log >= 0 { _ = ftruncate(log, 0) }
    }

    /// Fills `buffer` from the held bytes at `offset`.
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) -> FileIO.Outcome {
        FileIO.read(descriptor, into: buffer, at: offset)
    }

    /// Writes `bytes` as the file at `target` in a cache folder: whole, to a file of its own beside it (mode 0600, made
    /// new, never through a link), then renamed over it, so that a reader never sees half of it. Says whether it did.
    @discardableResult
    package static func replace(_ target: String, with bytes: [UInt8]) -> Bool {
        let temporary = target + ".\(getpid()).tmp"
        // Left by a process of the same id that ended mid-write (or planted): removed, and made anew.
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        let written = bytes.withUnsafeBytes { FileIO.write(fd, $0, at: 0) } == nil
        close(fd)
        guard written, rename(temporary, target) == 0 else {
            unlink(temporary)
            return false
        }
        return true
    }

    /// The most bytes read at once by ``pieces(_:_:)``.
    static let filePiece = 1 << 20

    /// Reads `range` in pieces of at most ``filePiece`` bytes, in order, handing each and its offset to `body`.
    package func pieces(_ range: Range<UInt64>, _ body: (ArraySlice<UInt8>, UInt64) throws -> Void) throws {
        var buffer = [UInt8](repeating: 0, count: min(Self.filePiece, range.count))
        var position = range.lowerBound
        while position < range.upperBound {
            let count = Int(min(UInt64(buffer.count), range.upperBound - position))
            let outcome = buffer.withUnsafeMutableBytes { read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<count]), at: position) }
            guard case .done(let read) = outcome, read == count else {
                throw BundleError(.io, "cannot read back \(count) bytes at \(position) of \(path ?? "a file of this process's own")")
            }
            try body(buffer[0..<count], position)
            position += UInt64(count)
        }
    }

    /// When the bundle whose files are named `base` (`<folder>/<digest>-<size>`) was last mounted: its log's time.
    package static func lastUse(base: String) -> Int {
        var log = stat()
        guard stat(base + ".ranges", &log) == 0 else { return 0 }
        #if canImport(Darwin)
            return Int(log.st_mtimespec.tv_sec)
        #else
            return Int(log.st_mtim.tv_sec)
        #endif
    }

    /// Removes the cache folder's least recently mounted bundles (and deltas fetched whole) until what the folder holds
    /// is within `budget`, keeping `keep` (the data file of the bundle being mounted), which counts. Sizes are the disk
    /// blocks used (the files are sparse).
    package static func trim(folder: String, budget: UInt64, keep: String?) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        var kept = stat()
        // A bundle's three files go together (a delta fetched whole is kept as a bundle that holds all of it).
        var files: [(paths: [String], used: UInt64, lastUse: Int)] = []
        for name in names {
            var info = stat()
            if name.hasSuffix(".data") {
                let base = "\(folder)/\(name.dropLast(5))"
                guard stat(base + ".data", &info) == 0, base + ".data" != keep else { continue }
                files.append(([base + ".ranges", base + ".bodies", base + ".data"], UInt64(info.st_blocks) * 512, lastUse(base: base)))
            }
        }
        var total = files.reduce(0) { $0 + $1.used }
        if let keep, stat(keep, &kept) == 0 { total += UInt64(kept.st_blocks) * 512 }
        for file in files.sorted(by: { $0.lastUse < $1.lastUse }) where total > budget {
            for path in file.paths { unlink(path) }
            total -= min(total, file.used)
        }
    }
}

/// A reply's body written as it arrives to a file of this process's own (made with `mkstemp` and unlinked at once),
/// never held in memory: where a remote bundle's object sent whole goes, to be checked before any of it is kept or
/// read (``RemoteRequest/sink``).
package final class BodySpool: RemoteBodySink {
    private let file: Mutex<(descriptor: Int32, written: UInt64)>

    /// A spool with a file of its own; one that could not be made fails its first write.
    package init() {
        var template = Array((NSTemporaryDirectory() + "/packager-whole-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { buffer -> Int32 in
            let fd = mkstemp(buffer.baseAddress!)
            if fd >= 0 { unlink(buffer.baseAddress!) }
            return fd
        }
        file = Mutex((fd, 0))
    }

    deinit {
        let fd = file.withLock { $0.descriptor }
        if fd >= 0 { close(fd) }
    }

    package func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        file.withLock { file in
            guard file.descriptor >= 0 else { return false }
            guard bytes.count > 0 else { return true }
            guard FileIO.write(file.descriptor, bytes, at: file.written) == nil else { return false }
            file.written += UInt64(bytes.count)
            return true
        }
    }

    /// Bytes written so far.
    package var written: UInt64 { file.withLock { $0.written } }

    /// What was written, as a store of this process's own that holds it (the spool gives its file up); nil when its
    /// file could not be made.
    package func store() -> RangeStore? {
        file.withLock { file in
            guard file.descriptor >= 0 else { return nil }
            defer { file.descriptor = -1 }
            return RangeStore(adopting: file.descriptor, size: file.written)
        }
    }
}

/// What a cache folder remembers of a URL between runs: the object it named when last mounted.
package struct RemotePin: Codable, Sendable, Equatable {
    package var url: String
    package var etag: String?
    package var lastModified: String?
    package var size: UInt64
    package var digest: String

    /// The file that holds the pin of `url` (named by a digest of the URL without its query, which a presigned URL
    /// changes at each signing).
    package static func path(folder: String, url: String) -> String {
        let key = RemoteObject.shown(url)
        return "\(folder)/\(hexString(Array(SHA256.hash(data: Array(key.utf8)))).prefix(32)).pin"
    }

    /// The pin of `url`; nil when there is none, or it does not decode, or its digest is not 64 lowercase hex digits
    /// (the digest names the cache's files: nothing else may reach a path).
    package static func load(folder: String, url: String) -> RemotePin? {
        let fd = open(path(folder: folder, url: url), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= 1 << 16 else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        guard case .done(let count) = bytes.withUnsafeMutableBytes({ FileIO.read(fd, into: $0, at: 0) }), count == bytes.count,
            let pin = try? JSONDecoder().decode(RemotePin.self, from: Data(bytes)), pin.digest.utf8.count == 64,
            pin.digest.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return nil }
        return pin
    }

    /// Writes the pin beside the cache (written whole to a file of its own, mode 0600, made new without following a
    /// link, then renamed over the old one). It names the URL as it may be printed: no query, no credentials.
    package func save(folder: String) {
        var shown = self
        shown.url = RemoteObject.shown(url)
        guard let data = try? JSONEncoder().encode(shown) else { return }
        RangeStore.replace(Self.path(folder: folder, url: url), with: Array(data))
    }
}
