import Crypto
import Foundation
import OfflineBundle

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

/// Prepared bodies by entry (nil for an entry without one), in chunks of 4,096: a growing array holds up to twice its
/// size while it grows, and an array made of a crawl's would hold them twice while it is made.
struct PreparedBodies: Sendable {
    private var chunks: [[PreparedBody?]] = []
    private(set) var count = 0
    static let chunkSize = 4096

    init() {}

    init(_ bodies: [PreparedBody?]) {
        for body in bodies { append(body) }
    }

    mutating func append(_ body: PreparedBody?) {
        if count % Self.chunkSize == 0 {
            chunks.append([])
            chunks[chunks.count - 1].reserveCapacity(Self.chunkSize)
        }
        chunks[chunks.count - 1].append(body)
        count += 1
    }

    /// Appends `other`'s bodies; when this is empty, takes its chunks as they are.
    mutating func append(contentsOf other: consuming PreparedBodies) {
        if count == 0 {
            self = other
            return
        }
        for i in 0..<other.count { append(other[i]) }
    }

    subscript(i: Int) -> PreparedBody? {
        get { chunks[i / Self.chunkSize][i % Self.chunkSize] }
        set { chunks[i / Self.chunkSize][i % Self.chunkSize] = newValue }
    }

    /// How many entries have a body.
    var withBody: Int { chunks.reduce(0) { $0 + $1.count { $0 != nil } } }
}
