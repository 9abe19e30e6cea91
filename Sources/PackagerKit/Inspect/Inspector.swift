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

    /// Lists the bundle or archive at `path`, every row in memory (``open(path:remote:)`` gives a bundle's rows one
    /// at a time).
    public static func inspect(path: String, remote: RemoteOptions? = nil) throws -> Listing {
        switch try open(path: path, remote: remote) {
        case .bundle(let view): return .bundle(view.listing())
        case .archive(let archive):
            return .archive(archive)
        }
    }

    /// What ``open(path:remote:)`` found: a bundle to list a row at a time, or a plain archive's listing.
    public enum Source: Sendable {
        case bundle(BundleView)
        case archive(ArchiveListing)
    }

    /// Opens the bundle or archive at `path` for listing.
    ///
    /// A packager bundle is listed by request key from its index; any other
    /// archive is listed by entry through libarchive. A ZIP without its end
    /// records that holds a bundle's entries (`index.bin`, `b/…`) is a bundle cut
    /// short, refused as such.
    ///
    /// A URL is a remote bundle, read through `remote` (its index and manifest only).
    public static func open(path: String, remote: RemoteOptions? = nil) throws -> Source {
        if RemoteOptions.isRemote(path) { return .bundle(try BundleView(path: path, remote: remote)) }
        do {
            return .bundle(try BundleView(path: path))
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

    /// Lists a bundle, every row in memory (``BundleView`` gives them one at a time).
    public static func inspectBundle(path: String, remote: RemoteOptions? = nil) throws -> BundleListing {
        try BundleView(path: path, remote: remote).listing()
    }

    /// A mounted bundle listed a row at a time, in key order: the rows are read off its index (what it serves), so a
    /// listing of any size holds one row, and the manifest is only scanned for its summary (a bundle of 1,000,000
    /// entries listed whole took 2.9 GB, its manifest decoded and every row and table cell kept).
    public struct BundleView: Sendable {
        /// The listing without its rows (`entries` empty): what `packager inspect` prints around them.
        public let summary: BundleListing
        /// The number of rows.
        public var count: Int { bundle.entryCount }
        private let bundle: MountedBundle

        /// Mounts the bundle at `path` (a URL is a remote bundle, read through `remote`). A large local index is
        /// inflated into a mapped scratch file in the temporary folder (``MountedBundle/Options/indexScratch``), and into
        /// memory when that folder cannot hold it.
        public init(path: String, remote: RemoteOptions? = nil) throws {
            let bundle =
                RemoteOptions.isRemote(path)
                ? try MountedBundle(location: path, remote: remote)
                : try MountedBundle.mountedWithIndexAside(path, options: .init(), scratchIn: NSTemporaryDirectory(), remote: remote)
            let manifest = try bundle.manifestEntries().remainderSkippingEntries()
            self.bundle = bundle
            // A URL as it may be printed: no credentials, no query (a presigned URL's signature).
            summary = BundleListing(
                path: RemoteObject.shown(path), fileSize: bundle.file.size, digest: bundle.digest, signed: bundle.isSigned, generator: manifest.generator,
                createdAt: manifest.createdAt, formatVersion: bundle.formatVersion, rules: bundle.rules, entries: [], totals: manifest.totals)
        }

        /// The listing with every row, in memory.
        public func listing() -> BundleListing {
            var whole = summary
            whole.entries = (0..<count).map(row)
            return whole
        }

        /// The row at `position` (0 up to ``count``): its media type and redirect target as the manifest writes them,
        /// from the entry's Content-Type and, for a 3xx, its Location resolved against the key.
        public func row(_ position: Int) -> Row {
            let entry = bundle.entry(at: position)
            let key = bundle.key(ofEntryAt: position)
            var contentType: String?
            var location: String?
            for (name, value) in bundle.headers(ofEntryAt: position) {
                if name == "content-type" && contentType == nil { contentType = value }
                if name == "location" && location == nil { location = value }
            }
            return Row(
                key: key, status: entry.status, kind: entry.kind, mediaType: contentType.map(MediaTypes.essence(of:)), size: entry.body?.size,
                storedSize: entry.body?.storedSize, compression: entry.body?.compression, sha256: entry.body?.sha256,
                redirectTo: (300...399).contains(entry.status) ? location.flatMap { URLReference.resolve($0, against: key) } : nil)
        }
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
