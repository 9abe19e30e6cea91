import Crypto
import Foundation

/// Reads a response body in chunks straight from the bundle file: stored bytes by positional reads, deflated ones
/// inflated as they go, so memory is a chunk, whatever the body's size.
///
/// A body not yet checked in this mount is checked as it is read: the CRC-32 of the stored stream for a gzip answer
/// (format 2), the CRC-32 of the inflated bytes otherwise, and their SHA-256 when the bundle was mounted with a
/// required key. The last chunk is held back until the check passes, so a damaged body never goes out whole: the
/// read throws instead, and a server ends the response as an error. A body that passed is remembered for the life
/// of the mount, and later reads send its bytes without checking them again (a file cut short still fails the read).
///
/// One reader serves one response; call ``next()`` from one thread at a time (it blocks on file reads, so servers
/// call it off their event loops and Swift's cooperative pool).
public final class BodyReader: @unchecked Sendable {
    // Unchecked: one reader serves one response, read from one thread at a time (as documented above).
    typealias Shape = StoredBodyReader.Shape

    private enum Backing {
        /// A body of the bundle.
        case stored(StoredBodyReader)
        /// Bytes in memory (a runtime rule's), and where the next chunk starts.
        case memory(Data, Range<Int>)
        /// A local file a runtime rule or the last-seen cache names, read by positional reads.
        case file(BundleFile, Range<UInt64>)
    }

    private var backing: Backing
    private let chunkSize: Int

    /// A reader of a body of `bundle`; `justChecked` when this request has just read the whole body through its checks
    /// (a Range of a body not trusted yet), so the range is not checked a second time.
    /// `keep`: whether a whole identity read may fill the mount's cache of inflated bodies (a scrub's reads do not).
    init(bundle: MountedBundle, bodyIndex: Int, shape: Shape, chunkSize: Int, justChecked: Bool = false, keep: Bool = true) {
        backing = .stored(
            StoredBodyReader(bundle: bundle, bodyIndex: bodyIndex, shape: shape, chunkSize: chunkSize, justChecked: justChecked, keep: keep))
        self.chunkSize = max(4096, chunkSize)
    }

    /// A reader of `range` of bytes in memory.
    init(data: Data, range: Range<Int>, chunkSize: Int) {
        backing = .memory(data, range)
        self.chunkSize = max(4096, chunkSize)
    }

    /// A reader of `range` of a local file; a file cut short fails the read.
    init(file: BundleFile, range: Range<UInt64>, chunkSize: Int) {
        backing = .file(file, range)
        self.chunkSize = max(4096, chunkSize)
    }

    /// Whether the body comes from memory (the mount's cache of inflated bodies, or a rule's bytes): no file is read.
    public var inMemory: Bool {
        switch backing {
        case .stored(let reader): return reader.inMemory
        case .memory: return true
        case .file: return false
        }
    }

    /// Bytes this reader read from the bundle file (tests count them).
    package var bytesRead: UInt64 {
        if case .stored(let reader) = backing { return reader.bytesRead }
        return 0
    }

    /// The next chunk, or nil when the body is complete.
    ///
    /// - Throws: ``BundleError`` when the stored bytes fail a check, the file is cut short, or the stream is damaged;
    ///   nothing more should be sent then.
    public func next() throws -> Data? {
        switch backing {
        case .stored(let reader):
            return try reader.next()
        case .memory(let data, let range):
            guard !range.isEmpty else { return nil }
            let end = min(range.lowerBound + chunkSize, range.upperBound)
            backing = .memory(data, end..<range.upperBound)
            // A slice shares the bytes: nothing is copied here.
            return data[(data.startIndex + range.lowerBound)..<(data.startIndex + end)]
        case .file(let file, let range):
            guard !range.isEmpty else { return nil }
            let count = Int(min(UInt64(chunkSize), range.upperBound - range.lowerBound))
            let bytes = try file.read(at: range.lowerBound, count: count, what: "the body")
            backing = .file(file, (range.lowerBound + UInt64(count))..<range.upperBound)
            return Data(bytes)
        }
    }

    /// Reads the rest of the body without keeping it: the checks run, and a body that passes is trusted from then on.
    public func drain() throws {
        while try next() != nil {}
    }

    /// Reads the rest of the body and returns it, checked as ``next()`` checks.
    public func readAll() throws -> Data {
        var data = Data()
        while let chunk = try next() { data.append(chunk) }
        return data
    }
}

/// Reads a bundle body (see ``BodyReader``).
final class StoredBodyReader {
    enum Shape {
        /// The body's bytes (inflated when stored deflated).
        case identity
        /// The stored deflate stream framed as a gzip member.
        case gzip
        /// Part of the body's bytes.
        case range(Range<UInt64>)
    }

