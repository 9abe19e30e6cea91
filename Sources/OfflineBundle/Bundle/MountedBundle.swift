import Crypto
import Foundation
import Synchronization

/// A bundle file opened read-only, answering lookups from its compact index.
///
/// Mounting reads the ZIP end records, the central directory and `index.bin`;
/// it never reads a body. A body is read, inflated and checked only when
/// ``body(of:)`` asks for it. A mounted bundle is immutable and safe to share
/// between any number of tasks and threads.
///
/// ```swift
/// let bundle = try await MountedBundle.mount(.file("site.bundle.zip"))
/// if let entry = bundle.entry(for: "https://example.com/docs/") {
///     let html = try bundle.body(of: entry)
/// }
/// ```
public final class MountedBundle: Sendable {
    /// The path the bundle was mounted from.
    public var path: String { file.path }
    /// The name the bundle goes by when a loader says which bundle answered (a log field, a metric dimension, the
    /// access log of `packager serve`): ``Options/label``, or the file's name.
    public let label: String
    /// The bundle digest: SHA-256 of `index.bin`, in lowercase hex, as the ZIP comment records it.
    public let digest: String
    /// Whether the bundle carries a signature block (verified only when a key was required).
    public let isSigned: Bool
    /// The format version of the bundle file: ``BundleFormat/version`` (3) for what this library writes, 1 or 2 for older bundles it still mounts.
    public var formatVersion: Int { Int(index.formatVersion) }
    /// When the content was captured, as the writer recorded it (clamped to `SOURCE_DATE_EPOCH` when that was set);
    /// nil when the writer recorded no time (`packager pack`, and version-1 bundles).
    public var createdAt: Date? { index.createdAt.map { Date(timeIntervalSince1970: TimeInterval($0)) } }
    /// The declaration's rules the bundle carries: dropped query parameters, block patterns, substitutions.
    public var rules: BundleRules { index.rules }
    /// The number of request keys the bundle answers.
    public var entryCount: Int { index.entryCount }
    /// The number of distinct bodies stored.
    public var bodyCount: Int { index.bodyCount }
    /// The rules that turn URLs into this bundle's request keys.
    package let canonicalizer: RequestKeyCanonicalizer

    package let file: BundleFile
    /// The files bodies are read from: this bundle's own, then (for a delta) its base's, in the base's order.
    package let stores: [BundleFile]
    /// For a delta: where each body lies (which of ``stores``, and where in it); nil when every body lies in ``file``
    /// where the index says.
    private let relocation: BodyRelocation?
    /// The bundle a delta is mounted over (kept open while this one is); nil for a bundle that is not a delta.
    public let base: MountedBundle?
    /// What a delta says of itself (its base, what it carries and removes); nil for a bundle that is not a delta.
    public let delta: DeltaInfo?
    /// A delta's `manifest.patch` entry (a level byte, then a patch of its base's manifest), when it carries its
    /// manifest so; read only when the manifest is.
    package let manifestPatch: ZipCentralEntry?
    package let index: BundleIndex
    package let directory: ZipDirectory
    package let metadata: [String: ZipCentralEntry]
    package let verification: Options.Verification
    private let maxBodySize: UInt64
    /// One bit per body: checked once in this mount, then trusted (``BodyReader`` and ``body(of:)`` skip the checks).
    private let verified: VerifiedBodies
    /// One bit per body: failed its checks in ``scrub(shouldStop:)``, refused from then on while the file is unchanged.
    /// Read by ``scrub(shouldStop:)`` (MountedBundle+Scrub.swift) and the readers it refuses.
    let damaged: VerifiedBodies
    /// See ``Options/checkBeforeSend``.
    package let checkBeforeSend: UInt64
    /// Inflated bodies kept for identity answers (checked before they are kept).
    package let inflatedCache: InflatedCache?
    /// With ignore-query rules: the query-less URLs of entries recorded with a query, each with whether the query
    /// matters there (its recorded versions differ from the query-less entry in status or body). Made on the first
    /// query no entry holds, not at mount: every packed bundle carries the rule, and most never need it.
    let queryVariantPaths = Mutex<[String: Bool]?>(nil)
    /// The entries by the path of their URL (without its query), and those paths by their folder (up to the last `/`):
    /// made on the first miss explained, not at mount.
    let pathTable = Mutex<(byPath: [String: [Int]], byFolder: [Substring: [String]])?>(nil)
    /// The request bodies the manifest records, by key (each at most 64 KiB): read on the first miss whose body is
    /// compared under a `match` rule, to say where it differs.
    let recordedBodies = Mutex<[String: Data]?>(nil)
    /// The entries whose keys carry request qualifiers, by the canonical URL before them: built at mount in a bundle
    /// with request qualifiers (one pass over the keys, and a parse of the qualified ones), none in another.
    let variantTable: VariantTable?
    /// The bundle's `match` rules, read once (a few, where a declaration gave some; none in most bundles).
    let bodyMatches: [BundleRules.BodyMatch]

