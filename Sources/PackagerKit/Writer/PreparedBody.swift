import Crypto
import Foundation
import OfflineBundle
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A SHA-256 digest held inline, with no allocation of its own: a crawl keeps one for each of its bodies.
///
/// Its four words are the digest's bytes read big-endian, so comparing them in order is comparing the bytes.
struct BodyDigest: Hashable, Comparable, Sendable {
    private var w0, w1, w2, w3: UInt64

    init(_ digest: SHA256.Digest) {
        (w0, w1, w2, w3) = digest.withUnsafeBytes { Self.words($0) }
    }

    /// The digest of these 32 bytes.
    init(bytes: some Collection<UInt8>) {
        precondition(bytes.count == 32, "a SHA-256 digest is 32 bytes")
        (w0, w1, w2, w3) = Array(bytes).withUnsafeBytes { Self.words($0) }
    }

    private static func words(_ raw: UnsafeRawBufferPointer) -> (UInt64, UInt64, UInt64, UInt64) {
        func word(_ i: Int) -> UInt64 { UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)) }
        return (word(0), word(1), word(2), word(3))
    }

    /// The 32 bytes.
    var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(32)
        for word in [w0, w1, w2, w3] { withUnsafeBytes(of: word.bigEndian) { out += $0 } }
        return out
    }

    static func < (a: Self, b: Self) -> Bool { (a.w0, a.w1, a.w2, a.w3) < (b.w0, b.w1, b.w2, b.w3) }

    /// Thirty-two zero bytes: a placeholder, never a body's.
    static let zero = BodyDigest(bytes: repeatElement(0, count: 32))
}

/// A body hashed and compressed, waiting to be written.
struct PreparedBody: Sendable {
    enum Storage: Sendable {
        case memory([UInt8])
        case spool(offset: UInt64)
        case source(BundleWriter.BodySource)
        /// Written to the bundle, and its bytes let go.
        case written
    }
    var digest: BodyDigest
    var crc32: UInt32
    /// CRC-32 of the bytes as stored (the deflate stream, or the body itself when stored).
    var storedCRC32: UInt32
    var size: UInt64
    var storedSize: UInt64
    var compression: BodyCompression
    var storage: Storage

    /// Whether writing it reads the body's source again (a stored body kept as its file or data).
    var readsSource: Bool {
        if case .source = storage { return true }
        return false
    }
}

extension PreparedBody.Storage {
    /// Copies the stored bytes to the output; for stored files, re-checks the CRC so a file changed meanwhile is caught.
    func copy(to output: AtomicOutput, storedSize: UInt64, expectedCRC: UInt32?, spool: OverflowFile, buffer: inout [UInt8]) throws {
        switch self {
        case .written:
            preconditionFailure("a body is written once")
        case .memory(let bytes):
            try output.write(bytes)
        case .spool(let offset):
            var done: UInt64 = 0
            while done < storedSize {
                let n = Int(min(UInt64(buffer.count), storedSize - done))
                try buffer.withUnsafeMutableBytes { try spool.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<n]), at: offset + done) }
                try buffer.withUnsafeBytes { try output.write(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                done += UInt64(n)
            }
        case .source(.data(let data)):
            try data.withUnsafeBytes { try output.write($0) }
        case .source(.bundle(let bundle, let entry)):
            // Read (and checked) again: the first read was for hashing, and was not kept.
            let data = try bundle.body(of: entry)
            guard UInt64(data.count) == storedSize, expectedCRC.map({ FastCRC32.checksum(Array(data)) == $0 }) ?? true else {
                throw PackagerError(.io, "\(bundle.path) changed while the bundle was written", subject: bundle.path)
            }
            try data.withUnsafeBytes { try output.write($0) }
        case .source(.file(let path)):
            // Not through a symbolic link, as when it was hashed (BodyContents).
            let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { throw PackagerError(.io, "cannot open \(path)", subject: path, cause: SystemCallError(errno)) }
            let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            defer { try? handle.close() }
            var crc: UInt32 = 0
            var done: UInt64 = 0
            while done < storedSize {
                let chunk = try handle.read(upToCount: Int(min(UInt64(buffer.count), storedSize - done))) ?? Data()
                guard !chunk.isEmpty else { throw PackagerError(.io, "\(path) shrank while the bundle was written", subject: path) }
                try chunk.withUnsafeBytes { raw in
                    crc = FastCRC32.checksum(raw, continuing: crc)
                    try output.write(raw)
                }
                done += UInt64(chunk.count)
            }
            if let expectedCRC, crc != expectedCRC {
                throw PackagerError(.io, "\(path) changed while the bundle was written", subject: path)
            }
        }
    }
}

