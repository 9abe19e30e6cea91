import Foundation

extension MountedBundle {
    /// Reads and decodes `manifest.json` (the loader itself never needs it; tools do).
    ///
    /// - Throws: ``BundleError`` with code `.corruptIndex` when the bundle has no manifest or it cannot be decoded.
    package func manifest() throws -> Manifest {
        guard let entry = metadata[BundleFormat.manifestEntryName] else {
            throw BundleError(.corruptIndex, "the bundle has no manifest.json", entry: BundleFormat.manifestEntryName)
        }
        let bytes = try Self.readMetadataEntry(entry, from: file, limit: 1 << 32, bodyArea: directory.centralDirectoryOffset)
        do {
            return try JSONDecoder().decode(Manifest.self, from: Data(bytes))
        } catch {
            throw BundleError(.corruptIndex, "manifest.json cannot be decoded: \(error)", entry: BundleFormat.manifestEntryName)
        }
    }
}
