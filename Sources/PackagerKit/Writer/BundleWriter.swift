import CMalloc
import Crypto
import Dispatch
import Foundation
import HTTPTypes
import OfflineBundle

/// Writes a bundle: bodies stored once each by SHA-256, compressed by media type, reproducibly.
///
/// Add entries, then call ``write(to:)``. Bodies are hashed and compressed in
/// parallel, kept in memory up to a budget and spooled beyond it, then written
/// in digest order to a temporary file that is renamed into place only once it
/// is complete and synced.
public struct BundleWriter: Sendable {
    /// Where an entry's body comes from.
    public enum BodySource: Sendable {
        /// A local file, read when the bundle is written.
        case file(String)
        /// Bytes in memory.
        case data(Data)
        /// A body of a mounted bundle (one being refreshed), read and checked when the bundle is written, one at a
        /// time: carrying a bundle's bodies over does not hold them all in memory.
        indirect case bundle(MountedBundle, BundleEntry)
    }

    /// The name ``RecordedExchange`` had before it was a type of its own.
    @available(*, deprecated, renamed: "RecordedExchange")
    public typealias Entry = RecordedExchange

    /// Settings for a write.
    public struct Options: Sendable {
        /// The declaration's rules, recorded in the bundle for the loader: dropped query parameters, block patterns,
        /// substitutions.
        public var rules: BundleRules
        /// Query parameter patterns dropped from request keys; recorded in the bundle for the loader.
        public var dropQueryParameters: [String] {
            get { rules.dropQueryParameters }
            set { rules.dropQueryParameters = newValue }
        }
        /// When the content was captured; nil keeps the bundle free of any time.
        public var createdAt: Date?
        /// Every time the bundle records (creation, fetch times, the origins' `Date`) is clamped to this one, and
        /// `Expires` moved with the `Date` it was sent with, so that two builds of an unchanged site are byte-identical.
        /// Defaults to `SOURCE_DATE_EPOCH` from the environment (reproducible-builds.org).
        public var timeClamp: Date?
        /// When set, the bundle is signed with this Ed25519 key.
        public var signingKey: Curve25519.Signing.PrivateKey?
        /// Deflate level for compressed bodies and the manifest: 1 (fastest) to 12 (smallest), libdeflate's scale.
        public var compressionLevel: Int
        /// How many bodies are hashed and compressed at once.
        public var concurrency: Int
        /// Compressed bytes kept in memory before further ones are spooled to disk.
        public var memoryBudget: Int
        /// Whether queries are read as forms when keys are made (docs/FORMAT.md §5.1 rule 11): true for every new
        /// bundle; refresh writes an older bundle's keys the way it was written.
        public var readsQueriesAsForms = true
        /// Whether `index.bin` is stored as it is rather than deflated (docs/FORMAT.md §4): a larger bundle (15.8 MB of
        /// index instead of 6.6 MB for 100,000 small files) that mounts without inflating it (9 ms instead of 30).
        public var storesIndex = false
        /// The size from which `index.bin` is deflated as a stream (``BundleWriter/indexStreamSize``); lowered by tests.
        package var indexStreamSize = BundleWriter.indexStreamSize
        /// How many bytes each of the writer's tables that grow with the entries (the keys, being sorted; the bodies by
        /// digest; the prepared bodies' records; the index's parts) holds in memory before it goes to the scratch
        /// folder; lowered by tests. nil: 2 MiB when the entries come from a store (an import, a crawl), and no limit
        /// when they are in memory (``add(_:)``), where the tables are a small part of what the entries hold and a
        /// spill only costs time (a fifth of packing 100,000 files); the index's parts then go past 4 MiB each.
        package var tableMemoryLimit: Int?

        /// Creates options.
        public init(
            dropQueryParameters: [String] = [], rules: BundleRules = BundleRules(), createdAt: Date? = nil,
            signingKey: Curve25519.Signing.PrivateKey? = nil, compressionLevel: Int = BundleWriter.defaultCompressionLevel,
            concurrency: Int = ProcessInfo.processInfo.activeProcessorCount, memoryBudget: Int = 256 << 20,
            timeClamp: Date? = BundleWriter.sourceDateEpoch()
        ) {
            self.rules = rules
            if !dropQueryParameters.isEmpty { self.rules.dropQueryParameters = dropQueryParameters }
            self.createdAt = createdAt
            self.timeClamp = timeClamp
            self.signingKey = signingKey
            self.compressionLevel = compressionLevel
            self.concurrency = concurrency
            self.memoryBudget = memoryBudget
        }
    }

