import Crypto
import Foundation

/// What a delta bundle says of itself (its `delta.json`, docs/FORMAT.md §12): the bundle it is mounted over, the
/// bundle it stands for, and what changed between them.
public struct DeltaInfo: Sendable, Equatable, Codable {
    /// The delta format: 2 for a delta of a version-3 bundle, 1 for one of a version-2 bundle (docs/FORMAT.md §12).
    public var format: Int
    /// The digest of the bundle the delta is mounted over (its `index.bin`'s SHA-256, as its archive comment says).
    public var base: String
    /// The bundle the delta stands for: its digest, and its file's size, SHA-256 and body area, from which
    /// `packager apply` rebuilds it byte for byte.
    public var target: Target
    /// Distinct bodies the delta carries (the target's bodies the base lacks, or stores otherwise).
    public var carried: Int
    /// Distinct bodies of the target read from the base.
    public var reused: Int
    /// Distinct bodies of the target the delta holds as patches of a base body (a page edited since).
    public var patched: Int
    /// Request keys the target adds, changes (another status, headers or body) and removes, against the base.
    public var added: Int
    public var changed: Int
    /// The keys the target no longer answers; each is in the base (a delta that removes a key its base lacks is refused).
    public var removed: [String]

    public struct Target: Sendable, Equatable, Codable {
        /// The target's bundle digest.
        public var digest: String
        /// The target file's size in bytes.
        public var size: UInt64
        /// The SHA-256 of the target file, in lowercase hex.
        public var sha256: String
        /// Where the target's body area ends (its `index.bin` local header's offset).
        public var bodyArea: UInt64
        /// The target's format version: 3, or nil for 2 (deltas written before version 3 do not say it).
        public var formatVersion: UInt32?
        /// How the target stores `index.bin`, as a level byte (docs/FORMAT.md §12.1): nil or 0 for stored.
        public var indexLevel: UInt8?

        public init(digest: String, size: UInt64, sha256: String, bodyArea: UInt64, formatVersion: UInt32? = nil, indexLevel: UInt8? = nil) {
            self.digest = digest
            self.size = size
            self.sha256 = sha256
            self.bodyArea = bodyArea
            self.formatVersion = formatVersion
            self.indexLevel = indexLevel
        }

        /// The target's format version, 2 when the delta does not say it.
        public var version: UInt32 { formatVersion ?? 2 }
    }

    public init(base: String, target: Target, carried: Int, reused: Int, patched: Int, added: Int, changed: Int, removed: [String]) {
        self.format = target.version >= 3 ? 2 : 1
        self.base = base
        self.target = target
        self.carried = carried
        self.reused = reused
        self.patched = patched
        self.added = added
        self.changed = changed
        self.removed = removed
    }
}

/// Where each body of a delta's target lies: which of the mounted bundle's stores, at which local header offset, with
/// which local header length.
package struct BodyRelocation: Sendable {
    package var stores: [UInt8]
    package var offsets: [UInt64]
    package var headerLengths: [UInt16]
    /// The bodies rebuilt from patches at mount, by body index: stored as the runtime deflated them (in a file held in
    /// memory), with the level the target's writer deflated them at (0: stored), which `packager apply` uses.
    package var rebuilt: [Int: Rebuilt] = [:]

    package struct Rebuilt: Sendable {
        package var storedSize: UInt64
        package var storedCRC32: UInt32
        package var level: UInt8
    }
}

extension MountedBundle {
    /// What the delta bundle at `path` says of itself, read without its base; nil when the file is a ZIP file but
    /// not a delta (a bundle, say).
    ///
    /// - Throws: ``BundleError`` when the file cannot be read or its `delta.json` is damaged.
    public static func deltaInfo(atPath path: String) throws -> DeltaInfo? {
        let file = try BundleFile(path: path)
        let directory = try ZipDirectory.locate(in: file)
        guard isDelta(directory) else { return nil }
        return try readDelta(file: file, directory: directory).info
    }