    /// Mounts the bundle at `path`.
    ///
    /// - Throws: ``BundleError`` when the file cannot be read, is not a bundle,
    ///   is truncated, damaged or hostile, or lacks a valid signature by
    ///   `options.requiredPublicKey`.
    package convenience init(path: String, options: Options = Options()) throws {
        let file = try BundleFile(path: path)
        let directory = try ZipDirectory.locate(in: file)
        // The archive comment says the version, and so how body entries are named (§2.5).
        let comment = String(decoding: directory.comment, as: UTF8.self)
        let version: UInt32
        if comment.hasPrefix("packager-delta/") {
            let base = comment.range(of: " base:").map { "the bundle sha256:" + comment[$0.upperBound...].prefix(16) + "…" } ?? "another bundle"
            throw BundleError(
                .unsupported,
                "\(path) is a delta: it holds only what changed since \(base), and mounts over that bundle: give it after the delta (packager serve DELTA BASE, packager check DELTA BASE; packager apply BASE DELTA -o FILE rebuilds the whole bundle; in Swift, MountedBundle.mount(.delta(.file(DELTA), over: .file(BASE))))"
            )
        } else if let known = BundleFormat.version(ofComment: comment) {
            version = known
        } else if comment.hasPrefix("packager-bundle/") {
            throw BundleError(
                .unsupported, "\(path) is a packager bundle of another format version (\(comment.prefix(20))…); this reader knows versions 1 to 3")
        } else {
            version = 0
        }
        var metadata = [String: ZipCentralEntry]()
        var bodyEntries = 0
        var firstMetadataOffset = directory.centralDirectoryOffset
        let bodyPrefix = Array((version == 1 ? BundleFormat.v1BodyPrefix : BundleFormat.bodyPrefix).utf8)
        let nameLengths = version == 1 ? 71...71 : (2 + IndexLayout.bodyNameDigits)...66
        // Body records are not decoded at mount: the index describes them, and reads check their local headers.
        let skipBodies: (UnsafeRawBufferPointer) -> Bool = { name in
            guard nameLengths.contains(name.count), name.starts(with: bodyPrefix) else { return false }
            bodyEntries += 1
            return true
        }
        try directory.forEachEntry(from: file, skip: skipBodies) { entry in
            guard metadata[entry.name] == nil else {
                throw BundleError(.hostile, "the central directory lists \(entry.name) twice", entry: entry.name)
            }
            metadata[entry.name] = entry
            firstMetadataOffset = min(firstMetadataOffset, entry.localHeaderOffset)
            return true
        }
        guard let indexEntry = metadata[BundleFormat.indexEntryName] else {
            throw BundleError(.notABundle, "\(path) is a ZIP file but holds no \(BundleFormat.indexEntryName): it is not a packager bundle")
        }
        guard version > 0 else {
            throw BundleError(.notABundle, "\(path) lacks the packager bundle comment; it is not a bundle, or its end record is damaged")
        }
        let recordedDigest = String(comment.dropFirst(BundleFormat.commentPrefix(version: version).count + 7).prefix(64))

        let index: BundleIndex
        // The bundle digest is the SHA-256 of the file's index (a version-1 index is held converted).
        let indexSHA256: () -> [UInt8]
        if let scratch = options.indexScratch, version >= 2, indexEntry.uncompressedSize > UInt64(scratch.above) {
            let mapped = try Self.readIndex(indexEntry, version: version, from: file, bodyArea: directory.centralDirectoryOffset, folder: scratch.folder)
            index = try BundleIndex(mapped: mapped, bodyArea: firstMetadataOffset, maxRatio: options.maxCompressionRatio)
            indexSHA256 = { mapped.sha256() }
        } else {
            let indexBytes = try Self.readIndex(indexEntry, version: version, from: file, bodyArea: directory.centralDirectoryOffset)
            index = try BundleIndex(bytes: indexBytes, bodyArea: firstMetadataOffset, maxRatio: options.maxCompressionRatio)
            indexSHA256 = { Array(SHA256.hash(data: indexBytes)) }
        }
        guard index.formatVersion == version else {
            throw BundleError(.corruptIndex, "the archive comment says format version \(version) but index.bin is version \(index.formatVersion)")
        }
        guard index.bodyCount == bodyEntries else {
            throw BundleError(.corruptIndex, "index.bin lists \(index.bodyCount) bodies but the central directory holds \(bodyEntries)")
        }

        let signed = try Self.checkSignature(
            metadata[BundleFormat.signatureEntryName], file: file, indexSHA256: indexSHA256, recordedDigest: recordedDigest, options: options,
            bodyArea: directory.centralDirectoryOffset)
        self.init(
            file: file, directory: directory, metadata: metadata, index: index, digest: recordedDigest, signed: signed, options: options, stores: [file],
            relocation: nil, base: nil, delta: nil, manifestPatch: nil)
    }

