import Crypto
import Foundation
import OfflineBundle

/// Deltas between releases (docs/FORMAT.md §12): `packager delta` writes one, `packager apply` rebuilds the release it
/// stands for, byte for byte.
///
/// A delta holds the bodies of the new release that the old one lacks (or stores otherwise), edited pages as patches
/// of their old bodies, the new `index.bin` and `manifest.json` whole or as an edit or patch of the old ones, the new
/// `signature.json`, and `delta.json`. Mounted over the old release (`MountedBundle.mount(.delta(.file(DELTA), over: .file(BASE)))`) it answers as
/// the new one does; applied to it, it gives the new file back, so the new release's signature holds.
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
    /// With `wholeBodies`, every changed body is carried as the new bundle stores it. By default a changed body is a
    /// patch of its old one when that is much smaller: the delta is then far smaller, and mounted over the old bundle
    /// it answers gzip requests for those bodies with a stream the runtime deflated (the same content, other bytes);
    /// identity answers, and what `apply` rebuilds, are the new bundle's bytes either way.
    ///
    /// - Throws: ``PackagerError`` when a bundle does not mount, the new one is a delta or of format version 1, it
    ///   cannot be rebuilt byte for byte, or the output cannot be written (nothing is left at `output` then).
    @discardableResult
    public static func make(old oldPath: String, new newPath: String, to output: String, wholeBodies: Bool = false) throws -> Summary {
        try make(old: try mount(oldPath), new: newPath, to: output, wholeBodies: wholeBodies)
    }

    /// How a delta holds its target's `index.bin`: the smallest form, or one form (the format's test vectors show each).
    package enum IndexForm: Sendable {
        case smallest, whole, patch, edit
    }

    /// ``make(old:new:to:wholeBodies:)`` from a bundle mounted already (`refresh --delta-out` mounts the bundle it
    /// replaces before it replaces it).
    @discardableResult
    public static func make(old: MountedBundle, new newPath: String, to output: String, wholeBodies: Bool = false) throws -> Summary {
        try make(old: old, new: newPath, to: output, wholeBodies: wholeBodies, indexForm: .smallest)
    }

    package static func make(old: MountedBundle, new newPath: String, to output: String, wholeBodies: Bool, indexForm: IndexForm) throws -> Summary {
        let new = try mount(newPath)
        guard new.formatVersion >= 2 else {
            throw PackagerError(
                .invalidInput, "\(newPath) is a bundle of format version \(new.formatVersion); deltas are made to bundles of versions 2 and 3")
        }
        let (added, changed, removed, sources) = keyChanges(old: old, new: new)
        // The new bodies the old bundle holds stored alike are read from it; a changed page's body is a patch of its old
        // one when that is much smaller (and the writer's deflate stream can be made again from it); the others are
        // carried.
        var carried: [Int] = []
        var patches: [(body: Int, data: [UInt8])] = []
        // Compared as each index records its bodies, as a reader compares them (§12.5).
        var j = 0
        for i in 0..<new.bodyCount {
            let record = new.index.body(at: i)
            while j < old.bodyCount, old.index.body(at: j).sha256.lexicographicallyPrecedes(record.sha256) { j += 1 }
            if j < old.bodyCount, old.index.body(at: j).isStoredAlike(record) { continue }
            if !wholeBodies, let source = sources[i], let data = try patch(i, of: new, from: source, of: old) {
                patches.append((i, data))
            } else {
                carried.append(i)
            }
        }
        let newFile = try fileDigest(newPath)
        guard let indexEntry = new.metadata[BundleFormat.indexEntryName] else {
            throw PackagerError(.invalidInput, "\(newPath) holds no \(BundleFormat.indexEntryName)")
        }
        // A deflated index.bin is made again from its bytes when the delta holds it as an edit or a patch: at the level
        // that reproduces its stream (nil when none does; then it goes whole).
        let indexLevel = try storedLevel(of: indexEntry, content: new.index.bytes, in: new, zlibFirst: true, likely: BundleWriter.indexLevel)
        let info = DeltaInfo(
            base: old.digest,
            target: .init(
                digest: new.digest, size: newFile.size, sha256: newFile.sha256, bodyArea: indexEntry.localHeaderOffset,
                formatVersion: new.formatVersion == 2 ? nil : UInt32(new.formatVersion), indexLevel: indexLevel == 0 ? nil : indexLevel),
            carried: carried.count, reused: new.bodyCount - carried.count - patches.count, patched: patches.count, added: added, changed: changed,
            removed: removed)

        let out = try AtomicOutput(destination: output)
        let writer = ZipWriter(output: out)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        // Names hold the digits their neighbours among all of NEW's bodies call for (§2.1), as NEW names them: a reader
        // matches each record to the next carried or patched name its digest starts with, so no name may also be the
        // prefix of a body read from the base.
        let newDigits = BundleWriter.bodyNameDigits((0..<new.bodyCount).map { new.bodyRecord(at: $0).sha256 })
        let digests = carried.map { new.bodyRecord(at: $0).sha256 }
        for (n, i) in carried.enumerated() {
            let record = new.bodyRecord(at: i)
            let name = BundleFormat.bodyEntryName(sha256: digests[n], digits: newDigits[i])
            _ = try writer.beginEntry(
                name: name, method: record.compression.rawValue, crc32: record.crc32, compressedSize: record.storedSize, size: record.size)
            try copyStored(of: i, in: new, to: out, buffer: &buffer)
        }
        for patch in patches {
            let name = MountedBundle.patchPrefix + String(hexString(new.bodyRecord(at: patch.body).sha256).prefix(newDigits[patch.body]))
            try addDeflated(name, patch.data, to: writer)
        }
        // index.bin as an edit of the old one (what it keeps of its bodies and entries), or a byte patch of it, whichever
        // is smaller, else as it is; an edit that does not make the index again byte for byte is not used.
        var choices: [(name: String, size: Int, data: [UInt8]?)] = [(BundleFormat.indexEntryName, Int(indexEntry.compressedSize), nil)]
        if indexLevel != nil {
            let indexPatch = BinaryDiff.make(source: old.index.bytes, target: new.index.bytes)
            choices.append((MountedBundle.indexPatchName, try deflatedSize(indexPatch), indexPatch))
            let edit = try? IndexEdit.make(base: old.index, target: new.index)
            let editHolds = edit.map { (try? IndexEdit.apply($0, to: old.index, version: UInt32(new.formatVersion))) == new.index.bytes } ?? false
            if editHolds, let edit { choices.append((MountedBundle.indexEditName, try deflatedSize(edit), edit)) }
        }
        // A reader refuses an edit or a patch past its limit (it reads them before the signature): then the index goes whole.
        let limit = Int(MountedBundle.indexLimit(old))
        choices.removeAll { $0.data.map { $0.count > limit } ?? false }
        let named: String? =
            switch indexForm {
            case .smallest: nil
            case .whole: BundleFormat.indexEntryName
            case .patch: MountedBundle.indexPatchName
            case .edit: MountedBundle.indexEditName
            }
        let chosen =
            try named.map { name in
                guard let choice = choices.first(where: { $0.name == name }) else {
                    throw PackagerError(.invalidInput, "the index of \(newPath) cannot be held as \(name)")
                }
                return choice
            } ?? choices.min { $0.size < $1.size }!
        if let data = chosen.data {
            try addDeflated(chosen.name, data, to: writer)
        } else {
            try copyMetadata(BundleFormat.indexEntryName, of: new, to: writer, output: out)
        }
        if let manifestPatch = try manifestPatch(of: new, from: old), let stored = new.metadata[BundleFormat.manifestEntryName],
            try deflatedSize(manifestPatch) < Int(stored.compressedSize)
        {
            try addDeflated(MountedBundle.manifestPatchName, manifestPatch, to: writer)
        } else {
            try copyMetadata(BundleFormat.manifestEntryName, of: new, to: writer, output: out)
        }
        try copyMetadata(BundleFormat.signatureEntryName, of: new, to: writer, output: out)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = Array(try encoder.encode(info))
        try writer.addEntry(name: BundleFormat.deltaEntryName, method: 0, crc32: CRC32.checksum(json), size: UInt64(json.count), data: json)
        try writer.finish(comment: Array((BundleFormat.deltaCommentPrefix(format: info.format) + "sha256:" + new.digest + " base:" + old.digest).utf8))
        let size = out.offset
        try out.flush()
        // Rebuilt once from what was just written: a new bundle the rebuild cannot reproduce gets no delta.
        do {
            try verify(try MountedBundle(deltaPath: out.temporaryPath, base: old), what: newPath)
        } catch {
            // Not damage: a new bundle whose streams another writer made (§12.6). Said so, and nothing is kept.
            throw PackagerError(.invalidInput, "a delta cannot rebuild \(newPath) byte for byte, so none was written (\(error))")
        }
        try out.commit()
        return Summary(info: info, size: size)
    }

    /// Writes to `output` the bundle the delta chain `paths` stands for (the newest delta first, the bundle the oldest
    /// delta was made over last, as `packager serve` takes them); it is the new bundle byte for byte.
    ///
    /// - Throws: ``BundleError`` when the chain does not mount (`.wrongBase` names a wrong base; a damaged delta or
    ///   base is named by its code); ``PackagerError`` (`.invalidInput`) when a path after the first is not a delta,
    ///   (`.integrity`) when the rebuilt file is not the one the delta stands for. Nothing is left at `output` then.
    @discardableResult
    public static func apply(_ paths: [String], to output: String) throws -> DeltaInfo {
        let bundles = try MountedBundle.mount(paths: paths)
        guard bundles.count == 1, let delta = bundles.first?.delta, let mounted = bundles.first else {
            let notDeltas = paths.dropLast().filter { !MountedBundle.isDelta(atPath: $0) }
            throw PackagerError(
                .invalidInput,
                "apply takes a bundle and the deltas made over it, one over the other"
                    + (notDeltas.isEmpty ? "" : ": \(notDeltas.joined(separator: ", ")) \(notDeltas.count == 1 ? "is" : "are") not a delta"))
        }
        let out = try AtomicOutput(destination: output)
        try rebuild(mounted, into: out, what: paths.first ?? "")
        try out.commit()
        return delta
    }

    /// Rebuilds the bundle a mounted delta stands for without writing it, and checks it is that bundle byte for byte
    /// (its size, SHA-256 and body area, as `delta.json` gives them): what `apply` would refuse, `packager check`
    /// reports.
    ///
    /// - Throws: ``PackagerError`` (`.integrity`) naming what differs, or the error that stopped the rebuild.
    package static func verify(_ mounted: MountedBundle, what: String) throws {
        try rebuild(mounted, into: .discarding(), what: what)
    }

    /// Writes into `out` the bundle a mounted delta stands for and checks it is that bundle, byte for byte; the caller
    /// commits `out` (or discards it) after.
    private static func rebuild(_ mounted: MountedBundle, into out: AtomicOutput, what: String) throws {
        guard let info = mounted.delta else { throw PackagerError(.invalidInput, "\(what) is not a delta") }
        out.hashing()
        let writer = ZipWriter(output: out)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        let digests = (0..<mounted.bodyCount).map { mounted.index.body(at: $0).sha256 }
        for (i, digits) in BundleWriter.bodyNameDigits(digests).enumerated() {
            // The target's own record: a body rebuilt from a patch is deflated again as its writer did.
            let record = mounted.index.body(at: i)
            let name = BundleFormat.bodyEntryName(sha256: digests[i], digits: digits)
            _ = try writer.beginEntry(
                name: name, method: record.compression.rawValue, crc32: record.crc32, compressedSize: record.storedSize, size: record.size)
            if let level = mounted.rebuiltLevel(i) {
                let content = try mounted.bodyBytes(at: i, verification: .crc32)
                let stored = try deflate(content, level: level, what: "the level byte of the patch of body \(name)")
                guard UInt64(stored.count) == record.storedSize, CRC32.checksum(stored) == record.storedCRC32 else {
                    throw PackagerError(.integrity, "body \(name) cannot be deflated again as the bundle stored it: the delta is damaged")
                }
                try out.write(stored)
            } else {
                try copyStored(of: i, in: mounted, to: out, buffer: &buffer)
            }
        }
        // The body area ends where index.bin's local header starts.
        guard out.offset == info.target.bodyArea else {
            throw PackagerError(
                .integrity,
                "the bodies rebuilt from \(what) end at byte \(out.offset), where delta.json's target.bodyArea says \(info.target.bodyArea): the delta is damaged"
            )
        }
        if mounted.metadata[BundleFormat.indexEntryName] != nil {
            try copyMetadata(BundleFormat.indexEntryName, of: mounted, to: writer, output: out)
        } else {
            let level = info.target.indexLevel ?? 0
            try writer.addEntry(
                name: BundleFormat.indexEntryName, method: level == 0 ? 0 : 8, crc32: CRC32.checksum(mounted.index.bytes),
                size: UInt64(mounted.index.bytes.count), data: try deflate(mounted.index.bytes, level: level, what: "delta.json's target.indexLevel"))
        }
        if mounted.metadata[BundleFormat.manifestEntryName] != nil {
            try copyMetadata(BundleFormat.manifestEntryName, of: mounted, to: writer, output: out)
        } else {
            let content = try mounted.manifestBytes()
            let level = try manifestLevel(of: mounted)
            try writer.addEntry(
                name: BundleFormat.manifestEntryName, method: level == 0 ? 0 : 8, crc32: CRC32.checksum(content), size: UInt64(content.count),
                data: try deflate(content, level: level, what: "the level byte of \(MountedBundle.manifestPatchName)"))
        }
        try copyMetadata(BundleFormat.signatureEntryName, of: mounted, to: writer, output: out)
        try writer.finish(comment: Array((BundleFormat.commentPrefix(version: mounted.index.formatVersion) + "sha256:" + mounted.digest).utf8))
        guard out.offset == info.target.size, out.sha256 == info.target.sha256 else {
            throw PackagerError(
                .integrity,
                "the bundle rebuilt from \(what) is not the one the delta stands for (\(out.offset) bytes, sha256:\(out.sha256?.prefix(16) ?? "")…; delta.json says \(info.target.size) bytes, sha256:\(info.target.sha256.prefix(16))…): the delta is damaged"
                    + (out.discards ? "" : "; nothing was written"))
        }
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
                crc = FastCRC32.checksum(UnsafeRawBufferPointer(part), continuing: crc)
                try out.write(UnsafeRawBufferPointer(part))
            }
            done += UInt64(count)
        }
        let expected = bundle.formatVersion == 1 ? record.crc32 : record.storedCRC32
        guard record.compression == .deflate && bundle.formatVersion == 1 || crc == expected else {
            throw PackagerError(.integrity, "body \(name) in \(bundle.bodyFile(i).path) is damaged (its stored bytes fail their CRC-32)")
        }
    }

    /// Copies a metadata entry's stored bytes, as they are (same method, CRC and sizes), when the bundle has it.
    private static func copyMetadata(_ name: String, of bundle: MountedBundle, to writer: ZipWriter, output: AtomicOutput) throws {
        guard let entry = bundle.metadata[name] else { return }
        let offset = try MountedBundle.metadataDataOffset(entry, in: bundle.file, bodyArea: bundle.directory.centralDirectoryOffset)
        let bytes = try bundle.file.read(at: offset, count: Int(entry.compressedSize), what: name)
        try writer.addEntry(name: name, method: entry.method, crc32: entry.crc32, size: entry.uncompressedSize, data: bytes)
    }

    /// Body `i` of `new` as a patch of body `j` of `old` (the source's digest, the level the new one's stream is
    /// deflated at, the patch), when it is well under half the body's stored size and the stream can be made again;
    /// nil otherwise.
    private static func patch(_ i: Int, of new: MountedBundle, from j: Int, of old: MountedBundle) throws -> [UInt8]? {
        let record = new.bodyRecord(at: i)
        let source = old.bodyRecord(at: j)
        guard record.size <= 64 << 20, source.size <= 64 << 20, record.storedSize >= 256 else { return nil }
        let content = try new.bodyBytes(at: i, verification: .crc32)
        guard let level = try level(reproducing: record, content: content, of: i, in: new) else { return nil }
        let patch = BinaryDiff.make(source: try old.bodyBytes(at: j, verification: .crc32), target: content)
        let data = source.sha256 + [level] + patch
        // A reader takes a body's patch entry up to twice the body and 1 MiB (§12.5).
        guard UInt64(data.count) <= 2 * record.size + (1 << 20) else { return nil }
        return try deflatedSize(data) < Int(record.storedSize) / 2 ? data : nil
    }

    /// The libdeflate level (1–12) whose stream of `content` is body `i`'s stored stream, 0 for a stored body; nil when
    /// none is (a stream another compressor wrote).
    private static func level(reproducing record: IndexBodyRecord, content: [UInt8], of i: Int, in bundle: MountedBundle) throws -> UInt8? {
        guard record.compression == .deflate else { return 0 }
        let stored = try bundle.bodyFile(i).read(at: record.dataOffset, count: Int(record.storedSize), what: "body")
        // The writer streams bodies of 16 MiB and more through zlib, and deflates the rest whole with libdeflate.
        return try levelReproducing(stored, from: content, zlibFirst: content.count >= 16 << 20)
    }

    /// The compressor and level that make `stored` from `content`: 1–12 for libdeflate, 0x80 + 1–9 for zlib (the
    /// writer's stream deflater); nil when neither does.
    private static func levelReproducing(_ stored: [UInt8], from content: [UInt8], zlibFirst: Bool) throws -> UInt8? {
        let likely = [BundleWriter.defaultCompressionLevel, Builder.defaultCompressionLevel]
        let libdeflate = (likely + Array(1...12)).map { UInt8($0) }
        let zlib = (likely + Array(1...9)).map { UInt8(0x80 | min($0, 9)) }
        for level in zlibFirst ? zlib + libdeflate : libdeflate + zlib where try deflate(content, level: level) == stored { return level }
        return nil
    }

    /// `content` deflated as the level byte says (§12.1: 0 stored, 1–12 libdeflate, 0x81–0x89 zlib); `what` names
    /// where the byte came from when it is none of those.
    private static func deflate(_ content: [UInt8], level: UInt8, what: String = "the level byte") throws -> [UInt8] {
        guard BundleFormat.isLevelByte(level) else {
            throw PackagerError(.integrity, "\(what) is \(level), which is no level byte (0 to 12, or 129 to 137): the delta is damaged")
        }
        if level == 0 { return content }
        if level & 0x80 != 0 { return try ZlibDeflate.deflate(content, level: Int32(level & 0x7F)) }
        return try content.withUnsafeBytes { try RawDeflate.deflate($0, level: Int32(level)) } ?? content
    }

    /// `new`'s manifest as a patch of `old`'s, after the level its stream is deflated at (0: stored); nil when the
    /// stream cannot be made again.
    private static func manifestPatch(of new: MountedBundle, from old: MountedBundle) throws -> [UInt8]? {
        guard let entry = new.metadata[BundleFormat.manifestEntryName] else { return nil }
        let content = try new.manifestBytes()
        // The writer streams a manifest of 1 MiB and more through zlib.
        guard let level = try storedLevel(of: entry, content: content, in: new, zlibFirst: content.count >= 1 << 20) else { return nil }
        return [level] + BinaryDiff.make(source: try old.manifestBytes(), target: content)
    }

    /// The level byte that makes metadata entry `entry`'s stored bytes from `content`: 0 when it is stored, nil when no
    /// level does.
    private static func storedLevel(
        of entry: ZipCentralEntry, content: [UInt8], in bundle: MountedBundle, zlibFirst: Bool, likely: UInt8? = nil
    ) throws -> UInt8? {
        guard entry.method == 8 else { return 0 }
        let offset = try MountedBundle.metadataDataOffset(entry, in: bundle.file, bodyArea: bundle.directory.centralDirectoryOffset)
        let stored = try bundle.file.read(at: offset, count: Int(entry.compressedSize), what: entry.name)
        if let likely, try deflate(content, level: likely) == stored { return likely }
        return try levelReproducing(stored, from: content, zlibFirst: zlibFirst)
    }

    /// The level byte of a delta's `manifest.patch`.
    private static func manifestLevel(of mounted: MountedBundle) throws -> UInt8 {
        guard let entry = mounted.metadata[MountedBundle.manifestPatchName] else { return 0 }
        let bytes = try MountedBundle.readMetadataEntry(
            entry, from: mounted.file, limit: MountedBundle.manifestLimit, bodyArea: mounted.directory.centralDirectoryOffset)
        return bytes.first ?? 0
    }

    private static func deflatedSize(_ data: [UInt8]) throws -> Int {
        try data.withUnsafeBytes { try RawDeflate.deflate($0, level: 6) }?.count ?? data.count
    }

    /// An entry of the delta, deflated when that is smaller.
    private static func addDeflated(_ name: String, _ data: [UInt8], to writer: ZipWriter) throws {
        if let deflated = try data.withUnsafeBytes({ try RawDeflate.deflate($0, level: 9) }) {
            try writer.addEntry(name: name, method: 8, crc32: CRC32.checksum(data), size: UInt64(data.count), data: deflated)
        } else {
            try writer.addEntry(name: name, method: 0, crc32: CRC32.checksum(data), size: UInt64(data.count), data: data)
        }
    }

    /// Keys added, changed (status, headers or body) and removed from `old` to `new`.
    package static func keyChanges(old: MountedBundle, new: MountedBundle) -> (added: Int, changed: Int, removed: [String], sources: [Int: Int]) {
        var sources: [Int: Int] = [:]
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
                    // The old body of a key whose body changed: what its new body is patched from.
                    if let from = a.body, let to = b.body, from.sha256 != to.sha256, sources[to.index] == nil { sources[to.index] = from.index }
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
        return (added, changed, removed, sources)
    }

    /// The order of keys in an index: by their UTF-8 bytes.
    private static func keyOrder(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    /// The bundle at `path`, mounted, with the reader's error in the tool's words.
    public static func mount(_ path: String) throws -> MountedBundle {
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