    /// What a write produced.
    public struct Summary: Sendable, Equatable {
        public var entries: Int
        public var bodies: Int
        /// Bodies that were identical to another and stored once.
        public var deduplicated: Int
        public var bodyBytes: UInt64
        public var storedBytes: UInt64
        public var fileSize: UInt64
        /// SHA-256 of index.bin, lowercase hex.
        public var digest: String
        public var signed: Bool
    }

    /// The compression level a writer uses unless told otherwise (`packager pack`): the densest level that stays at
    /// zlib's speed on long text. `packager build` uses ``Builder/defaultCompressionLevel``.
    public static let defaultCompressionLevel = 8

    /// `SOURCE_DATE_EPOCH` from the environment, when it is set to a whole number of seconds.
    public static func sourceDateEpoch(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Date? {
        guard let text = environment["SOURCE_DATE_EPOCH"], let seconds = Int64(text.trimmingCharacters(in: .whitespaces)) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// The generator string recorded in manifests.
    public static let generator = "packager \(PackagerVersion.string)"

    /// Headers never written into a bundle: credentials, and hop-by-hop headers that describe one connection (the
    /// runtime's header policy, which every part of the package reads).
    public static var droppedHeaders: Set<String> { HeaderPolicy.neverStored }

    public var options: Options
    public private(set) var entries: [RecordedExchange] = []
    /// The build this writer is part of (its scratch folder, overflow file and memory budget), when it is one; a writer
    /// on its own makes a scratch folder beside its output and a budget of ``Options/memoryBudget``.
    let session: BuildSession?

    /// Creates an empty writer.
    public init(options: Options = Options()) {
        self.options = options
        session = nil
        store = nil
    }

    /// A writer for a build: its bodies' memory is what the crawl left of the session's budget (the compressed bodies
    /// draw on the same budget the crawl's received ones did), its scratch files are the session's, and the crawl's
    /// entries come from `store`, read back one at a time as the bundle is written.
    init(options: Options, session: BuildSession, store: EntryStore? = nil) {
        self.options = options
        self.session = session
        self.store = store
    }

    /// Adds an entry.
    public mutating func add(_ entry: RecordedExchange) { entries.append(entry) }

    /// A crawl's entries, read back one at a time as the bundle is written; they come after ``entries``. A writer with a
    /// store writes once: the store hands its prepared bodies over.
    let store: EntryStore?

    /// Entries of the store a later one replaced (a recording that holds the same request twice keeps the later answer):
    /// left out of the bundle, by their index among ``entries`` and then the store's.
    var superseded: Set<Int> = []

    /// How many entries the bundle gets: ``entries``, then the store's.
    var entryCount: Int { entries.count + (store?.count ?? 0) }

    /// The entry at `index` among ``entries`` and then the store's.
    func entry(at index: Int) throws -> RecordedExchange {
        if index < entries.count { return entries[index] }
        guard let store else { preconditionFailure("entry \(index) of \(entryCount)") }
        return try store.entry(at: index - entries.count)
    }

    /// Writes the bundle to `path`, atomically.
    ///
    /// - Throws: ``PackagerError`` when a key is malformed or answered twice,
    ///   a body cannot be read, or the output cannot be written. On any error
    ///   nothing is left at `path` (a bundle already there is kept).
    @discardableResult
    public func write(to path: String) throws -> Summary {
        let output = try AtomicOutput(destination: path)
        let ownScratch = session == nil ? try ScratchFolder(besideOutput: path) : nil
        defer { ownScratch?.remove() }
        let scratch = (session?.scratch ?? ownScratch)?.path
        let tableLimit = options.tableMemoryLimit ?? (store == nil ? nil : 2 << 20)
        // The tables' folder: none when they stay in memory.
        let tables = tableLimit == nil ? nil : scratch
        let keys = try keyedEntries(scratch: tables, memoryLimit: tableLimit ?? .max)
        let spool = session?.overflow ?? OverflowFile(in: ownScratch!)
        let memory = session?.received ?? MemoryBudget(total: options.memoryBudget, perBody: .max)
        let zip = ZipWriter(output: output, spill: spool)
        // The bodies, prepared in the entries' own order, each distinct one written once in digest order; their bytes
        // are let go as they are written, and what the manifest and the index need of them is kept.
        let prepared = try prepareBodies(spool: spool, memory: memory, scratch: tables, memoryLimit: tableLimit ?? .max)
        let bodies = try DistinctBodies(prepared, keys: keys, scratch: tables, memoryLimit: tableLimit ?? .max)
        let deduplicated = bodies.duplicates
        // The index's parts that grow with the entries go to the scratch folder past half the tables' limit (1 MiB), or
        // 4 MiB when the tables stay in memory (``Options/tableMemoryLimit``).
        var index = try IndexAccumulator(
            entryCount: keys.count, bodyCount: bodies.count, spillFolder: scratch, memoryLimit: tableLimit.map { $0 / 2 } ?? 4 << 20)
        index.formQuery = keys.formQuery
        // The prepared bodies go with the writing: from here on what the manifest needs of a body is its record in the index.
        try Self.writeBodies(bodies, of: consume prepared, to: zip, output: output, spool: spool, index: &index)
        // The bodies kept in memory were freed by the writer, but allocated by the crawl's threads: their pages stay
        // with those threads' arenas unless given back (5 MB of the peak, whatever the site's size).
        packager_release_free_memory()
        let sink = ManifestSink(level: options.compressionLevel, spool: spool)
        let totals = try metadata(keys, bodies: bodies, index: &index, manifest: sink)
        // The keys and the bodies' order are let go before the index is finished.
        let (keyCount, bodyCount) = (keys.count, bodies.count)
        _ = consume keys
        _ = consume bodies
        let manifest = try sink.finish()
        // index.bin in pieces, the accumulator let go (its arrays are the pieces); joined only to be deflated.
        let indexPieces = try (consume index).finish(
            manifestSHA256: manifest.sha256, rules: options.rules, createdAt: clamped(options.createdAt).map(Self.seconds))
        var hasher = SHA256()
        for piece in indexPieces { try piece.forEachPart { hasher.update(bufferPointer: $0) } }
        let digest = hexString(Array(hasher.finalize()))
        try writeMetadata(index: consume indexPieces, manifest: manifest, digest: digest, to: zip, output: output, spool: spool)
        try zip.finish(comment: Array((BundleFormat.commentPrefix + "sha256:" + digest).utf8))
        let fileSize = output.offset
        try output.commit()
        return Summary(
            entries: keyCount, bodies: bodyCount, deduplicated: deduplicated,
            bodyBytes: totals.bodyBytes, storedBytes: totals.storedBytes, fileSize: fileSize, digest: digest,
            signed: options.signingKey != nil)
    }

    /// Each entry's body hashed and compressed (nil for none), in the entries' own order. A crawl's were prepared while
    /// it went on: they are taken from its store, not copied.
    private func prepareBodies(spool: OverflowFile, memory: MemoryBudget, scratch: String?, memoryLimit: Int) throws -> PreparedBodies {
        let ready: PreparedBodies
        if entries.isEmpty, let store {
            ready = store.takePrepared()
        } else {
            ready = try PreparedBodies(entries.map(\.prepared), folder: scratch, memoryLimit: memoryLimit)
            if let store {
                let taken = store.takePrepared()
                for i in 0..<taken.count { try ready.append(taken.body(at: i)) }
            }
        }
        // A crawl's store gives its prepared bodies (and has let the received ones go) to one write only.
        guard ready.count == entryCount else {
            throw PackagerError(.invalidInput, "a crawl's entries can be written to one bundle only; this writer's store was written already")
        }
        return try BodyPreparer(options: options, spool: spool, memory: memory).prepare(ready) { try entry(at: $0) }
    }

    /// Writes the distinct bodies in digest order, adding each one's record to the index and letting its bytes go once
    /// written, so the bodies kept in memory do not stay there while the metadata is made.
    private static func writeBodies(
        _ bodies: DistinctBodies, of prepared: consuming PreparedBodies, to zip: ZipWriter, output: AtomicOutput, spool: OverflowFile,
        index: inout IndexAccumulator
    ) throws {
        var copyBuffer = [UInt8](repeating: 0, count: 1 << 20)
        func digest(_ u: Int) throws -> [UInt8]? { u < bodies.count ? try prepared.digest(at: Int(bodies.entries.value(at: u)))?.bytes : nil }
        var (previous, this, next) = ([UInt8]?.none, try digest(0), try digest(1))
        for u in 0..<bodies.count {
            let entry = Int(try bodies.entries.value(at: u))
            guard let sha256 = this, let body = try prepared.body(at: entry) else { preconditionFailure("distinct body \(u)") }
            let name = BundleFormat.bodyEntryName(sha256: sha256, digits: bodyNameDigits(sha256, previous: previous, next: next))
            let offsets = try zip.beginEntry(name: name, method: body.compression.rawValue, crc32: body.crc32, compressedSize: body.storedSize, size: body.size)
            try body.storage.copy(
                to: output, storedSize: body.storedSize, expectedCRC: body.compression == .stored ? body.crc32 : nil, spool: spool, buffer: &copyBuffer)
            try prepared.setWritten(entry)
            try index.addBody(
                sha256: sha256, localHeaderOffset: offsets.localHeaderOffset, dataOffset: offsets.dataOffset, storedSize: body.storedSize, size: body.size,
                crc32: body.crc32, storedCRC32: body.storedCRC32, compression: body.compression)
            (previous, this, next) = (this, next, try digest(u + 2))
        }
    }

    /// How many hex digits of each digest its body's ZIP entry name holds (docs/FORMAT.md §2.1); see
    /// `IndexLayout.bodyNameDigits(_:)`.
    static func bodyNameDigits(_ digests: [[UInt8]]) -> [Int] { IndexLayout.bodyNameDigits(digests) }

    /// The digits of one body's name, given its neighbours in digest order.
    static func bodyNameDigits(_ digest: [UInt8], previous: [UInt8]?, next: [UInt8]?) -> Int {
        IndexLayout.bodyNameDigits(digest, previous: previous, next: next)
    }

    /// The manifest, written into `sink` entry by entry, and the index, added to entry by entry (no entry's record is
    /// kept until the end).
    private func metadata(
        _ keys: KeyTable, bodies: DistinctBodies, index: inout IndexAccumulator, manifest sink: ManifestSink
    ) throws -> ManifestTotals {
        func stored(_ u: Int) throws -> (sha256: ArraySlice<UInt8>, size: UInt64, storedSize: UInt64, compression: BodyCompression) {
            try index.body(at: u)
        }
        let totals = ManifestTotals(entries: keys.count, bodies: bodies.count, bodyBytes: index.bodyBytes, storedBytes: index.storedBytes)
        let manifest = Manifest(
            generator: Self.generator, createdAt: clamped(options.createdAt).map(HTTPDates.iso8601), rules: options.rules,
            entries: [], totals: totals)
        ManifestWriter.head(createdAt: manifest.createdAt, to: &sink.buffer)
        // Each key's body position, in key order, read beside the keys.
        let positions = try bodies.positions.sorted()
        func nextPosition() throws -> (key: Int, body: Int)? {
            try positions.next {
                (Int($0.loadUnaligned(as: UInt32.self).bigEndian), Int($0.loadUnaligned(fromByteOffset: 4, as: UInt32.self).littleEndian))
            }
        }
        var position = try nextPosition()
        try keys.forEachKey { i, entryIndex, keyBytes in
            let key = String(decoding: keyBytes, as: UTF8.self)
            let entry = try entry(at: entryIndex)
            var headers = entry.headers
                .map { (name: $0.name.lowercased(), value: String(Substring($0.value).trimmingWhitespace())) }
                .filter { !HeaderPolicy.neverStored.contains($0.name) }
            // A synthesized ETag is a flag, derived from the digest when answering: it is never stored as a header, so
            // it cannot pass for the origin's, and header blocks stay shareable.
            var flags: UInt8 = 0
            var bodyIndex: Int?
            if let at = position, at.key == i {
                bodyIndex = at.body
                position = try nextPosition()
            }
            if entry.synthesizeETag, bodyIndex != nil, !headers.contains(where: { $0.name == "etag" }) { flags |= IndexLayout.flagETagSynthesized }
            if entry.lastModifiedSynthesized, headers.contains(where: { $0.name == "last-modified" }) {
                flags |= IndexLayout.flagLastModifiedSynthesized
            }
            let fetchedAt = clamped(entry.fetchedAt)
            let originDate = clamped(entry.originDate)
            if let sent = entry.originDate, let originDate, sent != originDate { Self.moveExpires(in: &headers, by: originDate.timeIntervalSince(sent)) }
            // Describe the copy actually stored: identical bytes under two media types are stored once, one way.
            let body = try bodyIndex.map(stored).map {
                ManifestBody(size: $0.size, storedSize: $0.storedSize, compression: $0.compression)
            }
            ManifestWriter.line(
                Self.manifestEntry(
                    key, entry, headers: headers, body: body, flags: flags, fetchedAt: fetchedAt, originDate: originDate),
                first: i == 0, to: &sink.buffer)
            try sink.flush()
            try index.add(
                key: key, status: UInt16(entry.status), kind: entry.kind, flags: flags, headers: headers, body: bodyIndex,
                fetchedAt: fetchedAt.map(Self.seconds), originDate: originDate.map(Self.seconds))
        }
        ManifestWriter.tail(manifest, hasEntries: keys.count > 0, to: &sink.buffer)
        return totals
    }

    /// A time as the bundle records it: whole seconds, no later than ``Options/timeClamp``.
    private func clamped(_ date: Date?) -> Date? {
        guard let date else { return nil }
        let whole = Date(timeIntervalSince1970: Double(Self.seconds(date)))
        guard let clamp = options.timeClamp, whole > clamp else { return whole }
        return clamp
    }

    static func seconds(_ date: Date) -> Int64 {
        let t = date.timeIntervalSince1970.rounded(.down)
        return t >= -9.0e18 && t <= 9.0e18 ? Int64(t) : 0
    }

    /// Moves an `Expires` header by `delta` seconds, so it keeps its distance from a clamped `Date`.
    private static func moveExpires(in headers: inout [(name: String, value: String)], by delta: TimeInterval) {
        for i in headers.indices where headers[i].name == "expires" {
            if let expires = HTTPDates.parse(headers[i].value) { headers[i].value = HTTPDates.format(expires.addingTimeInterval(delta)) }
        }
    }

    private static func manifestEntry(
        _ key: String, _ entry: RecordedExchange, headers: [(name: String, value: String)], body: ManifestBody?, flags: UInt8, fetchedAt: Date?,
        originDate: Date?
    ) -> ManifestEntry {
        func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
        let contentType = header("content-type")
        let mediaType = contentType.map(MediaTypes.essence(of:))
        let redirectTo = header("location").flatMap { URLReference.resolve($0, against: key) }
        let etagSynthesized = flags & IndexLayout.flagETagSynthesized != 0
        var synthesized = [String]()
        if etagSynthesized { synthesized.append("etag") }
        if flags & IndexLayout.flagLastModifiedSynthesized != 0 { synthesized.append("last-modified") }
        let method = entry.request.map(\.method).flatMap { $0 == "GET" ? nil : $0 }
        return ManifestEntry(
            key: key, method: method, kind: entry.kind, status: entry.status, headers: headers.map { [$0.name, $0.value] },
            mediaType: mediaType, charset: contentType.flatMap(MediaTypes.charset(of:)), body: body,
            etag: header("etag"), lastModified: header("last-modified"),
            cacheControl: header("cache-control"), expires: header("expires"),
            fetchedAt: fetchedAt.map(HTTPDates.iso8601), date: originDate.map(HTTPDates.iso8601),
            redirectTo: (300...399).contains(entry.status) ? redirectTo : nil, source: entry.source,
            contentEncoding: body == nil ? nil : (header("content-encoding") ?? "identity"), synthesized: synthesized.isEmpty ? nil : synthesized,
            request: entry.request?.manifest, volatile: entry.volatile.isEmpty ? nil : entry.volatile, stableSha256: entry.stableSHA256)
    }

    /// How an `index.bin` under ``indexStreamSize`` is deflated, as a level byte (docs/FORMAT.md §12.1): libdeflate's
    /// raw deflate at level 6, which on a 15.6 MB index took 0.10 s where zlib's level 6 took 0.29 s, for 1.5 % less;
    /// level 7 takes 70 % longer for 0.2 % less. libdeflate deflates one buffer, so the index's pieces are joined for
    /// it; a larger index is streamed through zlib instead (``largeIndexLevel``), 0.2 s slower on 100,000 entries, so
    /// that it is never held twice. Deltas rebuild either.
    package static let indexLevel: UInt8 = 6

    /// From this size on, `index.bin` is deflated as a stream by zlib at level 6 (level byte ``largeIndexLevel``) rather
    /// than joined for libdeflate: about 30,000 entries and more. zlib takes about three times libdeflate's time on it
    /// (0.2 s more for 100,000 entries), and the write's peak memory is 30 MB lower for 100,000 entries.
    static let indexStreamSize = 8 << 20
    /// The level byte of a large index's stream (§12.1): zlib's level 6.
    package static let largeIndexLevel: UInt8 = 0x86

    /// `index.bin` and `manifest.json` (each deflated when that is smaller) and, when signing, `signature.json`.
    private func writeMetadata(
        index pieces: consuming [IndexPiece], manifest: ManifestSink.Finished, digest: String, to zip: ZipWriter, output: AtomicOutput,
        spool: OverflowFile
    ) throws {
        var crc: UInt32 = 0
        for i in pieces.indices { try pieces[i].forEachPart { crc = FastCRC32.checksum($0, continuing: crc) } }
        let size = UInt64(pieces.indices.reduce(0) { $0 + pieces[$1].count })
        // Deflated, as version 3 allows, when that is smaller: 100,000 small files' index takes 6.6 MB instead of 15.8.
        // Not past the 64 to 1 a reader takes (keys that repeat could deflate further): stored then.
        func deflates(to deflatedSize: UInt64) -> Bool { deflatedSize < size && size <= deflatedSize * BundleFormat.indexMaxRatio }
        var written = false
        if !options.storesIndex, size >= UInt64(options.indexStreamSize) {
            // A large index is deflated as a stream, piece by piece, into the overflow file: neither joined nor held
            // deflated (for 100,000 entries, 23 MB and 7 MB less at the peak of the write).
            let stream = try SpoolDeflater(level: Int(Self.largeIndexLevel & 0x7F), spool: spool, what: "the index")
            for i in pieces.indices { try pieces[i].forEachPart { try stream.feed($0, finish: false) } }
            try stream.feed(UnsafeRawBufferPointer(start: nil, count: 0), finish: true)
            if deflates(to: stream.size), let start = stream.start {
                _ = try zip.beginEntry(name: BundleFormat.indexEntryName, method: 8, crc32: crc, compressedSize: stream.size, size: size)
                var buffer = [UInt8](repeating: 0, count: 1 << 20)
                try PreparedBody.Storage.spool(offset: start).copy(to: output, storedSize: stream.size, expectedCRC: nil, spool: spool, buffer: &buffer)
                written = true
            }
        } else if !options.storesIndex {
            // Each piece let go once copied: the index is held once, not twice.
            var joined: [UInt8] = []
            joined.reserveCapacity(Int(size))
            for i in pieces.indices {
                try pieces[i].forEachPart { joined.append(contentsOf: $0) }
                let large = pieces[i].count >= 1 << 20
                pieces[i] = .bytes([])
                // A large piece's pages go back now (glibc keeps freed memory of the heap), not after the peak.
                if large { packager_release_free_memory() }
            }
            // nil when not smaller.
            if let deflated = try joined.withUnsafeBytes({ try RawDeflate.deflate($0, level: Int32(Self.indexLevel)) }),
                deflates(to: UInt64(deflated.count))
            {
                try zip.addEntry(name: BundleFormat.indexEntryName, method: 8, crc32: crc, size: size, data: deflated)
                written = true
            } else {
                pieces = [.bytes(joined)]
            }
        }
        // Stored: as it is, or when deflating did not make it smaller.
        if !written {
            _ = try zip.beginEntry(name: BundleFormat.indexEntryName, method: 0, crc32: crc, compressedSize: size, size: size)
            for i in pieces.indices { try pieces[i].forEachPart { try output.write($0) } }
        }
        switch manifest.stored {
        case .memory(_, let deflated?):
            try zip.addEntry(name: BundleFormat.manifestEntryName, method: 8, crc32: manifest.crc32, size: manifest.size, data: deflated)
        case .memory(let json, nil):
            try zip.addEntry(name: BundleFormat.manifestEntryName, method: 0, crc32: manifest.crc32, size: manifest.size, data: json)
        case .spool(let offset, let deflatedSize):
            _ = try zip.beginEntry(name: BundleFormat.manifestEntryName, method: 8, crc32: manifest.crc32, compressedSize: deflatedSize, size: manifest.size)
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            try PreparedBody.Storage.spool(offset: offset).copy(to: output, storedSize: deflatedSize, expectedCRC: nil, spool: spool, buffer: &buffer)
        }
        if let key = options.signingKey {
            let signature = try key.signature(for: BundleFormat.signedMessage(bundleDigestHex: digest))
            let block = SignatureBlock(
                publicKey: key.publicKey.rawRepresentation.base64EncodedString(), signedDigest: "sha256:" + digest, signature: signature.base64EncodedString())
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let blockBytes = Array(try encoder.encode(block))
            try zip.addEntry(
                name: BundleFormat.signatureEntryName, method: 0, crc32: FastCRC32.checksum(blockBytes), size: UInt64(blockBytes.count), data: blockBytes)
        }
    }
}

/// The version of the packager tool and library.
public enum PackagerVersion {
    /// Semantic version.
    public static let string = "0.1.0"
}
