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
        /// HAR 1.2: the entries as requests and answers (``HARExporter``), for tools that replay recordings.
        case har = "har"
        /// WARC 1.1, a gzip member per record (``WARCExporter``), for web archives' tools (pywb, warcio).
        case warc = "warc"
        /// WACZ 1.1.1: the WARC with its CDXJ index, page list and digests in a ZIP (``WACZExporter``), for
        /// replayweb.page and pywb.
        case wacz = "wacz"
    }

    /// Exports the bundle at `bundlePath` to `output`.
    ///
    /// The archive holds `manifest.json`, `index.bin` and `signature.json` (when signed), and every body, inflated and checked,
    /// under `bodies/<sha256>`, sorted, with fixed timestamps and owners, so
    /// the same bundle always exports to the same bytes. It is written to a
    /// temporary file and renamed into place.
    ///
    /// - Returns: the number of files written.
    @discardableResult
    public static func export(bundle bundlePath: String, to output: String, format: Format) throws -> Int {
        // By the archive comment alone: a damaged delta is refused as a delta too, and an unreadable file says why below.
        if MountedBundle.isDelta(atPath: bundlePath) {
            throw PackagerError(
                .invalidInput,
                "\(bundlePath) is a delta bundle: it holds only what changed since another bundle; rebuild the bundle it stands for (packager apply BASE DELTA -o FILE) and export that"
            )
        }
        if format == .har { return try HARExporter.export(bundle: bundlePath, to: output) }
        if format == .warc { return try WARCExporter.export(bundle: bundlePath, to: output).records }
        if format == .wacz { return try WACZExporter.export(bundle: bundlePath, to: output).records }
        let bundle = try MountedBundle(path: bundlePath, options: .init(verification: .sha256))
        // Written through AtomicOutput like a bundle: a temporary file beside the output, synced, renamed, the folder synced.
        let atomic = try AtomicOutput(destination: output)
        // libarchive writes to the AtomicOutput's descriptor until the writer is freed: the output outlives it.
        let count = try withExtendedLifetime(atomic) { () throws -> Int in
            var count = 0
            let writer = try LibArchive.ArchiveWriter(descriptor: atomic.descriptor, format: format)
            for b in 0..<bundle.bodyCount {
                let bytes = try bundle.bodyBytes(at: b, verification: .sha256)
                // Exports name each body by its whole digest, whatever the bundle's version names it.
                let name = "bodies/" + hexString(bundle.index.body(at: b).sha256)
                try bytes.withUnsafeBytes { try writer.addFile(path: name, bytes: $0) }
                count += 1
            }
            // index.bin as mounted (not read and inflated again), the others from the file.
            try bundle.withIndexFileBytes { try writer.addFile(path: BundleFormat.indexEntryName, bytes: $0) }
            count += 1
            for name in [BundleFormat.manifestEntryName, BundleFormat.signatureEntryName] {
                guard let entry = bundle.metadata[name] else { continue }
                let bytes = try MountedBundle.readMetadataEntry(
                    entry, from: bundle.file, limit: name == BundleFormat.manifestEntryName ? MountedBundle.manifestLimit : 1 << 32,
                    bodyArea: bundle.directory.centralDirectoryOffset)
                try bytes.withUnsafeBytes { try writer.addFile(path: name, bytes: $0) }
                count += 1
            }
            try writer.close()
            return count
        }
        try atomic.commit()
        return count
    }
}
