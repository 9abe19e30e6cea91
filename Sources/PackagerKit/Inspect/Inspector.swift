import Foundation
import OfflineBundle

/// Lists what a bundle, or any archive libarchive reads, holds: the model behind `packager inspect`.
public enum Inspector {
    /// One request key of a bundle.
    public struct Row: Codable, Sendable, Equatable {
        public var key: String
        public var status: Int
        public var kind: EntryKind
        public var mediaType: String?
        public var size: UInt64?
        public var storedSize: UInt64?
        public var compression: BodyCompression?
        public var sha256: String?
        public var redirectTo: String?
    }

    /// A bundle's listing.
    public struct BundleListing: Codable, Sendable {
        public var path: String
        public var fileSize: UInt64
        public var digest: String
        public var signed: Bool
        public var generator: String
        public var createdAt: String?
        /// The bundle format version (1 or 2).
        public var formatVersion: Int
        /// The declaration's rules the bundle carries.
        public var rules: BundleRules
        public var dropQueryParameters: [String] { rules.dropQueryParameters }
        public var entries: [Row]
        public var totals: ManifestTotals
    }

    /// One entry of a plain archive.
    public struct ArchiveRow: Codable, Sendable, Equatable {
        public var path: String
        public var type: String
        public var size: Int64
    }

    /// A plain archive's listing.
    public struct ArchiveListing: Codable, Sendable {
        public var path: String
        public var format: String
        public var filter: String
        public var entries: [ArchiveRow]
        public var totalSize: Int64
    }

    /// What ``inspect(path:)`` found.
    public enum Listing: Sendable {
        case bundle(BundleListing)
        case archive(ArchiveListing)
    }

    /// Lists the bundle or archive at `path`.
    ///
    /// A packager bundle is listed by request key from its manifest; any other
    /// archive is listed by entry through libarchive. A ZIP without its end
    /// records that holds a bundle's entries (`index.bin`, `b/…`) is a bundle cut
    /// short, refused as such.
    ///
    /// A URL is a remote bundle, read through `remote` (its index and manifest only).
    public static func inspect(path: String, remote: RemoteOptions? = nil) throws -> Listing {
        if RemoteOptions.isRemote(path) { return .bundle(try inspectBundle(path: path, remote: remote)) }
        do {
            return .bundle(try inspectBundle(path: path))
        } catch let error as BundleError where error.code == .notABundle {
            let archive = try inspectArchive(path: path)
            // A bundle cut short (its end records gone) still reads as a stream of ZIP entries: listing its `b/…` files
            // as a plain archive would hide that it is a damaged bundle. (A whole ZIP of the same names, a bundle
            // extracted and zipped again, or a tarball `packager export` wrote, is an archive like any other.)
            if archive.format.uppercased().hasPrefix("ZIP"), archive.entries.contains(where: { looksLikeBundleEntry($0.path) }),
                (try? ZipDirectory.locate(in: BundleFile(path: path))) == nil
            {
                throw BundleError(
                    .truncated,
                    "\(path) holds a packager bundle's entries (index.bin, b/…) but cannot be mounted: \(error.message); it is damaged or cut short")
            }
            return .archive(archive)
        }
    }

    /// Whether an archive's entry name is one only a packager bundle writes: `index.bin`, or `b/` and 16 to 64
    /// lowercase hexadecimal digits (docs/FORMAT.md §2.1).
    static func looksLikeBundleEntry(_ name: String) -> Bool {
        name == BundleFormat.indexEntryName || BundleFormat.isBodyName(name)
    }

    /// Lists a bundle.
    public static func inspectBundle(path: String, remote: RemoteOptions? = nil) throws -> BundleListing {
        let bundle = try MountedBundle(location: path, remote: remote)
        let manifest = try bundle.manifest()
        // The digest from the index: a version-3 manifest leaves it out.
        let entries = bundle.entries
        let rows = manifest.entries.enumerated().map { position, item in
            Row(
                key: item.key, status: item.status, kind: item.kind, mediaType: item.mediaType, size: item.body?.size, storedSize: item.body?.storedSize,
                compression: item.body?.compression,
                sha256: item.body?.sha256 ?? (position < entries.count && entries[position].key == item.key ? entries[position].body?.sha256 : nil),
                redirectTo: item.redirectTo)
        }
        // A URL as it may be printed: no credentials, no query (a presigned URL's signature).
        return BundleListing(
            path: RemoteObject.shown(path), fileSize: bundle.file.size, digest: bundle.digest, signed: bundle.isSigned, generator: manifest.generator,
            createdAt: manifest.createdAt, formatVersion: bundle.formatVersion, rules: bundle.rules, entries: rows, totals: manifest.totals)
    }

    /// Lists any archive libarchive reads.
    public static func inspectArchive(path: String) throws -> ArchiveListing {
        let reader = try LibArchive.Reader(path: path)
        var rows = [ArchiveRow]()
        while let header = try reader.next() {
            let type: String
            switch header.type {
            case .file: type = "file"
            case .directory: type = "directory"
            case .symlink: type = "symlink -> \(header.linkTarget ?? "?")"
            case .hardlink: type = "hardlink -> \(header.linkTarget ?? "?")"
            case .other: type = "other"
            }
            rows.append(ArchiveRow(path: header.path, type: type, size: max(header.size, 0)))
        }
        return ArchiveListing(path: path, format: reader.formatName, filter: reader.filterName, entries: rows, totalSize: rows.reduce(0) { $0 + $1.size })
    }
}
