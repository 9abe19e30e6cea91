import Crypto
import Foundation

/// Reading the metadata entries (`index.bin`, `manifest.json`, `signature.json`, a delta's entries): where their data
/// lies, inflated whole or a piece at a time, their sizes and CRC-32 checked (docs/FORMAT.md §8.1).
extension MountedBundle {
    /// Where a metadata entry's data starts: after its local header's own name and extra fields, checked to end before
    /// the central directory (§8.1, reading a metadata entry, steps 2 and 3).
    package static func metadataDataOffset(_ entry: ZipCentralEntry, in file: BundleFile, bodyArea: UInt64) throws -> UInt64 {
        let fixed = try file.read(at: entry.localHeaderOffset, count: ZipConstants.localHeaderSize, what: entry.name)
        guard fixed.u32(0) == ZipConstants.localHeaderSignature else {
            throw BundleError(.corruptDirectory, "the local header of \(entry.name) is damaged", entry: entry.name)
        }
        let dataOffset = entry.localHeaderOffset + UInt64(ZipConstants.localHeaderSize) + UInt64(fixed.u16(26)) + UInt64(fixed.u16(28))
        guard dataOffset + entry.compressedSize <= bodyArea else {
            throw BundleError(.hostile, "\(entry.name) runs into the central directory", entry: entry.name)
        }
        return dataOffset
    }

    /// The largest `manifest.json` a tool reads (inflated): a manifest line is a few hundred bytes, so this is millions
    /// of entries, and a deflated manifest that claims more is refused before it is inflated.
    package static let manifestLimit: UInt64 = 1 << 30

