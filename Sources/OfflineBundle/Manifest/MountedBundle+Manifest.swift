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
        guard let entry = metadata[BundleFormat.manifestEntryName] else {
            throw BundleError(.corruptIndex, "the bundle has no manifest.json", entry: BundleFormat.manifestEntryName)
        }
        let bytes = try Self.readMetadataEntry(entry, from: file, limit: Self.manifestLimit, bodyArea: directory.centralDirectoryOffset)
        guard Array(SHA256.hash(data: bytes)) == index.manifestSHA256 else {
            throw BundleError(
                .corruptIndex, "manifest.json does not match the SHA-256 index.bin records for it: it was altered", entry: BundleFormat.manifestEntryName)
        }
        do {
            return try JSONDecoder().decode(Manifest.self, from: Data(bytes))
        } catch {
            throw BundleError(.corruptIndex, "manifest.json cannot be decoded: \(error)", entry: BundleFormat.manifestEntryName)
        }
    }
}
