import Crypto
import Foundation
import OfflineBundle

/// The full offline integrity check behind `packager check`.
///
/// Unlike mounting, it reads everything: every central directory record and
/// local header, every body (inflated, CRC-32 and SHA-256), the manifest
/// against the index, the bundle digest, and the signature when there is one.
public enum Checker {
    /// One thing found wrong.
    public struct Issue: Sendable, Equatable, Codable, CustomStringConvertible {
        /// The ZIP entry or request key concerned, when there is one.
        public var entry: String?
        /// What is wrong.
        public var message: String
        public var description: String { entry.map { "\($0): \(message)" } ?? message }
    }

    /// The outcome of a check.
    public struct Report: Sendable, Encodable {
        public var path: String
        public var issues: [Issue]
        public var entries: Int
        public var bodies: Int
        public var bytesVerified: UInt64
        public var digest: String?
        /// nil when unsigned; true when the signature verified (by the given key, or else by the key the block names).
        public var signatureValid: Bool?
        /// Whether the signature was checked against a key the caller gave; without one, a valid signature only
        /// shows the bundle is unchanged since someone signed it, not who.
        public var signerChecked = false
        /// The fingerprint of the key the signature block names (``OfflineBundle/BundlePublicKey/fingerprint``), when
        /// the bundle is signed.
        public var signer: String?
        public var isValid: Bool { issues.isEmpty }

        private enum CodingKeys: String, CodingKey {
            case path, valid, refused, entries, bodies, bytesVerified, digest, signatureValid, signerChecked, signer, issues
        }

        /// The report as `packager check --json` prints it (absent values as null).
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(path, forKey: .path)
            try container.encode(isValid, forKey: .valid)
            try container.encode(refusedInput, forKey: .refused)
            try container.encode(entries, forKey: .entries)
            try container.encode(bodies, forKey: .bodies)
            try container.encode(bytesVerified, forKey: .bytesVerified)
            try container.encode(digest, forKey: .digest)
            try container.encode(signatureValid, forKey: .signatureValid)
            try container.encode(signerChecked, forKey: .signerChecked)
            try container.encode(signer, forKey: .signer)
            try container.encode(issues, forKey: .issues)
        }

        /// The bundle could not be checked because the input is wrong, not damaged: a delta over another bundle than its
        /// own, bases after a bundle that is not a delta, a file that does not exist. (`packager check` exits 2.)
        public internal(set) var refusedInput = false