    /// Reads `index.bin` for a bundle of format `version`: stored, or from version 3 on also deflated (docs/FORMAT.md
    /// §2.1). The bytes returned are the index's own, inflated: the bundle digest is their SHA-256.
    /// A deflated index may claim at most ``BundleFormat/indexMaxRatio`` bytes per stored byte: it is read before any
    /// signature is checked, so it is refused past that before anything is inflated.
    package static func readIndex(_ entry: ZipCentralEntry, version: UInt32, from file: BundleFile, bodyArea: UInt64) throws -> [UInt8] {
        try checkIndexEntry(entry, version: version)
        guard entry.method != 0 else { return try readMetadataEntry(entry, from: file, limit: 1 << 32, bodyArea: bodyArea) }
        guard entry.uncompressedSize <= 1 << 32 else {
            throw BundleError(.hostile, "\(entry.name) claims \(entry.uncompressedSize) bytes, over the limit of \(1 << 32)", entry: entry.name)
        }
        // Inflated a piece at a time: the stored stream is never held beside the index (a third of its size again).
        // Room for what the stream can likely give (deflate rarely beats 8 to 1 on an index), not what the entry claims:
        // a claim is not checked until the stream is inflated.
        var bytes = [UInt8]()
        bytes.reserveCapacity(Int(min(entry.uncompressedSize, max(64 << 10, entry.compressedSize * 8))))
        try forEachPiece(of: entry, from: file, limit: 1 << 32, bodyArea: bodyArea) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// Reads `index.bin` as ``readIndex(_:version:from:bodyArea:)`` does, into a mapped scratch file in `folder`.
    package static func readIndex(
        _ entry: ZipCentralEntry, version: UInt32, from file: BundleFile, bodyArea: UInt64, folder: String
    ) throws -> MappedIndex {
        try checkIndexEntry(entry, version: version)
        guard entry.uncompressedSize <= 1 << 32 else {
            throw BundleError(.hostile, "\(entry.name) claims \(entry.uncompressedSize) bytes, over the limit of \(1 << 32)", entry: entry.name)
        }
        return try MappedIndex(count: Int(entry.uncompressedSize), folder: folder) { write in
            try forEachPiece(of: entry, from: file, limit: 1 << 32, bodyArea: bodyArea, write)
        }
    }

    /// The checks an `index.bin` entry passes before a byte of it is read.
    private static func checkIndexEntry(_ entry: ZipCentralEntry, version: UInt32) throws {
        guard entry.method == 0 || version >= 3 else {
            throw BundleError(
                .hostile,
                "\(entry.name) is compressed (method \(entry.method)); format version \(version) stores it (method 0), so it is refused unread",
                entry: entry.name)
        }
        // Within readMetadataEntry's 4 GiB limit the product cannot overflow; past it, that limit refuses the entry.
        if entry.method != 0, entry.compressedSize <= 1 << 32, entry.uncompressedSize > entry.compressedSize * BundleFormat.indexMaxRatio {
            throw BundleError(
                .hostile,
                "\(entry.name) claims \(entry.uncompressedSize) bytes from \(entry.compressedSize) deflated, more than \(BundleFormat.indexMaxRatio) to 1: it is refused unread",
                entry: entry.name)
        }
    }

    /// A metadata entry's bytes, inflated, a piece of at most 1 MiB at a time to `body`; its size and CRC-32 checked
    /// at the end (a piece given before a failure is not yet checked).
    package static func forEachPiece(
        of entry: ZipCentralEntry, from file: BundleFile, limit: UInt64, bodyArea: UInt64, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        guard entry.uncompressedSize <= limit, entry.compressedSize <= limit else {
            throw BundleError(.hostile, "\(entry.name) claims \(entry.uncompressedSize) bytes, over the limit of \(limit)", entry: entry.name)
        }
        guard entry.method == 0 || entry.method == 8 else {
            throw BundleError(.unsupported, "\(entry.name) uses compression method \(entry.method)", entry: entry.name)
        }
        guard entry.method == 8 || entry.compressedSize == entry.uncompressedSize else {
            throw BundleError(.corruptDirectory, "\(entry.name) is stored but its sizes differ", entry: entry.name)
        }
        guard entry.uncompressedSize <= max(entry.compressedSize, 1) * 1100 else {
            throw BundleError(.hostile, "\(entry.name) claims an absurd compression ratio", entry: entry.name)
        }
        let dataOffset = try metadataDataOffset(entry, in: file, bodyArea: bodyArea)
        try file.prefetch(dataOffset..<(dataOffset + entry.compressedSize), whole: true)
        let stream = entry.method == 8 ? try InflateStream(entry: entry.name) : nil
        var crc: UInt32 = 0
        var produced: UInt64 = 0
        var offset: UInt64 = 0
        func give(_ piece: [UInt8]) throws {
            crc = piece.withUnsafeBytes { CRC32.checksum($0, continuing: crc) }
            produced += UInt64(piece.count)
            try piece.withUnsafeBytes(body)
        }
        func read() throws -> [UInt8] {
            let count = Int(min(1 << 20, entry.compressedSize - offset))
            defer { offset += UInt64(count) }
            return try file.read(at: dataOffset + offset, count: count, what: entry.name)
        }
        do {
            if let stream {
                while !stream.ended {
                    if stream.needsInput, offset < entry.compressedSize { try stream.feed(try read()) }
                    // A MiB at most, and one byte past what is left: a small index does not zero a MiB it never fills,
                    // and a stream with more than its entry says still shows it.
                    let piece = try stream.pull(max: Int(min(1 << 20, entry.uncompressedSize - produced + 1)), limit: .max)
                    guard UInt64(piece.count) <= entry.uncompressedSize - produced else {
                        // More than the entry says is hostile (FORMAT.md §8.1), as a body's is.
                        throw BundleError(
                            .hostile, "\(entry.name) inflates past its recorded size of \(entry.uncompressedSize) bytes", entry: entry.name)
                    }
                    // zlib may hold output after its last input: only an empty pull with nothing left to feed is an end.
                    if piece.isEmpty, stream.needsInput, offset >= entry.compressedSize, !stream.ended {
                        throw BundleError(.corruptBody, "the deflate stream ends early", entry: entry.name)
                    }
                    try give(piece)
                }
                guard offset == entry.compressedSize else {
                    throw BundleError(.corruptBody, "the deflate stream ends before its recorded compressed size", entry: entry.name)
                }
            } else {
                while offset < entry.compressedSize { try give(try read()) }
            }
        } catch let error as BundleError where error.code == .corruptBody {
            // A damaged metadata stream is a damaged index or manifest, not a body.
            throw BundleError(.corruptIndex, "\(entry.name): \(error.message)", entry: entry.name)
        }
        guard produced == entry.uncompressedSize else {
            throw BundleError(.corruptIndex, "\(entry.name) inflates to \(produced) bytes, not the \(entry.uncompressedSize) recorded", entry: entry.name)
        }
        guard crc == entry.crc32 else {
            throw BundleError(.corruptIndex, "\(entry.name) fails its CRC-32 check: it is damaged", entry: entry.name)
        }
    }

    /// The SHA-256 of `index.bin` as the bundle's file holds it (the bundle digest); a mapped index is read 4 MiB at a
    /// time, each piece let go once hashed.
    package func indexSHA256() throws -> [UInt8] {
        if let mapped = index.mapped { return mapped.sha256() }
        return try withIndexFileBytes { Array(SHA256.hash(data: $0)) }
    }

    /// `index.bin` as the bundle's file holds it, inflated (its SHA-256 is the bundle digest): the bytes mounted, or for a
    /// version-1 bundle, whose index is held converted, read again.
    package func withIndexFileBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) throws -> T {
        guard index.formatVersion == 1 else { return try index.withBytes(body) }
        guard let entry = metadata[BundleFormat.indexEntryName] else {
            throw BundleError(.notABundle, "\(label) holds no \(BundleFormat.indexEntryName)")
        }
        return try Self.readIndex(entry, version: 1, from: file, bodyArea: directory.centralDirectoryOffset).withUnsafeBytes(body)
    }

