import Crypto
import Foundation

extension MountedBundle {
    /// Reads and decodes `manifest.json`: every entry with its headers, media type, body and fetch time.
    ///
    /// The loader itself never needs it (it answers from `index.bin`); tools and reports do.
    ///
    /// The manifest is checked against the SHA-256 that `index.bin` records for it before it is decoded, so a
    /// manifest swapped after signing is refused, not trusted.
    ///
    /// - Throws: ``BundleError`` with code `.corruptIndex` when the bundle has no manifest, it does not match the
    ///   index's digest of it, or it cannot be decoded.
    public func manifest() throws -> Manifest {
        let bytes = try manifestBytes()
        do {
            return try JSONDecoder().decode(Manifest.self, from: Data(bytes))
        } catch {
            throw BundleError(.corruptIndex, "manifest.json cannot be decoded: \(error)", entry: BundleFormat.manifestEntryName)
        }
    }

    /// The most `manifest.json` may inflate to in this bundle: 1 MiB and 64 KiB per entry (a manifest line is a few
    /// hundred bytes), and never past ``manifestLimit``.
    package var manifestLimitForEntries: UInt64 { min(Self.manifestLimit, (1 << 20) + UInt64(entryCount) * (64 << 10)) }

    /// The bytes of `manifest.json`, checked against the SHA-256 `index.bin` records for it.
    package func manifestBytes() throws -> [UInt8] {
        // A delta may carry its manifest as a patch of its base's.
        if let entry = manifestPatch, let base {
            let limit = manifestLimitForEntries
            let stored = try Self.readMetadataEntry(entry, from: file, limit: limit, bodyArea: directory.centralDirectoryOffset)
            guard stored.count > 1 else { throw BundleError(.corruptIndex, "manifest.patch is empty", entry: entry.name) }
            // The level byte is what `packager apply` deflates the rebuilt manifest at; the patch follows it.
            let bytes = try BinaryPatch.apply(
                Array(stored.dropFirst()), to: try base.manifestBytes(), limit: Int(limit), what: BundleFormat.manifestEntryName)
            guard Array(SHA256.hash(data: bytes)) == index.manifestSHA256 else {
                throw BundleError(
                    .corruptIndex, "manifest.json rebuilt from the delta's patch does not match the SHA-256 index.bin records for it",
                    entry: BundleFormat.manifestEntryName)
            }
            return bytes
        }
        guard let entry = metadata[BundleFormat.manifestEntryName] else {
            throw BundleError(.corruptIndex, "the bundle has no manifest.json", entry: BundleFormat.manifestEntryName)
        }
        // A deflated manifest is inflated once into SHA-256 alone, keeping nothing, and compared with the index's
        // digest of it before it is inflated into memory: a swapped-in bomb costs a chunk, not its size. Its size is
        // also bounded by the entries it can describe.
        let limit = manifestLimitForEntries
        if entry.method == 8 { try checkDeflatedManifestDigest(entry, limit: limit) }
        let bytes = try Self.readMetadataEntry(entry, from: file, limit: limit, bodyArea: directory.centralDirectoryOffset)
        guard Array(SHA256.hash(data: bytes)) == index.manifestSHA256 else {
            throw BundleError(
                .corruptIndex, "manifest.json does not match the SHA-256 index.bin records for it: it was altered", entry: BundleFormat.manifestEntryName)
        }
        return bytes
    }

    /// Inflates a deflated `manifest.json` 64 KiB at a time into SHA-256 and compares it with the index's digest.
    func checkDeflatedManifestDigest(_ entry: ZipCentralEntry, limit: UInt64) throws {
        guard try deflatedManifestMatchesDigest(entry, limit: limit) else {
            throw BundleError(
                .corruptIndex, "manifest.json does not match the SHA-256 index.bin records for it: it was altered", entry: BundleFormat.manifestEntryName)
        }
    }

    /// Whether a deflated `manifest.json`, inflated 64 KiB at a time into SHA-256 alone, is the one the index's digest
    /// names.
    package func deflatedManifestMatchesDigest(_ entry: ZipCentralEntry, limit: UInt64) throws -> Bool {
        let name = BundleFormat.manifestEntryName
        guard entry.uncompressedSize <= limit, entry.compressedSize <= limit else {
            throw BundleError(.hostile, "\(name) claims \(entry.uncompressedSize) bytes, over the limit of \(limit) for \(entryCount) entries", entry: name)
        }
        let dataOffset = try Self.metadataDataOffset(entry, in: file, bodyArea: directory.centralDirectoryOffset)
        // A remote bundle's manifest comes in one request.
        try file.prefetch(dataOffset..<(dataOffset + entry.compressedSize), whole: true)
        let stream = try InflateStream(entry: name)
        var digest = SHA256()
        var offset: UInt64 = 0
        do {
            while !stream.ended {
                if stream.needsInput {
                    guard offset < entry.compressedSize else { break }
                    let count = Int(min(64 << 10, entry.compressedSize - offset))
                    try stream.feed(try file.read(at: dataOffset + offset, count: count, what: name))
                    offset += UInt64(count)
                }
                let piece = try stream.pull(max: 64 << 10, limit: entry.uncompressedSize)
                digest.update(data: piece)
            }
        } catch let error as BundleError where error.code == .corruptBody {
            // A damaged metadata stream is a damaged manifest, not a body (docs/FORMAT.md §8.1).
            throw BundleError(.corruptIndex, "\(name): \(error.message)", entry: name)
        }
        return Array(digest.finalize()) == index.manifestSHA256
    }
}