    /// Checks the signature block `entry` when `options` require a key (§7); says whether the bundle is signed.
    package static func checkSignature(
        _ entry: ZipCentralEntry?, file: BundleFile, indexSHA256: () -> [UInt8], recordedDigest: String, options: Options, bodyArea: UInt64
    ) throws -> Bool {
        guard let entry else {
            if options.requiredPublicKey != nil {
                throw BundleError(.signature, "the bundle is not signed, and a signature by the configured public key is required")
            }
            return false
        }
        if let key = options.requiredPublicKey {
            let signature = try readMetadataEntry(entry, from: file, limit: 1 << 16, bodyArea: bodyArea)
            let actual = hexString(indexSHA256())
            guard actual == recordedDigest else {
                throw BundleError(.signature, "the bundle digest in the ZIP comment does not match index.bin: the bundle was altered")
            }
            try SignatureBlock.verify(json: signature, bundleDigestHex: actual, publicKey: key)
        }
        return true
    }

    /// Takes the parts a mount read and checked.
    package init(
        file: BundleFile, directory: ZipDirectory, metadata: [String: ZipCentralEntry], index: BundleIndex, digest: String, signed: Bool,
        options: Options, stores: [BundleFile], relocation: BodyRelocation?, base: MountedBundle?, delta: DeltaInfo?, manifestPatch: ZipCentralEntry?
    ) {
        self.manifestPatch = manifestPatch
        self.file = file
        self.stores = stores
        self.relocation = relocation
        self.base = base
        self.delta = delta
        self.label = options.label ?? (file.path as NSString).lastPathComponent
        self.directory = directory
        self.metadata = metadata
        self.index = index
        self.digest = digest
        self.isSigned = signed
        self.canonicalizer = RequestKeyCanonicalizer(rules: index.rules, formQuery: index.readsQueriesAsForms)
        // Checked when the index was read (an unknown form is refused there), so every rule reads.
        self.bodyMatches = index.rules.match.compactMap(BundleRules.bodyMatch)
        self.verification = options.verification ?? (options.requiredPublicKey == nil ? .crc32 : .sha256)
        self.maxBodySize = options.maxBodySize
        self.verified = VerifiedBodies(count: index.bodyCount)
        self.damaged = VerifiedBodies(count: index.bodyCount)
        self.checkBeforeSend = options.checkBeforeSend
        self.variantTable = index.hasRequestQualifiers ? VariantTable(index) : nil
        self.inflatedCache = options.inflatedCacheBytes > 0 ? InflatedCache(capacity: options.inflatedCacheBytes) : nil
    }