    /// Reads a metadata entry (index, manifest, signature, a delta's entries) in full and checks its CRC-32.
    ///
    /// `signature.json` must be stored (§3.2): it is refused otherwise before anything is inflated, since it is read
    /// before the signature is checked. Others may be deflated up to 1100 to 1 (`index.bin` is read through
    /// ``readIndex(_:version:from:bodyArea:)``, which bounds it further), and all up to `limit` bytes.
    package static func readMetadataEntry(_ entry: ZipCentralEntry, from file: BundleFile, limit: UInt64, bodyArea: UInt64) throws -> [UInt8] {
        guard entry.uncompressedSize <= limit, entry.compressedSize <= limit else {
            throw BundleError(.hostile, "\(entry.name) claims \(entry.uncompressedSize) bytes, over the limit of \(limit)", entry: entry.name)
        }
        if entry.method != 0 && entry.name == BundleFormat.signatureEntryName {
            throw BundleError(
                .hostile, "\(entry.name) is compressed (method \(entry.method)); the format stores it (method 0), so it is refused unread",
                entry: entry.name)
        }
        let dataOffset = try metadataDataOffset(entry, in: file, bodyArea: bodyArea)
        let stored = try file.read(at: dataOffset, count: Int(entry.compressedSize), what: entry.name)
        let bytes: [UInt8]
        switch entry.method {
        case 0:
            guard entry.compressedSize == entry.uncompressedSize else {
                throw BundleError(.corruptDirectory, "\(entry.name) is stored but its sizes differ", entry: entry.name)
            }
            bytes = stored
        case 8:
            guard entry.uncompressedSize <= max(entry.compressedSize, 1) * 1100 else {
                throw BundleError(.hostile, "\(entry.name) claims an absurd compression ratio", entry: entry.name)
            }
            do {
                bytes = try stored.withUnsafeBytes { try RawInflate.inflate($0, expectedSize: Int(entry.uncompressedSize), entry: entry.name) }
            } catch let error as BundleError where error.code == .corruptBody {
                // A damaged metadata stream is a damaged index or manifest, not a body.
                throw BundleError(.corruptIndex, "\(entry.name): \(error.message)", entry: entry.name)
            }
        default:
            throw BundleError(.unsupported, "\(entry.name) uses compression method \(entry.method)", entry: entry.name)
        }
        guard CRC32.checksum(bytes) == entry.crc32 else {
            throw BundleError(.corruptIndex, "\(entry.name) fails its CRC-32 check: it is damaged", entry: entry.name)
        }
        return bytes
    }
}
