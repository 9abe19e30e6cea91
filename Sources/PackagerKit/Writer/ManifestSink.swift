import Crypto
import OfflineBundle

/// `manifest.json` as the writer makes it, one entry at a time, so a large bundle's manifest is never held whole.
///
/// The bytes are hashed (SHA-256, for index.bin) and CRC'd as they come. While the manifest is under 1 MiB it stays
/// in memory and is deflated in one piece by libdeflate, as bodies are; from 1 MiB on it is deflated as a stream
/// (zlib, at the writer's level up to 9) into the overflow file, 64 KiB at a time. For 50,000 entries the manifest
/// is about 30 MB of JSON: held whole, with its entries and a deflate buffer, it took 80 MB at the end of a build.
final class ManifestSink {
    /// A manifest that reaches this size is deflated as a stream.
    static let memoryLimit = 1 << 20
    /// How much JSON is gathered before it is fed to the stream.
    static let chunk = 64 << 10

    /// Where the finished manifest is.
    enum Stored {
        /// Small: the JSON, and its deflate stream when that is smaller.
        case memory(json: [UInt8], deflated: [UInt8]?)
        /// Large: a deflate stream in the overflow file.
        case spool(offset: UInt64, deflatedSize: UInt64)
    }

    struct Finished {
        var sha256: [UInt8]
        var crc32: UInt32
        var size: UInt64
        var stored: Stored
    }

    /// The JSON not yet hashed or streamed; write into it, then call ``flush(force:)``.
    var buffer = JSONBytes()
    private var hasher = SHA256()
    private var crc: UInt32 = 0
    private var size: UInt64 = 0
    private var deflater: SpoolDeflater?
    private let level: Int
    private let spool: OverflowFile

    init(level: Int, spool: OverflowFile) {
        self.level = level
        self.spool = spool
    }

    /// Streams what the buffer holds once it is large enough (or, with `force`, whatever it holds while streaming).
    func flush(force: Bool = false) throws {
        if deflater == nil {
            guard buffer.bytes.count >= Self.memoryLimit else { return }
            deflater = try SpoolDeflater(level: level, spool: spool, what: "the manifest")
        } else if !force && buffer.bytes.count < Self.chunk {
            return
        }
        try feed(finish: false)
    }

    /// Hashes the buffer, feeds it to the stream and writes what the stream gives out.
    private func feed(finish: Bool) throws {
        guard let deflater else { return }
        let bytes = buffer.bytes
        hasher.update(data: bytes)
        crc = bytes.withUnsafeBytes { FastCRC32.checksum($0, continuing: crc) }
        size += UInt64(bytes.count)
        try bytes.withUnsafeBytes { try deflater.feed($0, finish: finish) }
        buffer.removeAll()
    }

    /// Ends the manifest: its digest, CRC, size, and where it is.
    func finish() throws -> Finished {
        if let deflater {
            try feed(finish: true)
            return Finished(
                sha256: Array(hasher.finalize()), crc32: crc, size: size, stored: .spool(offset: deflater.start ?? 0, deflatedSize: deflater.size))
        }
        let json = buffer.bytes
        let deflated = try json.withUnsafeBytes { try RawDeflate.deflate($0, level: Int32(level)) }
        return Finished(
            sha256: Array(SHA256.hash(data: json)), crc32: FastCRC32.checksum(json), size: UInt64(json.count), stored: .memory(json: json, deflated: deflated))
    }
}