        mutating func issue(_ entry: String?, _ message: String) { issues.append(Issue(entry: entry, message: message)) }
        mutating func record(_ error: any Error) {
            guard let e = error as? BundleError else { return issue(nil, "\(error)") }
            // A system call's reason (no such file or directory) goes with its message, as the CLI prints errors.
            issue(e.entry, e.message + (e.reason.map { ": \($0)" } ?? ""))
        }
    }

    /// Checks the bundle at `path`.
    ///
    /// - Parameter bases: when `path` is a delta bundle, the bundle it was made over (itself a delta over the next, and
    ///   so on, as `packager serve` takes them): the bundle the delta stands for is checked, every body read through
    ///   the delta's patches or from its base and held to its digest. The delta's own container is checked as a
    ///   bundle's is: its entries' names, local headers and extents. Each delta of the chain is held to its
    ///   `delta.json` (the keys it adds, changes and removes, where its bodies come from), and, when nothing else
    ///   was found, the bundle `packager apply` would make from it is rebuilt unwritten and held to the size,
    ///   SHA-256 and body area `delta.json` gives (so every body is read twice).
    /// - Returns: the report; ``Report/refusedInput`` when nothing could be checked because the input was wrong (a
    ///   delta without its base or over another bundle, a file that does not exist).
    /// - Parameter publicKey: when given (32 raw bytes), the bundle must carry a valid signature by it.
    /// - Parameter remote: how to read `path` when it is a URL. The check is of what the URL serves now, so every byte
    ///   is read from it: its end record and index (held to the digest its comment names), then the whole object in
    ///   requests of at most 64 MiB, each body checked by its SHA-256 as it comes. The cache folder is neither read
    ///   nor written (bytes it holds were fetched earlier, maybe from another URL, and prove nothing of this one).
    public static func check(path: String, bases: [String] = [], publicKey: [UInt8]? = nil, remote: RemoteOptions? = nil) -> Report {
        check(path: path, bases: bases, publicKey: publicKey, remote: remote, tableMemoryLimit: 2 << 20)
    }

    /// ``check(path:bases:publicKey:remote:)`` with the container pass's tables held in memory up to
    /// `tableMemoryLimit` bytes each, and the scratch files (theirs, and an index past `indexScratchAbove` bytes) in
    /// `scratchFolder`: tests lower the limits to make them spill, and name a folder that fails.
    static func check(
        path: String, bases: [String], publicKey: [UInt8]?, remote: RemoteOptions?, tableMemoryLimit: Int,
        scratchFolder: String = NSTemporaryDirectory(), indexScratchAbove: Int = 8 << 20
    ) -> Report {
        var remote = remote
        remote?.cacheDirectory = nil
        // A URL as it may be printed (text and JSON): no credentials, no query (a presigned URL's signature).
        var report = Report(path: RemoteObject.shown(path), issues: [], entries: 0, bodies: 0, bytesVerified: 0)
        let bundle: MountedBundle
        do {
            if bases.isEmpty {
                bundle = try MountedBundle.mountedWithIndexAside(
                    path, options: .init(verification: .sha256), scratchIn: scratchFolder, above: indexScratchAbove, remote: remote)
                try bundle.fetchWhole()
            } else {
                let mounted = try MountedBundle.mount(paths: [path] + bases, options: .init(verification: .sha256), remote: remote)
                guard mounted.count == 1, mounted[0].base != nil else {
                    throw BundleError(
                        .invalidArgument,
                        "\(RemoteObject.shown(path)) is not a delta over \(bases.map(RemoteObject.shown).joined(separator: " ")): give bases only after a delta"
                    )
                }
                bundle = mounted[0]
            }
        } catch {
            // A delta given alone is the wrong input too, said with what to give (looked at only when the mount failed).
            if bases.isEmpty, !RemoteOptions.isRemote(path), MountedBundle.isDelta(atPath: path) {
                report.issue(nil, "\(path) is a delta: give the bundle it was made over after it (packager check \(path) BASE)")
                report.refusedInput = true
                return report
            }
            report.record(error)
            // Not checked, rather than found damaged: the input was wrong, or the server holding it could not be read.
            report.refusedInput = (error as? BundleError).map { $0.isWrongInput || $0.code == .remote } ?? false
            return report
        }
        report.entries = bundle.entryCount
        report.bodies = bundle.bodyCount
        report.digest = bundle.digest
        // A delta's container holds what changed (bodies, patches): checked as a container; the bundle it stands for
        // is checked through it.
        let cdBodies = checkContainer(bundle, folder: scratchFolder, tableMemoryLimit: tableMemoryLimit, into: &report)
        if bundle.base == nil, let cdBodies { checkBodyRecords(bundle, centralDirectory: cdBodies, into: &report) }
        checkBodies(bundle, into: &report)
        checkHashTable(bundle, into: &report)
        checkHeaderBlocks(bundle, into: &report)
        checkManifest(bundle, into: &report)
        checkSignature(bundle, publicKey: publicKey, into: &report)
        checkDeltas(bundle, into: &report)
        return report
    }

    /// The stored header blocks against §4.5 and §8.4 H3, once per block, as written (a reader lowercases names, so
    /// the loader's answers hold whatever a block says; a block that breaks these rules was not written by a
    /// conforming writer).
    private static func checkHeaderBlocks(_ bundle: MountedBundle, into report: inout Report) {
        let index = bundle.index
        // One bit a block: blocks are shared, and each is read once.
        var seen = [UInt64](repeating: 0, count: (index.blockCount + 63) / 64)
        for i in 0..<index.entryCount {
            let (block, range) = index.headerBlock(ofEntry: i)
            let bit: UInt64 = 1 << (block % 64)
            guard seen[block / 64] & bit == 0 else { continue }
            seen[block / 64] |= bit
            for problem in headerBlockProblems(index.withBytes { ArraySlice($0[range]) }) { report.issue(index.entryKey(i), problem) }
        }
    }

    /// What is wrong with one header block's lines (§4.5: lowercase token names; values without CR, LF, NUL or other
    /// control bytes but tab; no header a response never carries).
    package static func headerBlockProblems(_ block: ArraySlice<UInt8>) -> [String] {
        var problems = [String]()
        for line in block.split(separator: 0x0A, omittingEmptySubsequences: true) {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = line[line.startIndex..<colon]
            let shown = String(decoding: name.map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
            let isToken =
                !name.isEmpty
                && name.allSatisfy { byte in
                    (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                        || "!#$%&'*+-.^_`|~".utf8.contains(byte)
                }
            if !isToken {
                problems.append("stored header name \"\(shown)\" is not an HTTP field name (hostile)")
                continue
            }
            if name.contains(where: { (0x41...0x5A).contains($0) }) {
                problems.append("stored header name \"\(shown)\" is not lowercase (§4.5)")
            }
            if HeaderPolicy.neverReplayed.contains(shown.lowercased()) {
                problems.append("stores \(shown.lowercased()), a header that is never replayed (hostile)")
            }
            if line[(colon + 1)...].contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                problems.append("stored header \(shown.lowercased()) has a control byte in its value (hostile)")
            }
        }
        return problems
    }

    /// The container: every record, its local header, no overlaps, nothing unexpected. Returns the body records.
    private static func checkContainer(_ bundle: MountedBundle, folder: String, tableMemoryLimit: Int, into report: inout Report) -> SortedRecords? {
        func issue(_ entry: String?, _ message: String) { report.issue(entry, message) }
        func issue(_ error: any Error) { report.record(error) }
        // Version 2 names a body `b/` + 16 to 64 hex digits, and a delta a patch `p/` + as many; version 1 `bodies/` + 64.
        let isDelta = bundle.base != nil
        let (prefixes, digits) =
            bundle.formatVersion == 1
            ? ([BundleFormat.v1BodyPrefix], 64...64) : (isDelta ? [BundleFormat.bodyPrefix, MountedBundle.patchPrefix] : [BundleFormat.bodyPrefix], 16...64)
        var known = [BundleFormat.indexEntryName, BundleFormat.manifestEntryName, BundleFormat.signatureEntryName]
        if isDelta {
            known += [BundleFormat.deltaEntryName, MountedBundle.indexEditName, MountedBundle.indexPatchName, MountedBundle.manifestPatchName]
        }
        // A table entry for every ZIP entry, in bounded memory whatever their number: the names seen, in a hash table
        // by the first 16 bytes of their SHA-256 (``DigestTable``), and the bodies' central records and every entry's
        // extent, each sorted by offset in runs (``ExternalSorter``); each table in files past `tableMemoryLimit`
        // (2 MiB). Their files' failures (a full or unwritable temporary folder) say nothing of the bundle.
        func scratch<T>(_ body: () throws -> T) throws -> T {
            do { return try body() } catch { throw ScratchFailure(error: error) }
        }
        var seen = DigestTable(folder: folder, memoryLimit: tableMemoryLimit)
        let bodies = ExternalSorter(folder: folder, memoryLimit: tableMemoryLimit) { $0.lexicographicallyPrecedes($1) }
        let extents = ExternalSorter(folder: folder, memoryLimit: tableMemoryLimit) { $0.lexicographicallyPrecedes($1) }
        do {
            try bundle.directory.forEachEntry(from: bundle.file) { entry in
                let nameKey = TableKey(sha256Of: entry.nameBytes)
                if try scratch({ try seen.value(for: nameKey) }) != nil {
                    issue(entry.name, "listed twice in the central directory")
                } else {
                    try scratch { try seen.set(1, for: nameKey) }
                }
                let isBody = prefixes.contains { prefix in
                    let hex = entry.name.dropFirst(prefix.count)
                    return entry.name.hasPrefix(prefix) && digits.contains(hex.utf8.count)
                        && hex.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
                }
                if isBody {
                    try scratch { try bodies.append(CentralBody(entry).record) }
                } else if !known.contains(entry.name) {
                    issue(entry.name, isDelta ? "unexpected entry in a delta bundle" : "unexpected entry in a bundle")
                }
                do {
                    let header = try bundle.file.read(at: entry.localHeaderOffset, count: ZipConstants.localHeaderSize, what: "local header of \(entry.name)")
                    guard header.u32(0) == ZipConstants.localHeaderSignature else {
                        issue(entry.name, "the local header is damaged (bad signature at offset \(entry.localHeaderOffset))")
                        return true
                    }
                    let nameLength = Int(header.u16(26))
                    let name = try bundle.file.read(at: entry.localHeaderOffset + 30, count: nameLength, what: "local name of \(entry.name)")
                    if name != entry.nameBytes { issue(entry.name, "the local header names \(String(decoding: name, as: UTF8.self))") }
                    if header.u16(8) != entry.method { issue(entry.name, "local and central compression methods differ") }
                    if header.u32(14) != entry.crc32 { issue(entry.name, "local and central CRC-32 differ") }
                    let end = entry.localHeaderOffset &+ 30 &+ UInt64(nameLength) &+ UInt64(header.u16(28)) &+ entry.compressedSize
                    if end < entry.localHeaderOffset { issue(entry.name, "its sizes overflow the file's address space") }
                    try scratch { try extents.append(bigEndian(entry.localHeaderOffset) + bigEndian(end) + entry.nameBytes) }
                } catch let failure as ScratchFailure {
                    throw failure
                } catch {
                    issue(error)
                }
                return true
            }
            // By start: each extent against the one before it.
            let sorted = try scratch { try extents.sorted() }
            var previous: (end: UInt64, name: String)?
            while let (start, end, name) = try scratch({
                try sorted.next({ ($0.bigEndianU64(0), $0.bigEndianU64(8), String(decoding: $0.dropFirst(16), as: UTF8.self)) })
            }) {
                if let previous, previous.end > start { issue(name, "overlaps \(previous.name)") }
                previous = (end, name)
            }
            if let previous, previous.end > bundle.directory.centralDirectoryOffset {
                issue(previous.name, "runs into the central directory")
            }
            return try scratch { try bodies.sorted() }
        } catch let failure as ScratchFailure {
            // Not checked, rather than found damaged.
            report.record(failure.error)
            report.refusedInput = true
            return nil
        } catch {
            issue(error)
            return nil
        }
    }

    /// A failure of the container pass's own scratch files.
    private struct ScratchFailure: Error {
        var error: any Error
    }

    /// A body's central record, by its local header's offset (big-endian first, so that records sort by it).
    struct CentralBody {
        var offset: UInt64
        var compressedSize: UInt64
        var size: UInt64
        var crc32: UInt32
        var method: UInt16
        var name: String

        init(_ entry: ZipCentralEntry) {
            (offset, compressedSize, size, crc32, method, name) =
                (entry.localHeaderOffset, entry.compressedSize, entry.uncompressedSize, entry.crc32, entry.method, entry.name)
        }

        init(_ record: UnsafeRawBufferPointer) {
            offset = record.bigEndianU64(0)
            compressedSize = record.bigEndianU64(8)
            size = record.bigEndianU64(16)
            crc32 = UInt32(truncatingIfNeeded: record.bigEndianU64(24) >> 32)
            method = UInt16(truncatingIfNeeded: record.bigEndianU64(24) >> 16)
            name = String(decoding: record.dropFirst(32), as: UTF8.self)
        }

        var record: [UInt8] {
            bigEndian(offset) + bigEndian(compressedSize) + bigEndian(size) + bigEndian(UInt64(crc32) << 32 | UInt64(method) << 16) + Array(name.utf8)
        }
    }

    /// The index's body records against the container's: each listed in both, alike, named by its digest. Both are in
    /// order of offset (the index's bodies lie in the order of their records, which the mount checked).
    private static func checkBodyRecords(_ bundle: MountedBundle, centralDirectory: SortedRecords, into report: inout Report) {
        do {
            var next = try centralDirectory.next(CentralBody.init)
            for b in 0..<bundle.bodyCount {
                let record = bundle.index.body(at: b)
                while let entry = next, entry.offset < record.localHeaderOffset {
                    report.issue(entry.name, "stored in the ZIP but not listed in the index")
                    next = try centralDirectory.next(CentralBody.init)
                }
                let name = bundle.bodyName(record)
                guard let entry = next, entry.offset == record.localHeaderOffset else {
                    report.issue(name, "the index lists this body but the central directory does not")
                    continue
                }
                next = try centralDirectory.next(CentralBody.init)
                let hex = hexString(record.sha256)
                if !hex.hasPrefix(entry.name.dropFirst(bundle.formatVersion == 1 ? BundleFormat.v1BodyPrefix.count : BundleFormat.bodyPrefix.count)) {
                    report.issue(entry.name, "the central directory names this body \(entry.name), which is not its digest (sha256:\(hex))")
                }
                if entry.compressedSize != record.storedSize
                    || entry.size != record.size || entry.crc32 != record.crc32 || entry.method != record.compression.rawValue
                {
                    report.issue(name, "the index and the central directory disagree about this body")
                }
            }
            while let entry = next {
                report.issue(entry.name, "stored in the ZIP but not listed in the index")
                next = try centralDirectory.next(CentralBody.init)
            }
        } catch {
            report.record(error)
        }
    }

    /// Every body read back and held to its digest (a delta's through its patches or from its base), and used by an entry.
    private static func checkBodies(_ bundle: MountedBundle, into report: inout Report) {
        // One bit a body.
        var referenced = [UInt64](repeating: 0, count: (bundle.bodyCount + 63) / 64)
        for position in 0..<bundle.entryCount {
            if let b = bundle.index.entryFields(position).body { referenced[b / 64] |= 1 << (b % 64) }
        }
        for b in 0..<bundle.bodyCount {
            if referenced[b / 64] & (1 << (b % 64)) == 0 { report.issue(bundle.bodyName(bundle.index.body(at: b)), "no entry uses this body") }
            do {
                let bytes = try bundle.bodyBytes(at: b, verification: .sha256)
                report.bytesVerified += UInt64(bytes.count)
            } catch let error as BundleError where bundle.bodyOrigin(b) == .base {
                // Through a delta, a body may lie in a base: say which file is damaged.
                report.issue(error.entry, error.message + " (the body lies in \(bundle.bodyFile(b).path))")
            } catch {
                report.record(error)
            }
        }
    }

    /// Every delta of a chain, over and above the bundle it stands for: its `delta.json` against what it does (the keys
    /// it adds, changes and removes against its base, where its bodies come from), and the bundle `packager apply`
    /// would make from it, rebuilt without being written and held to the size, SHA-256 and body area `delta.json`
    /// gives. The rebuild reads every body again: it is skipped once a problem is found.
    private static func checkDeltas(_ bundle: MountedBundle, into report: inout Report) {
        var delta = bundle
        while let info = delta.delta, let base = delta.base {
            let name = delta.path
            func issue(_ message: String) { report.issue(BundleFormat.deltaEntryName, "\(name): " + message) }
            let changes = DeltaBundles.keyChanges(old: base, new: delta)
            func compare(_ field: String, said: Int, did: Int, _ what: String) {
                if said != did { issue("\(field) is \(said), but the delta \(what) \(did)") }
            }
            compare("added", said: info.added, did: changes.added, "adds")
            compare("changed", said: info.changed, did: changes.changed, "changes")
            if info.removed != changes.removed {
                let listed = Set(info.removed)
                let removed = Set(changes.removed)
                let unlisted = changes.removed.filter { !listed.contains($0) }
                let kept = info.removed.filter { !removed.contains($0) }
                func few(_ keys: [String]) -> String { keys.prefix(3).joined(separator: ", ") + (keys.count > 3 ? ", …" : "") }
                var parts: [String] = []
                if !unlisted.isEmpty { parts.append("removes but does not list \(few(unlisted))") }
                if !kept.isEmpty { parts.append("lists but does not remove \(few(kept))") }
                if parts.isEmpty { parts.append("lists the keys it removes out of key order") }
                issue("removed does not say what the delta removes: it " + parts.joined(separator: "; it "))
            }
            var origins: [MountedBundle.BodyOrigin: Int] = [:]
            for b in 0..<delta.bodyCount { if let origin = delta.bodyOrigin(b) { origins[origin, default: 0] += 1 } }
            compare("carried", said: info.carried, did: origins[.carried] ?? 0, "carries")
            compare("patched", said: info.patched, did: origins[.patched] ?? 0, "patches")
            compare("reused", said: info.reused, did: origins[.base] ?? 0, "reads from its base")
            if report.issues.isEmpty {
                do {
                    try DeltaBundles.verify(delta, what: name)
                } catch {
                    report.record(error)
                }
            }
            delta = base
        }
    }

    /// The index's hash table finds every key.
    private static func checkHashTable(_ bundle: MountedBundle, into report: inout Report) {
        for position in 0..<bundle.entryCount {
            var key = Array(bundle.index.entryKey(position).utf8)
            if key.withUnsafeMutableBytes({ bundle.index.find(canonicalKey: UnsafeRawBufferPointer($0)) }) != position {
                report.issue(bundle.index.entryKey(position), "the index's hash table does not find this key")
            }
        }

    }

    /// The manifest against the index. A deflated one (what the writer makes) is read an entry at a time, so a check
    /// of a bundle of a million entries does not hold its manifest decoded.
    private static func checkManifest(_ bundle: MountedBundle, into report: inout Report) {
        func issue(_ entry: String?, _ message: String) { report.issue(entry, message) }
        let name = BundleFormat.manifestEntryName
        do {
            if bundle.base == nil, let manifestEntry = bundle.metadata[name], manifestEntry.method == 8 {
                // Bounded by what the entries can need, so a swapped-in bomb is refused before it is inflated; a
                // manifest within it that differs is still compared, to name what differs.
                if try !bundle.deflatedManifestMatchesDigest(manifestEntry, limit: bundle.manifestLimitForEntries) {
                    issue(name, "its SHA-256 differs from the one index.bin records")
                }
                let stream = try bundle.manifestEntries(checkingDigest: false)
                // What differs entry by entry is said once the count is known to agree (else every later position
                // would differ): the first 1,000, then how many more.
                var held: [(entry: String?, message: String)] = []
                var more = 0
                var position = 0
                while let item = try stream.next() {
                    if position < bundle.entryCount {
                        compare(item, at: position, with: bundle) { entry, message in
                            if held.count < 1_000 { held.append((entry, message)) } else { more += 1 }
                        }
                    }
                    position += 1
                }
                compareFormat(try stream.remainder(), with: bundle, issue: issue)
                guard position == bundle.entryCount else {
                    return issue(name, "lists \(position) entries; index.bin has \(bundle.entryCount)")
                }
                for (entry, message) in held { issue(entry, message) }
                if more > 0 { issue(name, "\(more) more entries differ from the index") }
                return
            }
            let bytes: [UInt8]
            if bundle.base != nil {
                // A delta carries its manifest whole or as a patch of its base's: rebuilt and held to the index's digest.
                bytes = try bundle.manifestBytes()
            } else {
                guard let manifestEntry = bundle.metadata[name] else {
                    issue(name, "missing")
                    return
                }
                bytes = try MountedBundle.readMetadataEntry(
                    manifestEntry, from: bundle.file, limit: bundle.manifestLimitForEntries, bodyArea: bundle.directory.centralDirectoryOffset)
                if Array(SHA256.hash(data: bytes)) != bundle.index.manifestSHA256 {
                    issue(name, "its SHA-256 differs from the one index.bin records")
                }
            }
            let manifest = try JSONDecoder().decode(Manifest.self, from: Data(bytes))
            compareFormat(manifest, with: bundle, issue: issue)
            guard manifest.entries.count == bundle.entryCount else {
                return issue(name, "lists \(manifest.entries.count) entries; index.bin has \(bundle.entryCount)")
            }
            for (position, item) in manifest.entries.enumerated() { compare(item, at: position, with: bundle, issue: issue) }
        } catch let error as DecodingError {
            issue(name, "is not a valid manifest: \(DecodingProblem.describe(error))")
        } catch {
            report.record(error)
        }
    }

    /// The bundle digest and the signature.
    private static func checkSignature(_ bundle: MountedBundle, publicKey: [UInt8]?, into report: inout Report) {
        func issue(_ entry: String?, _ message: String) { report.issue(entry, message) }
        func issue(_ error: any Error) { report.record(error) }
        do {
            // Mounting already read and CRC-checked index.bin: those bytes, not read again (but for version 1's).
            let actual = hexString(try bundle.indexSHA256())
            if actual != bundle.digest {
                issue(BundleFormat.indexEntryName, "the bundle digest in the ZIP comment (\(bundle.digest)) is not the SHA-256 of index.bin (\(actual))")
            }
            if let signatureEntry = bundle.metadata[BundleFormat.signatureEntryName] {
                do {
                    let json = try MountedBundle.readMetadataEntry(
                        signatureEntry, from: bundle.file, limit: 1 << 16, bodyArea: bundle.directory.centralDirectoryOffset)
                    let block = try JSONDecoder().decode(SignatureBlock.self, from: Data(json))
                    let named = Data(base64Encoded: block.publicKey).map(Array.init) ?? []
                    if named.count == 32 { report.signer = BundlePublicKey.fingerprint(of: named) }
                    let key = publicKey ?? Data(base64Encoded: block.publicKey).map(Array.init) ?? []
                    try SignatureBlock.verify(json: json, bundleDigestHex: actual, publicKey: key)
                    report.signatureValid = true
                    report.signerChecked = publicKey != nil
                } catch {
                    report.signatureValid = false
                    issue(error)
                }
            } else if publicKey != nil {
                issue(nil, "the bundle is not signed, but a public key was given")
            }
        } catch {
            issue(error)
        }
    }

    private static func compareFormat(_ manifest: Manifest, with bundle: MountedBundle, issue: (String?, String) -> Void) {
        if manifest.format != "packager-bundle" || manifest.formatVersion != bundle.formatVersion {
            issue(BundleFormat.manifestEntryName, "has format \(manifest.format) version \(manifest.formatVersion)")
        }
    }

    /// The manifest's entry at `position` against the index's.
    private static func compare(_ item: ManifestEntry, at position: Int, with bundle: MountedBundle, issue: (String?, String) -> Void) {
        let entry = bundle.entry(at: position)
        if item.key != entry.key {
            issue(item.key, "the manifest and the index disagree on the key at position \(position)")
            return
        }
        if item.status != entry.status || item.kind != entry.kind { issue(item.key, "the manifest and the index disagree on status or kind") }
        // Version 3 leaves a body's digest to the index: its manifest gives the sizes and compression, which must agree.
        // (The index's own record: a delta's body rebuilt from a patch is stored otherwise than its bundle stores it.)
        let record = entry.body.map { bundle.index.body(at: $0.index) }
        if item.body?.size != record?.size || item.body?.storedSize != record?.storedSize || item.body?.compression != record?.compression
            || (item.body?.sha256).map({ $0 != entry.body?.sha256 }) ?? false
        {
            issue(item.key, "the manifest and the index name different bodies")
        }
        if item.headers != bundle.headers(ofEntryAt: position).map({ [$0.name, $0.value] }) {
            issue(item.key, "the manifest and the index store different headers")
        }
        if bundle.formatVersion >= 2, (item.synthesized ?? []).contains("etag") != entry.etagSynthesized {
            issue(item.key, "the manifest and the index disagree on whether the ETag is synthesized")
        }
    }
}

/// `value`'s eight bytes, most significant first: records that start with it sort by it.
private func bigEndian(_ value: UInt64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }

extension UnsafeRawBufferPointer {
    /// The eight bytes at `offset`, most significant first.
    fileprivate func bigEndianU64(_ offset: Int) -> UInt64 { UInt64(bigEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
}