    private let bundle: MountedBundle
    private let record: IndexBodyRecord
    /// The file the body lies in (for a delta, its own or a base's).
    private let file: BundleFile
    private let bodyIndex: Int
    private let name: String
    private let shape: Shape
    private let chunkSize: Int
    /// Checks still to pass before the body is trusted; none once it has.
    private let checkStored: Bool
    private let checkContent: Bool
    private let checkDigest: Bool

    private var inflater: InflateStream?
    private var storedPosition: UInt64 = 0
    private var contentPosition: UInt64 = 0
    private var storedCRC: UInt32 = 0
    private var contentCRC: UInt32 = 0
    private var digest = SHA256()
    private var headerSent = false
    private var trailerSent = false
    private var pending: [UInt8]?
    private var finished = false
    /// An inflated body answered from the mount's cache, and where the next chunk starts.
    private var cached: Data?
    private var cachedPosition = 0
    /// The inflated bytes collected to be kept in the cache once the body is checked.
    private var collecting: [UInt8]?
    /// Whether the body comes from the mount's cache of inflated bodies: no file is read.
    var inMemory: Bool { cached != nil }
    /// Bytes this reader read from the file (tests count them).
    private(set) var bytesRead: UInt64 = 0

    init(bundle: MountedBundle, bodyIndex: Int, shape: Shape, chunkSize: Int, justChecked: Bool, keep: Bool) {
        self.bundle = bundle
        self.bodyIndex = bodyIndex
        self.record = bundle.bodyRecord(at: bodyIndex)
        self.file = bundle.bodyFile(bodyIndex)
        self.name = bundle.bodyName(record)
        self.shape = shape
        self.chunkSize = max(4096, chunkSize)
        let trusted = justChecked || bundle.isVerified(bodyIndex)
        let sha = bundle.verification == .sha256
        // Identity answers and ranges of a deflated body come from the mount's cache when it holds the body; a whole
        // identity answer fills it when not.
        if record.compression == .deflate, let cache = bundle.inflatedCache {
            switch shape {
            case .gzip: break
            case .range: cached = cache.get(bodyIndex)
            case .identity:
                cached = cache.get(bodyIndex)
                if cached == nil && keep && cache.admits(record.size) { collecting = [] }
            }
        }
        switch shape {
        case .gzip where !trusted && !sha && bundle.index.hasStoredChecksums:
            // Format 2 records the CRC-32 of the stored stream: the bytes sent are checked as they are, nothing inflated.
            (checkStored, checkContent, checkDigest) = (true, false, false)
        default:
            (checkStored, checkContent, checkDigest) = (false, !trusted, !trusted && sha)
        }
    }

    /// The next chunk, or nil when the body is complete.
    ///
    /// - Throws: ``BundleError`` when the stored bytes fail a check, the file is cut short, or the stream is damaged;
    ///   nothing more should be sent then.
    func next() throws -> Data? {
        do {
            return try nextChecked()
        } catch let error as BundleError where file.remote != nil && (error.code == .corruptBody || error.code == .corruptDirectory) {
            // A remote bundle's body that fails its checks may be a damaged cache file: forgotten, so the next read
            // fetches it again (and fails again if the server's bytes are what is damaged).
            file.remote?.store.forget(record.localHeaderOffset..<(record.dataOffset + record.storedSize))
            throw error
        }
    }

    private func nextChecked() throws -> Data? {
        if let cached {
            // A cached body was checked before it was kept: its bytes go out as they are.
            var range = 0..<cached.count
            if case .range(let wanted) = shape { range = Int(wanted.lowerBound)..<Int(wanted.upperBound) }
            let start = max(cachedPosition, range.lowerBound)
            guard start < range.upperBound else { return nil }
            let end = min(start + chunkSize, range.upperBound)
            cachedPosition = end
            // A slice shares the cached bytes: nothing is copied here.
            return cached[(cached.startIndex + start)..<(cached.startIndex + end)]
        }
        let holdBack = checkStored || checkContent
        while !finished {
            if let chunk = try produce() {
                guard holdBack else { return Data(chunk) }
                let previous = pending
                pending = chunk
                if let previous { return Data(previous) }
                continue
            }
            try finishChecks()
            finished = true
            if checkStored || checkContent { bundle.markVerified(bodyIndex) }
            if let collecting, UInt64(collecting.count) == record.size { bundle.inflatedCache?.put(bodyIndex, Data(collecting)) }
            collecting = nil
            if let last = pending {
                pending = nil
                return Data(last)
            }
        }
        return nil
    }

    // MARK: - Producing

    private var inflates: Bool {
        guard record.compression == .deflate else { return false }
        if case .gzip = shape { return checkContent }
        return true
    }