    /// Whether body `bodyIndex` may be read again without its checks, or sent as a span of the file: it passed them in
    /// this mount (by SHA-256 when the mount checks by SHA-256) and the file is still the one mounted
    /// (``fileUnchanged``). See docs/FORMAT.md §8.2.
    package func isVerified(_ bodyIndex: Int) -> Bool { verified.contains(bodyIndex) && bodyFile(bodyIndex).unchanged }

    /// Body `bodyIndex`'s record, with where it lies in ``bodyFile(_:)`` (for a delta, in its own file or a base's).
    package func bodyRecord(at bodyIndex: Int) -> IndexBodyRecord {
        var record = index.body(at: bodyIndex)
        if let relocation {
            record.localHeaderOffset = relocation.offsets[bodyIndex]
            record.dataOffset = relocation.offsets[bodyIndex] + UInt64(relocation.headerLengths[bodyIndex])
            // A body rebuilt from a patch is stored as the runtime deflated it, not as the target's writer did.
            if let rebuilt = relocation.rebuilt[bodyIndex] {
                record.storedSize = rebuilt.storedSize
                record.storedCRC32 = rebuilt.storedCRC32
            }
        }
        return record
    }

    /// The file body `bodyIndex` is read from.
    package func bodyFile(_ bodyIndex: Int) -> BundleFile { stores[bodyStore(bodyIndex)] }

    /// For a body a delta rebuilt from a patch: the level its target's writer deflated it at (0: stored), which
    /// `packager apply` deflates it at again; nil for every other body.
    package func rebuiltLevel(_ bodyIndex: Int) -> UInt8? { relocation?.rebuilt[bodyIndex]?.level }

    /// How a body rebuilt from a patch lies stored (for a delta over this one to take over).
    package func rebuilt(_ bodyIndex: Int) -> BodyRelocation.Rebuilt? { relocation?.rebuilt[bodyIndex] }

    /// Which of ``stores`` body `bodyIndex` lies in (0, this bundle's own file, for a bundle that is not a delta).
    package func bodyStore(_ bodyIndex: Int) -> Int { relocation.map { Int($0.stores[bodyIndex]) } ?? 0 }

    /// How many deltas stand over a bundle that is not one, this one included (0 for a bundle that is not a delta).
    public var deltaDepth: Int { base.map { $0.deltaDepth + 1 } ?? 0 }

    /// Whether the bundle file is still as it was mounted: same device, inode, size, modification and status-change
    /// times (one `fstat`). A file written in place after mounting fails this for good, and its bodies are then
    /// checked again on every read.
    package var fileUnchanged: Bool { stores.allSatisfy(\.unchanged) }
    package func markVerified(_ bodyIndex: Int) { verified.insert(bodyIndex) }

    // MARK: Lookup

    /// The entry that answers `url` after canonicalization, or nil when the bundle has none.
    public func entry(for url: String) -> BundleEntry? {
        var url = url
        return url.withUTF8 { buffer -> BundleEntry? in
            guard let key = canonicalizer.canonicalBytes(UnsafeRawBufferPointer(buffer)) else { return nil }
            return key.withUnsafeBytes { index.find(canonicalKey: $0) }.map(makeEntry)
        }
    }

    /// Whether keys may carry request qualifiers (method, body digest, request headers; docs/FORMAT.md §5.4), so that
    /// a URL may have several recorded answers and ``entry(for:)-(BundleRequest)`` chooses among them.
    public var hasRequestVariants: Bool { index.hasRequestQualifiers }