    /// Whether the file at `path` is a delta bundle, by its archive comment alone (so a damaged delta is one too); false
    /// for a file that is not a ZIP or cannot be read.
    package static func isDelta(atPath path: String) -> Bool {
        guard let file = try? BundleFile(path: path), let directory = try? ZipDirectory.locate(in: file) else { return false }
        return isDelta(directory)
    }

    private static func isDelta(_ directory: ZipDirectory) -> Bool {
        String(decoding: directory.comment, as: UTF8.self).hasPrefix("packager-delta/")
    }

    /// Mounts `paths` in order, as `packager serve` takes them: a bundle alone, a delta over the path after it (itself
    /// a bundle, or a delta over the next, and so on). `DELTA2 DELTA1 BASE` is one bundle; `HOTFIX DELTA BASE` two.
    ///
    /// A path that is an `http://` or `https://` URL is a remote bundle, mounted by range reads through `remote`
    /// (``init(url:remote:options:)``); it may stand as a delta's base.
    ///
    /// - Throws: ``BundleError`` for a bundle that does not mount, a delta with no path after it, or one whose base
    ///   is another bundle (`.wrongBase`); `.invalidArgument` for a URL without `remote`.
    package static func mount(paths: [String], options: Options = Options(), remote: RemoteOptions? = nil) throws -> [MountedBundle] {
        var mounted: [MountedBundle] = []
        var rest = paths[...]
        func next(_ options: Options) throws -> MountedBundle {
            guard let path = rest.popFirst() else {
                throw BundleError(.invalidArgument, "a delta bundle needs the bundle it was made over after it")
            }
            if case .remote(_, let remote) = try BundleLocation(path, remote: remote) {
                do {
                    return try naming(path) { try MountedBundle(url: path, remote: remote, options: options) }
                } catch let error as BundleError where error.code == .unsupported && error.message.contains(RemoteMount.deltaRefusal) && !rest.isEmpty {
                    // A delta by URL: fetched whole (it is small) and mounted over the path after it.
                    let base = try next(Self.baseOptions(options))
                    return try naming(path) { try MountedBundle(deltaURL: path, base: base, remote: remote, options: options) }
                }
            }
            // By the comment alone: the delta's own mount reads delta.json (once), and says what is wrong with it.
            guard isDelta(atPath: path) else { return try naming(path) { try MountedBundle(path: path, options: options) } }
            guard !rest.isEmpty else {
                throw BundleError(.invalidArgument, "\(path) is a delta bundle: give the bundle it was made over after it")
            }
            // A base needs no signature of its own: what is read from it is checked against the delta's (signed) index,
            // as the delta's mount checks bodies. It keeps no inflated bodies either: the delta's cache serves.
            let base = try next(Self.baseOptions(options))
            return try naming(path) { try MountedBundle(deltaPath: path, base: base, options: options) }
        }
        // With several files, an error names the one it is about (a chain's damaged delta, a damaged base).
        func naming<T>(_ path: String, _ step: () throws -> T) throws -> T {
            do {
                return try step()
            } catch var error as BundleError where paths.count > 1 && !error.message.hasPrefix(path) && !error.message.contains(" " + path) {
                error.message = "\(RemoteObject.shown(path)): " + error.message
                throw error
            }
        }
        while !rest.isEmpty { mounted.append(try next(options)) }
        return mounted
    }

    /// The options a delta's base is mounted with: no signature of its own (what is read from it is checked against
    /// the delta's signed index, as the delta's mount checks bodies), and no inflated bodies kept (the delta's cache
    /// serves).
    package static func baseOptions(_ options: Options) -> Options {
        var base = options
        base.requiredPublicKey = nil
        base.inflatedCacheBytes = 0
        base.label = nil
        return base
    }