    /// The next piece of output before any holding back, or nil at the end.
    private func produce() throws -> [UInt8]? {
        if case .gzip = shape {
            if !headerSent {
                headerSent = true
                return Array(DeflatedBody.gzipHeader)
            }
            if let stored = try readStored() {
                if inflates { try inflate(stored) }
                return stored
            }
            guard !trailerSent else { return nil }
            trailerSent = true
            try endOfStored()
            return Array(DeflatedBody.gzipTrailer(crc32: record.crc32, size: record.size))
        }
        while true {
            if case .range(let range) = shape, contentPosition >= range.upperBound { return nil }
            if inflates {
                if inflater == nil { inflater = try InflateStream(entry: name) }
                let stream = inflater!
                if stream.needsInput && !stream.ended {
                    guard let stored = try readStored() else {
                        try endOfStored()
                        return nil
                    }
                    try stream.feed(stored)
                }
                let piece = try stream.pull(max: chunkSize, limit: record.size)
                if stream.ended, let extra = try readStored(), !extra.isEmpty {
                    throw BundleError(.corruptBody, "the deflate stream ends before its recorded compressed size", entry: name)
                }
                if piece.isEmpty {
                    if stream.ended {
                        try endOfStored()
                        return nil
                    }
                    continue
                }
                if checkContent { noteContent(piece) }
                collecting? += piece
                if let chunk = emit(piece) { return chunk }
            } else {
                guard let stored = try readStored() else { return nil }
                if checkContent { noteContent(stored) }
                if let chunk = emit(stored) { return chunk }
            }
        }
    }

    /// The next piece of the stored stream, or nil when it has all been read.
    private func readStored() throws -> [UInt8]? {
        if !started {
            started = true
            try bundle.checkClaimedSize(record, name: name)
            // A remote bundle's body comes in one range request, local header and all (a file's reads are local).
            try file.prefetch(record.localHeaderOffset..<(record.dataOffset + record.storedSize))
            if checkStored || checkContent {
                let headerLength = Int(record.dataOffset - record.localHeaderOffset)
                try bundle.checkLocalHeader(
                    try file.read(at: record.localHeaderOffset, count: headerLength, what: "body \(name)"), of: record)
            }
        }
        var start = storedPosition
        var end = record.storedSize
        // A range of a stored body reads only that range once the body is trusted.
        if case .range(let range) = shape, record.compression == .stored, !checkContent {
            start = max(start, range.lowerBound)
            end = min(end, range.upperBound)
            contentPosition = start
        }
        guard start < end else { return nil }
        let count = Int(min(UInt64(chunkSize), end - start))
        let bytes = try file.read(at: record.dataOffset + start, count: count, what: "body \(name)")
        bytesRead += UInt64(count)
        storedPosition = start + UInt64(count)
        if checkStored { storedCRC = CRC32.checksum(bytes, continuing: storedCRC) }
        return bytes
    }

    /// Inflates a piece of the stored stream only to check it (a gzip answer under SHA-256, or of format 1).
    private func inflate(_ stored: [UInt8]) throws {
        if inflater == nil { inflater = try InflateStream(entry: name) }
        let stream = inflater!
        try stream.feed(stored)
        while true {
            let piece = try stream.pull(max: chunkSize, limit: record.size)
            if piece.isEmpty { break }
            noteContent(piece)
        }
    }

    private func noteContent(_ bytes: [UInt8]) {
        contentCRC = CRC32.checksum(bytes, continuing: contentCRC)
        if checkDigest { digest.update(data: bytes) }
    }

    /// The part of `bytes` (content at ``contentPosition``) that the shape asks for, or nil when none is.
    private func emit(_ bytes: [UInt8]) -> [UInt8]? {
        let start = contentPosition
        contentPosition += UInt64(bytes.count)
        guard case .range(let range) = shape else { return bytes }
        let lower = max(start, range.lowerBound)
        let upper = min(contentPosition, range.upperBound)
        return lower < upper ? Array(bytes[Int(lower - start)..<Int(upper - start)]) : nil
    }

    // MARK: - Checks

    /// Whether the first read (and its checks of the size claimed and the local header) has happened.
    private var started = false

    /// The stored stream has been read to its recorded end: an inflated one must have ended there too.
    private func endOfStored() throws {
        guard inflates, let inflater else {
            if inflates && record.size > 0 { throw BundleError(.corruptBody, "the deflate stream is empty", entry: name) }
            return
        }
        guard inflater.ended else { throw BundleError(.corruptBody, "the deflate stream is damaged (it ends early)", entry: name) }
        guard inflater.produced == record.size else {
            throw BundleError(.corruptBody, "the body inflates to \(inflater.produced) bytes, not the \(record.size) recorded", entry: name)
        }
    }

    private func finishChecks() throws {
        if checkStored { try BodyCheck.storedCRC(storedCRC, of: record, name: name) }
        guard checkContent else { return }
        try BodyCheck.contentCRC(contentCRC, of: record, name: name)
        if checkDigest { try BodyCheck.digest(Array(digest.finalize()), of: record, name: name) }
    }
}