    /// Whether its keys' queries are read as forms (header flag bit 1, docs/FORMAT.md §5.1 rule 11).
    public var readsQueriesAsForms: Bool { index.readsQueriesAsForms }

    /// The entry that answers `request`: its method, headers and body as well as its URL (docs/FORMAT.md §8.4 H19).
    ///
    /// In a bundle without request qualifiers, the entry for the URL answers GET and HEAD and nothing else answers.
    /// In one with them, every answer recorded for the URL is a candidate, and the one whose method, body digest and
    /// recorded request headers the request satisfies answers (content negotiation on `Accept` and
    /// `Accept-Language`); a request that none satisfies is a miss, never another variant's answer.
    public func entry(for request: BundleRequest) -> BundleEntry? {
        let method = RequestQualifiers.asciiUppercased(request.method)
        guard let table = variantTable else { return method == "GET" || method == "HEAD" ? entry(for: request.url) : nil }
        // A body past what readers match on matches nothing (H19).
        if let body = request.body, body.count > BundleRequest.maxBodySize { return nil }
        var url = request.url
        return url.withUTF8 { buffer -> BundleEntry? in
            guard let key = canonicalizer.canonicalBytes(UnsafeRawBufferPointer(buffer)) else { return nil }
            return key.withUnsafeBytes { bytes -> BundleEntry? in
                let h = IndexLayout.hash(bytes)
                guard let group = table.group(bytes, hash: h) else {
                    return method == "GET" || method == "HEAD" ? index.find(canonicalKey: bytes, hash: h).map(makeEntry) : nil
                }
                // A body counts only where an answer to this method was recorded with one in mind (H19 rule 2): what
                // matchesBody(method:url:) tells an integration before it collects a body.
                let counts = request.body != nil && group.candidates.contains { Self.bodyMatters($0, method: method) }
                // Matched in its canonical form where a match rule covers the URL (§5.5).
                let body =
                    !counts
                    ? nil
                    : bodyMatches.isEmpty
                        ? request.body
                        : BundleRules.bodyForMatching(bodyMatches, canonicalKey: String(decoding: bytes, as: UTF8.self), body: request.body)
                return RequestQualifiers.choose(group.candidates, method: method, headers: request.headers, body: body).map(makeEntry)
            }
        }
    }

    /// Whether the bundle recorded answers to `url` for requests other than its plain GET (request variants), so that
    /// what answers a GET of it may depend on the request's headers.
    public func variesByRequest(url: String) -> Bool {
        guard let table = variantTable, let key = canonicalizer.canonicalBytes(url) else { return false }
        return key.withUnsafeBytes { table.group($0, hash: IndexLayout.hash($0)) != nil }
    }

    /// Whether the query-less URL that ``entryIgnoringQuery(for:)-(BundleRequest)`` would answer `url` from has request
    /// variants: an answer found that way then depends on the request's headers as much as one found at `url` itself.
    package func querylessVariesByRequest(url: String) -> Bool {
        guard variantTable != nil, !index.rules.ignoreQuery.isEmpty, let key = canonicalizer.canonicalize(url), let mark = key.firstIndex(of: "?")
        else { return false }
        let path = String(key[..<mark])
        return index.rules.ignoreQueryPattern(matching: path) != nil && variesByRequest(url: path)
    }

    /// Whether a request's body takes part in matching `method` at `url`: the bundle recorded an answer to that
    /// method there (a GET's only when it was recorded with a body). An integration collects the body (at most
    /// ``BundleRequest/maxBodySize`` bytes) only then.
    public func matchesBody(method: String, url: String) -> Bool {
        guard let table = variantTable, let key = canonicalizer.canonicalBytes(url) else { return false }
        let method = RequestQualifiers.asciiUppercased(method)
        guard let group = key.withUnsafeBytes({ table.group($0, hash: IndexLayout.hash($0)) }) else { return false }
        return group.candidates.contains { Self.bodyMatters($0, method: method) }
    }