    /// Where a delta's bodies rebuilt from its patches lie among its stores: after its own file and its base's stores
    /// (`[file] + base.stores + [rebuilt]`).
    private static func rebuiltStoreIndex(over base: MountedBundle) -> Int { 1 + base.stores.count }

    /// Where body `bodyIndex` of a delta comes from, as its mount found it (§12.5 step 5); nil for a bundle that is not
    /// a delta.
    package func bodyOrigin(_ bodyIndex: Int) -> BodyOrigin? {
        guard let base else { return nil }
        switch bodyStore(bodyIndex) {
        case 0: return .carried
        case Self.rebuiltStoreIndex(over: base): return .patched
        default: return .base
        }
    }

    /// Where a delta's body comes from.
    package enum BodyOrigin: Sendable { case carried, patched, base }

    /// Mounts the delta bundle at `deltaPath` over `base`: the result answers every request exactly as the bundle
    /// the delta stands for, reading the bodies the delta carries from its file and the rest from the base's.
    ///
    /// The delta's `index.bin` must hash to the digest its comment names (and carry a signature by
    /// `options.requiredPublicKey`, when given, as the target bundle did); every body of the target must be in the
    /// delta or in the base, stored alike; every key the delta removes must be in the base.
    ///
    /// - Throws: ``BundleError``: `.wrongBase` when `base` is not the bundle the delta was made over (by its digest),
    ///   `.unsupported` past ``BundleFormat/maxDeltaDepth`` deltas, `.corruptIndex`, `.truncated` or `.hostile` when
    ///   the delta is damaged (a base whose digest matched lacks a body or key the delta names: only a damaged or
    ///   forged delta names one).
    package convenience init(deltaPath: String, base: MountedBundle, options: Options = Options()) throws {
        let file = try BundleFile(path: deltaPath)
        let directory = try ZipDirectory.locate(in: file)
        let comment = String(decoding: directory.comment, as: UTF8.self)
        guard [1, 2].contains(where: { comment.hasPrefix(BundleFormat.deltaCommentPrefix(format: $0) + "sha256:") }) else {
            if comment.hasPrefix("packager-delta/") {
                throw BundleError(
                    .unsupported, "\(deltaPath) is a delta of another format version (\(comment.prefix(20))…); this reader knows versions 1 and 2")
            }
            throw BundleError(.notABundle, "\(deltaPath) is not a delta bundle (its archive comment does not start with packager-delta/)")
        }
        let (info, metadata, carried, patched) = try Self.readDelta(file: file, directory: directory)
        guard comment == BundleFormat.deltaCommentPrefix(format: info.format) + "sha256:" + info.target.digest + " base:" + info.base else {
            throw BundleError(.corruptIndex, "the archive comment and delta.json of \(deltaPath) name different bundles or formats")
        }
        guard info.base == base.digest else {
            throw BundleError(
                .wrongBase,
                "\(deltaPath) is a delta over the bundle sha256:\(info.base.prefix(16))…, not over \(base.label) (sha256:\(base.digest.prefix(16))…)")
        }
        guard base.deltaDepth + 1 <= BundleFormat.maxDeltaDepth else {
            throw BundleError(
                .unsupported, "\(deltaPath) would stand over \(base.deltaDepth) deltas; at most \(BundleFormat.maxDeltaDepth) may stand over one another")
        }
        // Delta format 1 stands for a version-2 bundle, format 2 for a version-3 one.
        let version = info.target.version
        guard BundleFormat.deltaTargetVersion(format: info.format) == version else {
            throw BundleError(.corruptIndex, "\(deltaPath) is a delta of format \(info.format) but says it stands for a bundle of version \(version)")
        }
        if metadata[BundleFormat.indexEntryName] == nil, let level = info.target.indexLevel, level == 0 || !BundleFormat.isLevelByte(level) {
            throw BundleError(.corruptIndex, "delta.json of \(deltaPath) gives target.indexLevel \(level), which is no level byte that deflates (§12.1)")
        }
        let indexBytes: [UInt8]
        if let indexEntry = metadata[BundleFormat.indexEntryName] {
            indexBytes = try Self.readIndex(indexEntry, version: version, from: file, bodyArea: directory.centralDirectoryOffset)
        } else if let editEntry = metadata[Self.indexEditName] {
            let edit = try Self.readMetadataEntry(editEntry, from: file, limit: Self.indexLimit(base), bodyArea: directory.centralDirectoryOffset)
            indexBytes = try IndexEdit.apply(edit, to: base.index, version: version)
        } else if let patchEntry = metadata[Self.indexPatchName] {
            let patch = try Self.readMetadataEntry(patchEntry, from: file, limit: Self.indexLimit(base), bodyArea: directory.centralDirectoryOffset)
            indexBytes = try BinaryPatch.apply(
                patch, to: base.index.bytes, limit: Int(Self.indexLimit(base)) + 64 * patch.count, what: BundleFormat.indexEntryName)
        } else {
            throw BundleError(
                .notABundle, "\(deltaPath) holds none of \(BundleFormat.indexEntryName), \(Self.indexEditName) and \(Self.indexPatchName)")
        }
        // The delta's bodies are found through the index, so the index is always held to the digest the comment names.
        guard hexString(Array(SHA256.hash(data: indexBytes))) == info.target.digest else {
            throw BundleError(.corruptIndex, "index.bin of \(deltaPath) does not hash to the digest the delta names: it was altered")
        }
        let index = try BundleIndex(bytes: indexBytes, bodyArea: info.target.bodyArea, maxRatio: options.maxCompressionRatio)
        guard index.formatVersion == version else {
            throw BundleError(
                .corruptIndex, "\(deltaPath) stands for a bundle of format version \(version), but its index.bin is of version \(index.formatVersion)")
        }
        var signed = false
        if let signatureEntry = metadata[BundleFormat.signatureEntryName] {
            signed = true
            if let key = options.requiredPublicKey {
                let signature = try Self.readMetadataEntry(signatureEntry, from: file, limit: 1 << 16, bodyArea: directory.centralDirectoryOffset)
                try SignatureBlock.verify(json: signature, bundleDigestHex: info.target.digest, publicKey: key)
            }
        } else if options.requiredPublicKey != nil {
            throw BundleError(.signature, "the bundle the delta stands for is not signed, and a signature by the configured public key is required")
        }
        let (relocation, rebuiltFile) = try Self.relocate(
            index: index, carried: carried, patched: patched, file: file, directory: directory, base: base, path: deltaPath,
            maxBodySize: options.maxBodySize)
        // A manifest patch is read when the manifest is (tools and reports), not at mount.
        var manifestPatch: ZipCentralEntry?
        if metadata[BundleFormat.manifestEntryName] == nil {
            guard let entry = metadata[Self.manifestPatchName] else {
                throw BundleError(.notABundle, "\(deltaPath) holds neither \(BundleFormat.manifestEntryName) nor \(Self.manifestPatchName)")
            }
            manifestPatch = entry
        }

        for key in info.removed where base.entry(forKey: key) == nil {
            // The base is the one the delta names (its digest matched): the delta's own list is wrong.
            throw BundleError(.corruptIndex, "\(deltaPath) removes \(key), which its base does not hold: the delta is damaged", entry: key)
        }
        self.init(
            file: file, directory: directory, metadata: metadata, index: index, digest: info.target.digest, signed: signed, options: options,
            stores: [file] + base.stores + (rebuiltFile.map { [$0] } ?? []), relocation: relocation, base: base, delta: info,
            manifestPatch: manifestPatch)
    }

