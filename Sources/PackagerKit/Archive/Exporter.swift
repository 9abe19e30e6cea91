import Foundation
import OfflineBundle

/// Writes a bundle's contents as a tarball (or zip) for people who want plain files.
public enum Exporter {
    /// The archive formats `export` writes.
    public enum Format: String, CaseIterable, Sendable {
        case tarZstd = "tar.zst"
        case tarGzip = "tar.gz"
        case tarXz = "tar.xz"
        case tar = "tar"
        case zip = "zip"
    }

    /// Exports the bundle at `bundlePath` to `output`.
    ///
    /// The archive holds `manifest.json` and every body, inflated and checked,
    /// under `bodies/<sha256>`, sorted, with fixed timestamps and owners, so
    /// the same bundle always exports to the same bytes. It is written to a
    /// temporary file and renamed into place.
    ///
    /// - Returns: the number of files written.
    @discardableResult
    public static func export(bundle bundlePath: String, to output: String, format: Format) throws -> Int {
        let bundle = try MountedBundle(path: bundlePath, options: .init(verification: .sha256))
        let folder = URL(fileURLWithPath: output).deletingLastPathComponent().path
        let temporary = folder + "/." + URL(fileURLWithPath: output).lastPathComponent + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        TemporaryFiles.shared.register(temporary)
        defer {
            try? FileManager.default.removeItem(atPath: temporary)
            TemporaryFiles.shared.unregister(temporary)
        }
        var count = 0
        do {
            let writer = try LibArchive.ArchiveWriter(path: temporary, format: format)
            for b in 0..<bundle.bodyCount {
                let bytes = try bundle.bodyBytes(at: b, verification: .sha256)
                let name = BundleFormat.bodyPrefix + hexString(bundle.index.body(at: b).sha256)
                try bytes.withUnsafeBytes { try writer.addFile(path: name, bytes: $0) }
                count += 1
            }
            for name in [BundleFormat.indexEntryName, BundleFormat.manifestEntryName, BundleFormat.signatureEntryName] {
                guard let entry = bundle.metadata[name] else { continue }
                let bytes = try MountedBundle.readMetadataEntry(entry, from: bundle.file, limit: 1 << 32, bodyArea: bundle.directory.centralDirectoryOffset)
                try bytes.withUnsafeBytes { try writer.addFile(path: name, bytes: $0) }
                count += 1
            }
            try writer.close()
        }
        guard rename(temporary, output) == 0 else {
            throw PackagerError(.io, "cannot move the export into place at \(output): \(String(cString: strerror(errno)))", subject: output)
        }
        return count
    }
}