    /// Whether `candidate` makes a request body count for `method` (uppercase): it was recorded for that method, and
    /// for a GET, with a body.
    static func bodyMatters(_ candidate: RequestQualifiers.Candidate, method: String) -> Bool {
        let method = method == "HEAD" ? "GET" : method
        return candidate.qualifiers.method == method && (method != "GET" || candidate.qualifiers.bodyDigest != nil)
    }

    /// The entry whose canonical key is exactly `key`, or nil.
    public func entry(forKey key: String) -> BundleEntry? {
        var key = key
        return key.withUTF8 { index.find(canonicalKey: UnsafeRawBufferPointer($0)) }.map(makeEntry)
    }

    /// Every entry, in key order.
    public var entries: [BundleEntry] { (0..<index.entryCount).map(makeEntry) }

    /// The entry at `position` in key order (0 up to ``entryCount``).
    package func entry(at position: Int) -> BundleEntry { makeEntry(position) }

    private func makeEntry(_ i: Int) -> BundleEntry {
        let fields = index.entryFields(i)
        let body = fields.body.map { b -> BundleEntry.Body in
            // As the body lies here: a delta's body rebuilt from a patch has the stored size of the runtime's stream.
            let record = bodyRecord(at: b)
            return BundleEntry.Body(
                index: b, sha256: hexString(record.sha256), size: record.size, storedSize: record.storedSize, compression: record.compression,
                crc32: record.crc32)
        }
        return BundleEntry(
            position: i, bundle: self, status: Int(fields.status), kind: fields.kind, body: body,
            etagSynthesized: fields.flags & IndexLayout.flagETagSynthesized != 0,
            lastModifiedSynthesized: fields.flags & IndexLayout.flagLastModifiedSynthesized != 0,
            fetchedAt: fields.fetchedAt.map { Date(timeIntervalSince1970: TimeInterval($0)) },
            originDate: fields.originDate.map { Date(timeIntervalSince1970: TimeInterval($0)) })
    }

    package func headers(ofEntryAt i: Int) -> [(name: String, value: String)] { index.entryHeaders(i) }
    package func key(ofEntryAt i: Int) -> String { index.entryKey(i) }

    // MARK: Bodies

    /// The entry's body, inflated and checked; empty when the entry has none.
    ///
    /// Read by the same ``BodyReader`` a server streams with, so one place decides what is checked: a body not yet
    /// checked in this mount is checked (CRC-32, and SHA-256 when so configured), one that passed is trusted while the
    /// file is unchanged (a file cut short still fails).
    ///
    /// - Throws: ``BundleError`` with code `.corruptBody` when the bytes do not
    ///   match the recorded CRC-32 (and SHA-256 when so configured), `.hostile`
    ///   when they claim more than `maxBodySize`, `.corruptDirectory` when the
    ///   local header disagrees with the index. Wrong bytes are never returned.
    public func body(of entry: BundleEntry) throws -> Data {
        guard let body = entry.body else { return Data() }
        // One chunk for a body up to 1 MiB, and no buffer larger than the body.
        let chunk = Int(min(body.size, 1 << 20))
        return try BodyReader(bundle: self, bodyIndex: body.index, shape: .identity, chunkSize: chunk).readAll()
    }

    /// The stored deflate stream of a compressed body, with what a gzip trailer needs.
    ///
    /// A server can send `gzipHeader + data + trailer(crc32, size)` to a client
    /// that accepts gzip without inflating anything. Returns nil when the body is
    /// stored uncompressed. Unless `verify` is false the stream is checked: by the CRC-32 of the stored stream
    /// (version 2, CRC-32 checking), else by inflating it once (SHA-256 checking, or version 1).
    public func deflatedBody(of entry: BundleEntry, verify: Bool = true) throws -> DeflatedBody? {
        guard let body = entry.body, body.compression == .deflate else { return nil }
        let record = bodyRecord(at: body.index)
        let name = bodyName(record)
        try checkClaimedSize(record, name: name)
        let raw = try readStored(record, from: bodyFile(body.index), name: name)
        if verify {
            if verification == .crc32 && index.hasStoredChecksums {
                // Version 2 records the CRC-32 of the stored stream: the bytes to be sent are checked as they are.
                try BodyCheck.storedCRC(CRC32.checksum(raw), of: record, name: name)
            } else {
                // SHA-256 verification (a signed bundle) checks the digest of the inflated bytes; version 1 has no stored checksum.
                _ = try raw.withUnsafeBytes { try checkedInflate($0, record: record, name: name, verification: verification) }
            }
        }
        return DeflatedBody(data: Data(raw), crc32: record.crc32, size: record.size)
    }