    /// The delta's `delta.json`, its metadata entries, and the bodies it carries (in name order).
    /// The most bytes an `index.edit` or `index.patch` may inflate to, and (with 64 bytes a patch byte) what a byte patch
    /// of the index may make: eight times the base's index, at least 64 MiB. Read before the signature is checked, so
    /// bounded by what the reader already holds. `packager delta` carries `index.bin` whole past it.
    package static func indexLimit(_ base: MountedBundle) -> UInt64 { UInt64(max(64 << 20, 8 * base.index.byteCount)) }

    /// The most bytes the bodies a delta rebuilds from patches may hold in memory together.
    package static let maxRebuiltBytes: UInt64 = 512 << 20

    /// The entry of a delta that holds its target's `index.bin` as what it keeps of its base's bodies and entries
    /// (``IndexEdit``).
    package static let indexEditName = "index.edit"
    /// The entry of a delta that holds its target's `index.bin` as a patch of its base's.
    package static let indexPatchName = "index.patch"
    /// The entry of a delta that holds its target's `manifest.json` as a patch of its base's.
    package static let manifestPatchName = "manifest.patch"
    /// The folder of a delta's bodies held as patches of a base body.
    package static let patchPrefix = "p/"

    private static func readDelta(file: BundleFile, directory: ZipDirectory) throws -> (
        info: DeltaInfo, metadata: [String: ZipCentralEntry], carried: [ZipCentralEntry], patched: [ZipCentralEntry]
    ) {
        var metadata: [String: ZipCentralEntry] = [:]
        var carried: [ZipCentralEntry] = []
        var patched: [ZipCentralEntry] = []
        try directory.forEachEntry(from: file) { entry in
            if entry.name.hasPrefix(BundleFormat.bodyPrefix) || entry.name.hasPrefix(patchPrefix) {
                let digits = entry.name.utf8.dropFirst(2)
                guard (IndexLayout.bodyNameDigits...64).contains(digits.count), digits.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
                else { throw BundleError(.hostile, "a delta body is named \(entry.name), not b/ or p/ and 16 to 64 hex digits", entry: entry.name) }
                if entry.name.hasPrefix(patchPrefix) { patched.append(entry) } else { carried.append(entry) }
            } else {
                guard metadata[entry.name] == nil else {
                    throw BundleError(.hostile, "the central directory lists \(entry.name) twice", entry: entry.name)
                }
                metadata[entry.name] = entry
            }
            return true
        }
        guard let deltaEntry = metadata[BundleFormat.deltaEntryName] else {
            throw BundleError(.notABundle, "\(file.path) has a delta's comment but no \(BundleFormat.deltaEntryName)")
        }
        let bytes = try readMetadataEntry(deltaEntry, from: file, limit: 64 << 20, bodyArea: directory.centralDirectoryOffset)
        let info: DeltaInfo
        do {
            info = try JSONDecoder().decode(DeltaInfo.self, from: Data(bytes))
        } catch {
            throw BundleError(.corruptIndex, "\(BundleFormat.deltaEntryName) of \(file.path) is not a delta description: \(DecodingProblem.describe(error))")
        }
        guard BundleFormat.deltaTargetVersion(format: info.format) != nil else {
            throw BundleError(.unsupported, "\(file.path) is a delta of format \(info.format); this reader knows formats 1 and 2")
        }
        return (info, metadata, carried.sorted { $0.name < $1.name }, patched.sorted { $0.name < $1.name })
    }

