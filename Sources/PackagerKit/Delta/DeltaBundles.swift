import Crypto
import Foundation
import OfflineBundle

/// Deltas between releases (docs/FORMAT.md §12): `packager delta` writes one, `packager apply` rebuilds the release it
/// stands for, byte for byte.
///
/// A delta holds the bodies of the new release that the old one lacks (or stores otherwise), the new release's
/// `index.bin`, `manifest.json` and `signature.json` exactly as they are, and `delta.json`. Mounted over the old
/// release (`MountedBundle(deltaPath:base:)`) it answers as the new one does; applied to it, it gives the new file back,
/// so the new release's signature holds.
public enum DeltaBundles {
    /// What a delta holds, against the bundle it stands for.
    public struct Summary: Sendable {
        public var info: DeltaInfo
        /// The delta file's size.
        public var size: UInt64
    }

    /// Writes to `output` the delta that turns the bundle at `oldPath` into the one at `newPath`.
    ///
    /// The new bundle must be rebuildable from the delta byte for byte (a bundle packager wrote); this is checked
    /// before the delta is kept, by rebuilding it once.
    ///
    /// - Throws: ``PackagerError`` when a bundle does not mount, the new one is a delta or of format version 1, it
    ///   cannot be rebuilt byte for byte, or the output cannot be written (nothing is left at `output` then).
    @discardableResult
    public static func make(old oldPath: String, new newPath: String, to output: String) throws -> Summary {
        let old = try mounted(oldPath)
        let new = try mounted(newPath)
        guard new.formatVersion == Int(BundleFormat.version) else {
            throw PackagerError(.invalidInput, "\(newPath) is a bundle of format version \(new.formatVersion); deltas are made to version-2 bundles")
        }
        let (added, changed, removed) = keyChanges(old: old, new: new)
        // The new bodies the old bundle holds stored alike are read from it; the others are carried.
        var carried: [Int] = []
        var j = 0
        for i in 0..<new.bodyCount {
            let record = new.bodyRecord(at: i)
            var found: IndexBodyRecord?
            while j < old.bodyCount {
                let candidate = old.bodyRecord(at: j)
                if candidate.sha256.lexicographicallyPrecedes(record.sha256) {
                    j += 1
                } else {
                    found = candidate
                    break
                }
            }
            guard let found, found.sha256 == record.sha256, found.compression == record.compression, found.storedSize == record.storedSize,
                found.size == record.size, found.crc32 == record.crc32, found.storedCRC32 == record.storedCRC32
            else {
                carried.append(i)
                continue
            }
        }
        let newFile = try fileDigest(newPath)
        guard let indexEntry = new.metadata[BundleFormat.indexEntryName] else {
            throw PackagerError(.invalidInput, "\(newPath) holds no \(BundleFormat.indexEntryName)")
        }
        let info = DeltaInfo(
            base: old.digest, target: .init(digest: new.digest, size: newFile.size, sha256: newFile.sha256, bodyArea: indexEntry.localHeaderOffset),
            carried: carried.count, reused: new.bodyCount - carried.count, added: added, changed: changed, removed: removed)

        let out = try AtomicOutput(destination: output)
        let writer = ZipWriter(output: out)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        let digests = carried.map { new.bodyRecord(at: $0).sha256 }
        for (n, (i, digits)) in Swift.zip(carried, BundleWriter.bodyNameDigits(digests)).enumerated() {
            let record = new.bodyRecord(at: i)
            let name = BundleFormat.bodyEntryName(sha256: digests[n], digits: digits)
            _ = try writer.beginEntry(name: name, method: record.compression.rawValue, crc32: record.crc32, compressedSize: record.storedSize, size: record.size)
            try copyStored(of: i, in: new, to: out, buffer: &buffer)
        }
        for name in [BundleFormat.indexEntryName, BundleFormat.manifestEntryName, BundleFormat.signatureEntryName] {
            try copyMetadata(name, of: new, to: writer, output: out)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = Array(try encoder.encode(info))
        try writer.addEntry(name: BundleFormat.deltaEntryName, method: 0, crc32: CRC32.checksum(json), size: UInt64(json.count), data: json)
        try writer.finish(comment: Array((BundleFormat.deltaCommentPrefix + "sha256:" + new.digest + " base:" + old.digest).utf8))
        let size = out.offset
        try out.flush()
        // Rebuilt once from what was just written: a new bundle the rebuild cannot reproduce gets no delta.
        let check = try MountedBundle(deltaPath: out.temporaryPath, base: old)
        let scratch = try ScratchFolder(besideOutput: output)
        defer { scratch.remove() }
        _ = try rebuild(check, to: scratch.path + "/rebuilt.zip", what: newPath)
        try out.commit()
        return Summary(info: info, size: size)
    }

    /// Writes to `output` the bundle the delta chain `paths` stands for (the newest delta first, the bundle the oldest
    /// delta was made over last, as `MountedBundle.mount(paths:)` takes them); it is the new bundle byte for byte.
    ///
    /// - Throws: ``PackagerError`` when the chain does not mount (a wrong base is named), or the rebuilt file is not
    ///   the one the delta stands for (nothing is left at `output` then).
    @discardableResult
    public static func apply(_ paths: [String], to output: String) throws -> DeltaInfo {
        let bundles: [MountedBundle]
        do {
            bundles = try MountedBundle.mount(paths: paths)
        } catch let error as BundleError {
            throw PackagerError(.invalidInput, error.message)
        }
        guard bundles.count == 1, let delta = bundles.first?.delta, let mounted = bundles.first else {
            throw PackagerError(.invalidInput, "apply takes a bundle and the deltas made over it, one over the other")
        }
        try rebuild(mounted, to: output, what: paths.first ?? "")
        return delta
    }

    /// Writes the bundle a mounted delta stands for and checks it is that bundle, byte for byte, before keeping it.
    @discardableResult
    private static func rebuild(_ mounted: MountedBundle, to output: String, what: String) throws -> UInt64 {
        guard let info = mounted.delta else { throw PackagerError(.invalidInput, "\(what) is not a delta") }
        let out = try AtomicOutput(destination: output)
        out.hashing()
        let writer = ZipWriter(output: out)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        let digests = (0..<mounted.bodyCount).map { mounted.bodyRecord(at: $0).sha256 }
        for (i, digits) in BundleWriter.bodyNameDigits(digests).enumerated() {
            let record = mounted.bodyRecord(at: i)
            let name = BundleFormat.bodyEntryName(sha256: digests[i], digits: digits)
            _ = try writer.beginEntry(name: name, method: record.compression.rawValue, crc32: record.crc32, compressedSize: record.storedSize, size: record.size)
            try copyStored(of: i, in: mounted, to: out, buffer: &buffer)
        }
        for name in [BundleFormat.indexEntryName, BundleFormat.manifestEntryName, BundleFormat.signatureEntryName] {
            try copyMetadata(name, of: mounted, to: writer, output: out)
        }
        try writer.finish(comment: Array((BundleFormat.commentPrefix + "sha256:" + mounted.digest).utf8))
        guard out.offset == info.target.size, out.sha256 == info.target.sha256 else {
            throw PackagerError(
                .invalidInput,
                "the bundle rebuilt from \(what) is not the one the delta stands for (\(out.offset) bytes, sha256:\(out.sha256?.prefix(16) ?? "")…; wanted \(info.target.size) bytes, sha256:\(info.target.sha256.prefix(16))…); nothing was written"
            )
        }
        try out.commit()
        return out.offset
    }

    /// Copies body `i`'s stored bytes, checked against the stored CRC-32 its record gives, as they go.
    private static func copyStored(of i: Int, in bundle: MountedBundle, to out: AtomicOutput, buffer: inout [UInt8]) throws {
        let record = bundle.bodyRecord(at: i)
        let file = bundle.bodyFile(i)
        let name = bundle.bodyName(record)
        // The local header first: the bytes after it are the body only when it agrees with the index.
        let headerLength = Int(record.dataOffset - record.localHeaderOffset)
        try bundle.checkLocalHeader(try file.read(at: record.localHeaderOffset, count: headerLength, what: "body \(name)"), of: record)
        var crc: UInt32 = 0
        var done: UInt64 = 0
        while done < record.storedSize {
            let count = Int(min(UInt64(buffer.count), record.storedSize - done))
            try buffer.withUnsafeMutableBytes { raw in
                let part = UnsafeMutableRawBufferPointer(rebasing: raw[0..<count])
                try file.readFully(into: part, at: record.dataOffset + done, what: "body \(name)")
                crc = CRC32.checksum(UnsafeRawBufferPointer(part), continuing: crc)
                try out.write(UnsafeRawBufferPointer(part))
            }
            done += UInt64(count)
        }
        let expected = bundle.formatVersion == 1 ? record.crc32 : record.storedCRC32
        guard record.compression == .deflate && bundle.formatVersion == 1 || crc == expected else {
            throw PackagerError(.invalidInput, "body \(name) is damaged (its stored bytes fail their CRC-32); nothing was written")
        }
    }

    /// Copies a metadata entry's stored bytes, as they are (same method, CRC and sizes), when the bundle has it.
    private static func copyMetadata(_ name: String, of bundle: MountedBundle, to writer: ZipWriter, output: AtomicOutput) throws {
        guard let entry = bundle.metadata[name] else { return }
        let offset = try MountedBundle.metadataDataOffset(entry, in: bundle.file, bodyArea: bundle.directory.centralDirectoryOffset)
        let bytes = try bundle.file.read(at: offset, count: Int(entry.compressedSize), what: name)
        try writer.addEntry(name: name, method: entry.method, crc32: entry.crc32, size: entry.uncompressedSize, data: bytes)
    }

    /// Keys added, changed (status, headers or body) and removed from `old` to `new`.
    private static func keyChanges(old: MountedBundle, new: MountedBundle) -> (added: Int, changed: Int, removed: [String]) {
        var added = 0
        var changed = 0
        var removed: [String] = []
        var i = 0
        var j = 0
        let oldCount = old.entryCount
        let newCount = new.entryCount
        while i < oldCount || j < newCount {
            let oldKey = i < oldCount ? old.key(ofEntryAt: i) : nil
            let newKey = j < newCount ? new.key(ofEntryAt: j) : nil
            if let oldKey, let newKey, oldKey == newKey {
                let a = old.entry(at: i)
                let b = new.entry(at: j)
                if a.status != b.status || a.body?.sha256 != b.body?.sha256 || a.kind != b.kind
                    || !old.headers(ofEntryAt: i).elementsEqual(new.headers(ofEntryAt: j), by: { $0.name == $1.name && $0.value == $1.value })
                {
                    changed += 1
                }
                i += 1
                j += 1
            } else if let oldKey, newKey == nil || keyOrder(oldKey, newKey!) {
                removed.append(oldKey)
                i += 1
            } else {
                added += 1
                j += 1
            }
        }
        return (added, changed, removed)
    }

    /// The order of keys in an index: by their UTF-8 bytes.
    private static func keyOrder(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    private static func mounted(_ path: String) throws -> MountedBundle {
        do {
            return try MountedBundle(path: path)
        } catch let error as BundleError {
            throw PackagerError(.invalidInput, error.message, subject: path)
        }
    }

    /// A file's size and SHA-256.
    private static func fileDigest(_ path: String) throws -> (size: UInt64, sha256: String) {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw PackagerError(.io, "cannot read \(path)", subject: path) }
        defer { try? handle.close() }
        var hasher = SHA256()
        var size: UInt64 = 0
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            hasher.update(data: chunk)
            size += UInt64(chunk.count)
        }
        return (size, hexString(Array(hasher.finalize())))
    }
}