/// Prepared bodies by entry (nil for an entry without one).
///
/// What each body is (digest, CRC-32s, sizes, compression, where its stream lies in the overflow file) is a 72-byte
/// record in a ``ScratchArray``: in memory up to 2 MiB (about 29,000 entries), in a file of the scratch folder past
/// it, so that an import of any size holds the same memory for them (an array of `PreparedBody?` held 90 bytes an
/// entry). A body read again from its file when written (a large one that deflate does not shrink) has its file's path
/// kept in a ``SpilledBytes`` beside the records (in a file too past half their limit), not in a Dictionary entry of
/// its own; one held in memory (within the writer's budget) or read from another source is kept beside them by entry.
///
/// Shared by reference, behind its own lock: the preparing threads set bodies, one owner at a time.
final class PreparedBodies: Sendable {
    private struct Record {
        var digest: BodyDigest
        var size: UInt64
        var storedSize: UInt64
        /// Where the stored bytes start in the overflow file, for a body kept there.
        var spoolOffset: UInt64
        var crc32: UInt32
        var storedCRC32: UInt32
        var compression: UInt16
        /// ``noBody``, ``inSpool``, ``written``, ``inFile`` (its path at `spoolOffset` in ``State/paths``, of
        /// `pathLength` bytes) or ``held``: the storage is in ``State/held``.
        var storage: UInt8
        var pathLength: UInt32 = 0

        /// An entry without a body.
        static let none = Record(digest: .zero, size: 0, storedSize: 0, spoolOffset: 0, crc32: 0, storedCRC32: 0, compression: 0, storage: noBody)
    }
    private static let (noBody, inSpool, written, held, inFile): (UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 1, 2, 3, 4)

    private struct State: ~Copyable {
        var records: ScratchArray<Record>
        var held: [Int: PreparedBody.Storage] = [:]
        /// The paths of bodies read again from their files, one after the other.
        var paths: SpilledBytes
    }
    private let state: Mutex<State>

    /// None yet; their records go to a file in `folder` past `memoryLimit` bytes (nil: in memory whatever their count).
    init(folder: String?, memoryLimit: Int = 2 << 20) {
        // Pages of 4 KiB: the writer reads the records in key order and in digest order, not the entries' own.
        state = Mutex(
            State(
                records: ScratchArray(folder: folder, memoryLimit: memoryLimit, pageBytes: 4096),
                paths: SpilledBytes(folder: folder, memoryLimit: memoryLimit / 2)))
    }

    var count: Int { state.withLock { $0.records.count } }

    /// Adds the next entry's body.
    func append(_ body: PreparedBody?) throws {
        try state.withLock { state in
            try state.records.append(Record.none)
            try Self.set(body, at: state.records.count - 1, in: &state)
        }
    }

    /// The body of the entry at `index`.
    func body(at index: Int) throws -> PreparedBody? {
        try state.withLock { state in
            let record = try state.records.value(at: index)
            let storage: PreparedBody.Storage
            switch record.storage {
            case Self.noBody: return nil
            case Self.inSpool: storage = .spool(offset: record.spoolOffset)
            case Self.written: storage = .written
            case Self.inFile:
                let start = Int(record.spoolOffset)
                let path = try state.paths.bytes(in: start..<(start + Int(record.pathLength)))
                storage = .source(.file(String(decoding: path, as: UTF8.self)))
            default:
                guard let held = state.held[index] else { preconditionFailure("entry \(index)'s body is held") }
                storage = held
            }
            return PreparedBody(
                digest: record.digest, crc32: record.crc32, storedCRC32: record.storedCRC32, size: record.size, storedSize: record.storedSize,
                compression: BodyCompression(rawValue: record.compression) ?? .stored, storage: storage)
        }
    }

    /// The digest of the entry at `index`'s body, or nil.
    func digest(at index: Int) throws -> BodyDigest? {
        try state.withLock { state in
            let record = try state.records.value(at: index)
            return record.storage == Self.noBody ? nil : record.digest
        }
    }

    /// Sets the body of the entry at `index`.
    func set(_ body: PreparedBody?, at index: Int) throws {
        try state.withLock { try Self.set(body, at: index, in: &$0) }
    }

    /// The body of the entry at `index` is written: its bytes are let go.
    func setWritten(_ index: Int) throws {
        try state.withLock { state in
            // Only a body held here has bytes to let go; one in the overflow file or read from its own is not read
            // again.
            guard state.held[index] != nil else { return }
            var record = try state.records.value(at: index)
            guard record.storage != Self.noBody else { return }
            record.storage = Self.written
            state.held[index] = nil
            try state.records.set(record, at: index)
        }
    }

    private static func set(_ body: PreparedBody?, at index: Int, in state: inout State) throws {
        state.held[index] = nil
        var record = Record.none
        if let body {
            record = Record(
                digest: body.digest, size: body.size, storedSize: body.storedSize, spoolOffset: 0, crc32: body.crc32, storedCRC32: body.storedCRC32,
                compression: body.compression.rawValue, storage: held)
            switch body.storage {
            case .spool(let offset): (record.storage, record.spoolOffset) = (inSpool, offset)
            case .written: record.storage = written
            case .source(.file(let path)) where path.utf8.count <= Int(UInt32.max):
                (record.storage, record.spoolOffset, record.pathLength) = (inFile, UInt64(state.paths.count), UInt32(path.utf8.count))
                try state.paths.append(path.utf8)
            case .memory, .source: state.held[index] = body.storage
            }
        }
        try state.records.set(record, at: index)
    }
}

extension PreparedBodies {
    /// The bodies of `entries` (nil where none is), in a new table.
    convenience init(_ entries: [PreparedBody?], folder: String?, memoryLimit: Int = 2 << 20) throws {
        self.init(folder: folder, memoryLimit: memoryLimit)
        for body in entries { try append(body) }
    }
}