    /// Where each of the target's bodies lies: in the delta (a body entry whose name is a prefix of its digest), rebuilt
    /// from a patch of a base body (kept in a file held in memory, returned), or in the base (the same digest, stored
    /// alike).
    private static func relocate(
        index: BundleIndex, carried: [ZipCentralEntry], patched: [ZipCentralEntry], file: BundleFile, directory: ZipDirectory, base: MountedBundle,
        path: String, maxBodySize: UInt64
    ) throws -> (BodyRelocation, BundleFile?) {
        let count = index.bodyCount
        var relocation = BodyRelocation(
            stores: [UInt8](repeating: 0, count: count), offsets: [UInt64](repeating: 0, count: count), headerLengths: [UInt16](repeating: 0, count: count))
        var nextCarried = 0
        var nextPatched = 0
        var nextBase = 0
        var baseRecord: IndexBodyRecord? = base.bodyCount > 0 ? base.bodyRecord(at: 0) : nil
        guard base.stores.count + 2 <= Int(UInt8.max) else { throw BundleError(.unsupported, "too many files under \(path)") }
        let rebuiltStore = UInt8(rebuiltStoreIndex(over: base))
        var rebuiltBytes: [UInt8] = []
        var rebuiltTotal: UInt64 = 0
        for i in 0..<count {
            let record = index.body(at: i)
            // Spelled in hex only while carried or patched bodies remain to be matched (most records of a large target
            // are read from the base, and need no string).
            let hex = nextCarried < carried.count || nextPatched < patched.count ? hexString(record.sha256) : ""
            var name: String { BundleFormat.bodyPrefix + hexString(record.sha256.prefix(8)) }
            // Carried and patched bodies, in name order, are in digest order too: each is the prefix of the next record
            // it names.
            if nextCarried < carried.count, hex.hasPrefix(carried[nextCarried].name.dropFirst(BundleFormat.bodyPrefix.count)) {
                let entry = carried[nextCarried]
                nextCarried += 1
                guard entry.method == record.compression.rawValue, entry.compressedSize == record.storedSize, entry.uncompressedSize == record.size,
                    entry.crc32 == record.crc32
                else { throw BundleError(.corruptIndex, "the delta stores body \(name) otherwise than its index records", entry: name) }
                let fixed = try file.read(at: entry.localHeaderOffset, count: ZipConstants.localHeaderSize, what: "body \(name)")
                // Outside the signed index: checked before it is used (and the body's reads check the header again).
                let headerLength = ZipConstants.localHeaderSize + Int(fixed.u16(26)) + Int(fixed.u16(28))
                guard Int(fixed.u16(26)) == entry.nameBytes.count, headerLength <= Int(UInt16.max) else {
                    throw BundleError(.hostile, "the local header of \(entry.name) disagrees with its central record", entry: entry.name)
                }
                relocation.offsets[i] = entry.localHeaderOffset
                relocation.headerLengths[i] = UInt16(headerLength)
                continue
            }
            if nextPatched < patched.count, hex.hasPrefix(patched[nextPatched].name.dropFirst(patchPrefix.count)) {
                let entry = patched[nextPatched]
                nextPatched += 1
                // Bounded before anything is read: the body's claimed size, and all rebuilt bodies together.
                rebuiltTotal += record.size
                guard record.size <= maxBodySize, rebuiltTotal <= maxRebuiltBytes else {
                    throw BundleError(.hostile, "rebuilding body \(name) from its patch would hold more than the reader allows", entry: name)
                }
                let (body, level) = try rebuild(record, from: entry, in: file, directory: directory, base: base, name: name)
                // Stored in memory as a body entry: a local header, then the stream as this runtime deflates it.
                let stored = record.compression == .deflate ? try ZlibDeflate.deflate(body) : body
                var header: [UInt8] = []
                let nameBytes = Array(name.utf8)
                header.appendLE(ZipConstants.localHeaderSignature)
                header.appendLE(UInt16(20))
                header.appendLE(UInt16(0))
                header.appendLE(record.compression.rawValue)
                header.appendLE(UInt32(0))
                header.appendLE(record.crc32)
                header.appendLE(UInt32(truncatingIfNeeded: min(UInt64(stored.count), 0xFFFF_FFFF)))
                header.appendLE(UInt32(truncatingIfNeeded: min(record.size, 0xFFFF_FFFF)))
                header.appendLE(UInt16(nameBytes.count))
                header.appendLE(UInt16(0))
                header.append(contentsOf: nameBytes)
                relocation.stores[i] = rebuiltStore
                relocation.offsets[i] = UInt64(rebuiltBytes.count)
                relocation.headerLengths[i] = UInt16(header.count)
                relocation.rebuilt[i] = .init(storedSize: UInt64(stored.count), storedCRC32: CRC32.checksum(stored), level: level)
                rebuiltBytes += header
                rebuiltBytes += stored
                continue
            }
            while let candidate = baseRecord, candidate.sha256.lexicographicallyPrecedes(record.sha256) {
                nextBase += 1
                baseRecord = nextBase < base.bodyCount ? base.bodyRecord(at: nextBase) : nil
            }
            guard let found = baseRecord, found.sha256 == record.sha256 else {
                throw BundleError(.corruptIndex, "\(path) lacks body \(name), and its base does not hold it either: the delta is damaged", entry: name)
            }
            // Compared as the base's own index records it: a body the base rebuilt from a patch lies stored otherwise, and
            // is taken over as it lies.
            guard base.index.body(at: nextBase).isStoredAlike(record) else {
                throw BundleError(.corruptIndex, "the base stores body \(name) otherwise than the delta's index records: the delta is damaged", entry: name)
            }
            relocation.stores[i] = UInt8(base.bodyStore(nextBase) + 1)
            relocation.offsets[i] = found.localHeaderOffset
            relocation.headerLengths[i] = UInt16(found.dataOffset - found.localHeaderOffset)
            if let rebuilt = base.rebuilt(nextBase) { relocation.rebuilt[i] = rebuilt }
        }
        guard nextCarried == carried.count, nextPatched == patched.count else {
            let extra = nextCarried < carried.count ? carried[nextCarried] : patched[nextPatched]
            throw BundleError(.corruptIndex, "\(path) carries bodies its index does not list", entry: extra.name)
        }
        let rebuilt = rebuiltBytes.isEmpty ? nil : BundleFile(memory: rebuiltBytes, name: path + " (bodies rebuilt from patches)")
        return (relocation, rebuilt)
    }