    /// A body's name for messages: its ZIP entry name's fixed part.
    package func bodyName(_ record: IndexBodyRecord) -> String {
        index.formatVersion == 1
            ? BundleFormat.v1BodyPrefix + hexString(record.sha256)
            : BundleFormat.bodyPrefix + hexString(record.sha256.prefix(IndexLayout.bodyNameDigits / 2))
    }

    /// A body read whole and checked whatever this mount trusts already, as `verification` says: what `check` and
    /// `export` read, which must check every body again.
    package func bodyBytes(at bodyIndex: Int, verification: Options.Verification) throws -> [UInt8] {
        let record = bodyRecord(at: bodyIndex)
        let name = bodyName(record)
        try checkClaimedSize(record, name: name)
        let raw = try readStored(record, from: bodyFile(bodyIndex), name: name)
        // A whole read is always checked: it inflates anyway, and the CRC-32 (or SHA-256) costs little beside that.
        let output = try raw.withUnsafeBytes { try checkedInflate($0, record: record, name: name, verification: verification) }
        // Trusted from now on only when checked as this mount checks bodies.
        if verification == .sha256 || self.verification == .crc32 { verified.insert(bodyIndex) }
        return output
    }

    /// Reads a body's local header and stored bytes in one read, checking the header against the index.
    private func readStored(_ record: IndexBodyRecord, from file: BundleFile, name: String) throws -> [UInt8] {
        let headerLength = Int(record.dataOffset - record.localHeaderOffset)
        guard record.storedSize <= UInt64(Int.max - headerLength) else {
            throw BundleError(.hostile, "body claims an impossible stored size", entry: name)
        }
        var bytes = try file.read(at: record.localHeaderOffset, count: headerLength + Int(record.storedSize), what: "body \(name)")
        try checkLocalHeader(bytes, of: record)
        bytes.removeFirst(headerLength)
        return bytes
    }

    /// Refuses a body that claims more than `maxBodySize` inflated bytes, as hostile.
    package func checkClaimedSize(_ record: IndexBodyRecord, name: String) throws {
        guard record.size <= maxBodySize else {
            throw BundleError(.hostile, "body claims \(record.size) bytes, over the limit of \(maxBodySize)", entry: name)
        }
    }

    /// Checks a body's local header (its first bytes, or more) against what the index records (§8.2 step 3).
    package func checkLocalHeader(_ bytes: [UInt8], of record: IndexBodyRecord) throws {
        try LocalHeader.check(
            bytes, sha256: record.sha256, version: index.formatVersion, method: record.compression.rawValue, crc32: record.crc32,
            storedSize: record.storedSize, size: record.size, headerLength: Int(record.dataOffset - record.localHeaderOffset))
    }

    private func checkedInflate(_ raw: UnsafeRawBufferPointer, record: IndexBodyRecord, name: String, verification: Options.Verification) throws -> [UInt8] {
        let output: [UInt8]
        switch record.compression {
        case .stored: output = Array(raw)
        case .deflate: output = try RawInflate.inflate(raw, expectedSize: Int(record.size), entry: name)
        }
        try BodyCheck.contentCRC(CRC32.checksum(output), of: record, name: name)
        if verification == .sha256 { try BodyCheck.digest(Array(SHA256.hash(data: output)), of: record, name: name) }
        return output
    }
}