    /// A body rebuilt from its patch entry (the source body's SHA-256, the level its target was deflated at, the
    /// patch), checked against the target's record by CRC-32 and SHA-256; and that level.
    private static func rebuild(
        _ record: IndexBodyRecord, from entry: ZipCentralEntry, in file: BundleFile, directory: ZipDirectory, base: MountedBundle, name: String
    ) throws -> ([UInt8], UInt8) {
        // A patch is at most its body and what its operations cost (a few bytes each).
        let data = try readMetadataEntry(entry, from: file, limit: 2 * record.size + (1 << 20), bodyArea: directory.centralDirectoryOffset)
        guard data.count > 33 else { throw BundleError(.corruptIndex, "the patch of body \(name) is cut short", entry: entry.name) }
        let source = Array(data[0..<32])
        // The source body, by binary search over the base's digests.
        var low = 0
        var high = base.bodyCount
        while low < high {
            let mid = (low + high) / 2
            if base.bodyRecord(at: mid).sha256.lexicographicallyPrecedes(source) { low = mid + 1 } else { high = mid }
        }
        guard low < base.bodyCount, base.bodyRecord(at: low).sha256 == source else {
            throw BundleError(
                .corruptIndex,
                "the delta patches body \(name) from a body its base does not hold (sha256:\(hexString(source).prefix(16))…): the delta is damaged",
                entry: name)
        }
        let original = try base.bodyBytes(at: low, verification: .sha256)
        let body = try BinaryPatch.apply(Array(data[33...]), to: original, limit: Int(min(record.size, UInt64(Int.max))), what: "body \(name)")
        try BodyCheck.contentCRC(CRC32.checksum(body), of: record, name: name)
        try BodyCheck.digest(Array(SHA256.hash(data: body)), of: record, name: name)
        guard BundleFormat.isLevelByte(data[32]) else {
            throw BundleError(.corruptIndex, "the patch of body \(name) gives the level byte \(data[32]), which is none (§12.1)", entry: entry.name)
        }
        return (body, data[32])
    }
}
